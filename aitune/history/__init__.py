"""The history of profiles: every run kept in one database, checked for regressions, and the ledger of predictions.

Torch-free. SQLAlchemy is imported by `aitune.history.store` and `aitune.history.schema` only, so the
statistics (`check`, `steps`, `ledger`) and the records (`record`) load without it.
"""
