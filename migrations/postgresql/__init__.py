"""
The PostgreSQL schema of a shared store's index: one `NNNN_name.sql` file per migration, named like its SQLite
counterpart in the folder above and holding the same tables, columns and views in PostgreSQL's dialect.

Installed as `casstore.migrations.postgresql`; `casstore.index.postgres_schema` applies the files in name order, once,
under an advisory lock, and records each in `_casstore_migrations`. Never edit a file that has shipped.
"""
