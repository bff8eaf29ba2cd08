"""Capture: region discovery, instrumentation and the profiler session (everything here imports torch)."""
