"""
The index: the database every store keeps its catalog and history in, and the typed queries over it.

- `database`: the SQLite engine (`index.db`): one connection, its transactions, giving space back; the parts it is
  made of are `sqlite_file` (opening a file: settings, schema check, migrations, the empty stand-in),
  `sqlite_transaction` (holding the connection, write transactions) and `sqlite_space` (checkpoints, free pages).
- `work`: what both engines share with the layers above: `UnitOfWork` and the SQL for times.
- `postgres`, `postgres_connect`, `postgres_schema`: the PostgreSQL engine of a shared store.
- `schema`: the migrations runner (the SQL files are `casstore.migrations`).
- `writes`, `offloads`, `queries`: what is written and asked of the tables, as typed functions.
- `report_queries` (with `report_scope`, `report_savings`, `report_writes`): the questions behind `casstore report`.
- `prepared`: a write hashed and checked before any lock is taken.

Imports only the ground modules (`casstore.errors`, `casstore.references`, ...), never a layer above.
"""
