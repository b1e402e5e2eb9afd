"""
The statements that write a blob's row in the blob layer's catalog, or ask of its times, in each engine's spelling.

SQLite keeps the rows in the table `blob_rows`, a blob's times as integer milliseconds (migration 0019), under the view
`blobs`, which shows them as text and cannot take an upsert; PostgreSQL keeps the table `blobs`, its times as text.
Every other statement of the blob layer reads `blobs` on both engines.
"""

import sqlite3
from dataclasses import dataclass

from casstore.database import NOW_MS_SQL, NOW_SQL, SHIFTED_NOW_MS_SQL, SHIFTED_NOW_SQL

# The ids of the blobs another blob needs (its dictionary, or its delta's base), on both engines.
NEEDED_IDS_SQL = "SELECT needs_id FROM blob_dependencies WHERE needs_id IS NOT NULL"


@dataclass(frozen=True, slots=True)
class CatalogStatements:
    """The statements that write a blob's row, or ask of its times, in one engine's table."""

    put: str
    import_: str
    put_new: str
    confirm: str
    refresh: str
    delete: str
    collectable: str
    """Every blob gc may delete, `(digest, stored_size)`; its one parameter is the grace period's `ago`."""
    unneeded_if_collectable: str
    """The blob `digest`'s `(id, stored_in)` if no reference names it and it was not seen within the grace period
    (then the grace's `ago`), whether or not another blob needs it: the caller asks that of the ids it read."""
    delete_by_id: str


def _catalog_statements(table: str, *, now: str, shifted_now: str, given_time: str) -> CatalogStatements:
    # A blob is collectable when no reference to it is visible, no other blob needs it (as its dictionary or base),
    # and it was not seen within the grace period: a dictionary in use that nothing was written with since the grace
    # period began goes too (a store whose writes are all forgotten shrinks to an empty one; a writer then trains anew).
    # What is needed is read in one pass (`NOT IN`): SQLite keeps no index of it (migration 0020).
    unreferenced = (
        f"last_seen <= {shifted_now} AND NOT EXISTS (SELECT 1 FROM namespace_references WHERE blob_id = {table}.id)"
    )
    collectable = f"{unreferenced} AND id NOT IN ({NEEDED_IDS_SQL})"
    columns = "(digest, size, stored_size, stored_in, first_seen, last_seen)"
    return CatalogStatements(
        put=f"INSERT INTO {table} {columns} VALUES (?, ?, ?, ?, {now}, {now}) "
        "ON CONFLICT (digest) DO UPDATE SET "
        "last_seen = excluded.last_seen, stored_size = excluded.stored_size, stored_in = excluded.stored_in "
        "RETURNING id",
        # A blob copied from another store keeps its times (given as text); a row already there keeps its own.
        import_=f"INSERT INTO {table} {columns} VALUES (?, ?, ?, ?, {given_time}, {given_time}) "
        "ON CONFLICT (digest) DO UPDATE SET stored_size = excluded.stored_size, stored_in = excluded.stored_in "
        "RETURNING id",
        # A learned frame is recorded only for content that has no row yet (see `_record_dependency`).
        put_new=f"INSERT INTO {table} {columns} VALUES (?, ?, ?, ?, {now}, {now}) "
        "ON CONFLICT (digest) DO NOTHING RETURNING id",
        confirm=f"SELECT stored_in, last_seen < {shifted_now} FROM {table} WHERE digest = ?",
        refresh=f"UPDATE {table} SET last_seen = {now} WHERE digest = ?",
        delete=f"DELETE FROM {table} WHERE digest = ? RETURNING id, stored_in, stored_size",
        collectable=f"SELECT digest, stored_size FROM {table} WHERE {collectable}",
        unneeded_if_collectable=f"SELECT id, stored_in FROM {table} WHERE digest = ? AND {unreferenced}",
        delete_by_id=f"DELETE FROM {table} WHERE id = ?",
    )


_SQLITE_CATALOG = _catalog_statements(
    "blob_rows",
    now=NOW_MS_SQL,
    shifted_now=SHIFTED_NOW_MS_SQL,
    given_time="CAST(round((julianday(?) - 2440587.5) * 86400000) AS INTEGER)",
)
_POSTGRES_CATALOG = _catalog_statements("blobs", now=NOW_SQL, shifted_now=SHIFTED_NOW_SQL, given_time="?")


def catalog_of(connection: object) -> CatalogStatements:
    return _SQLITE_CATALOG if isinstance(connection, sqlite3.Connection) else _POSTGRES_CATALOG
