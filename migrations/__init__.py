"""
The SQLite schema of `index.db`: one `NNNN_name.sql` file per sqlite-utils migration, applied in file-name order.

This folder is installed as `casstore.migrations` (see `pyproject.toml`), holding only these SQL files;
`casstore/index/schema.py` turns them into a `sqlite_utils.migrations.Migrations` set. Nothing installs a top-level
`migrations` package. To change the schema, add a file with the next number; never edit one that has shipped, since
indexes made by older releases have already applied it.
"""
