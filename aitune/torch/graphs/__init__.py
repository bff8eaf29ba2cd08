"""What a wrapped module's calls were: each call's input structure, and the graph specs and samples they fall into."""
