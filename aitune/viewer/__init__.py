"""The Panel viewer: compare two profile documents (or read one) in a browser, without torch.

Roles, one file each: `sources` (reading files safely, a tune folder's report included),
`selection` (what the user picked), `store` (loaded documents and the tables derived from them via
`aitune.report`/`aitune.compare`/`aitune.suggest`), `tables` and `tree` (pure functions from
documents to rows), `figures` (plain functions from tables to Bokeh figures), `views`, `overview`
and `targets` (layout only) and `app`.
"""
