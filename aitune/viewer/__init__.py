"""The Panel viewer: compare two profile documents (or read one) in a browser, without torch.

Roles, one file each: `sources` (reading files safely), `selection` (what the user picked),
`store` (loaded documents and the tables derived from them via `aitune.report`/`aitune.compare`),
`figures` (plain functions from tables to Bokeh figures), `views` (layout only) and `app`.
"""
