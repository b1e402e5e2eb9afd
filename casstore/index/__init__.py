"""
The index: the database every store keeps its catalog and history in, and the typed queries over it.

- `database`: the SQLite engine (`index.db`), units of work, the SQL both engines share.
- `postgres`, `postgres_connect`, `postgres_schema`: the PostgreSQL engine of a shared store.
- `schema`: the migrations runner (the SQL files are `casstore.migrations`).
- `writes`, `offloads`, `queries`: what is written and asked of the tables, as typed functions.
- `report_queries` (with `report_scope`, `report_savings`, `report_writes`): the questions behind `casstore report`.
- `prepared`: a write hashed and checked before any lock is taken.

Imports only the ground modules (`casstore.errors`, `casstore.references`, ...), never a layer above.
"""
