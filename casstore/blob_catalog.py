"""
The statements that write a blob's row in the blob layer's catalog, or ask of its times, in each engine's spelling.

SQLite keeps the rows in the table `blob_rows`, a blob's times as integer milliseconds (migration 0019), under the view
`blobs`, which shows them as text and cannot take an upsert; PostgreSQL keeps the table `blobs`, its times as text.
Every other statement of the blob layer reads `blobs` on both engines.
"""

import sqlite3
from dataclasses import dataclass

from casstore.database import NOW_MS_SQL, NOW_SQL, SHIFTED_NOW_MS_SQL, SHIFTED_NOW_SQL


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
    delete_if_collectable: str
    """The blob `digest` deleted if gc may delete it, returning `(id, stored_in)`; then the grace's `ago`."""


def _catalog_statements(table: str, *, now: str, shifted_now: str, given_time: str, unneeded: str) -> CatalogStatements:
    # A blob is collectable when no reference to it is visible, no other blob needs it (as its dictionary or base),
    # and it was not seen within the grace period: a dictionary in use that nothing was written with since the grace
    # period began goes too (a store whose writes are all forgotten shrinks to an empty one; a writer then trains anew).
    collectable = (
        f"last_seen <= {shifted_now} "
        f"AND NOT EXISTS (SELECT 1 FROM namespace_references WHERE blob_id = {table}.id) "
        f"AND {unneeded.format(table=table)}"
    )
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
        delete_if_collectable=f"DELETE FROM {table} WHERE digest = ? AND {collectable} RETURNING id, stored_in",
    )


# That no other blob needs it. In SQLite (migration 0020) the deltas' slots are indexed by what they need
# (`frame_slots_by_base`), and the slots that need a dictionary are read only for a dictionary: frames are compressed
# only with a trained dictionary, a row of `dictionaries`. PostgreSQL's `blob_dependencies` has an index of it all.
_SQLITE_UNNEEDED = (
    "NOT EXISTS (SELECT 1 FROM frame_slots s WHERE s.needs_id = {table}.id AND s.is_delta = 1) "
    "AND NOT ({table}.id IN (SELECT k.blob_id FROM dictionaries k) "
    "AND EXISTS (SELECT 1 FROM frame_slots s WHERE s.needs_id = {table}.id AND s.is_delta = 0))"
)
_POSTGRES_UNNEEDED = "NOT EXISTS (SELECT 1 FROM blob_dependencies WHERE needs_id = {table}.id)"

_SQLITE_CATALOG = _catalog_statements(
    "blob_rows",
    now=NOW_MS_SQL,
    shifted_now=SHIFTED_NOW_MS_SQL,
    given_time="CAST(round((julianday(?) - 2440587.5) * 86400000) AS INTEGER)",
    unneeded=_SQLITE_UNNEEDED,
)
_POSTGRES_CATALOG = _catalog_statements(
    "blobs", now=NOW_SQL, shifted_now=SHIFTED_NOW_SQL, given_time="?", unneeded=_POSTGRES_UNNEEDED
)


def catalog_of(connection: object) -> CatalogStatements:
    return _SQLITE_CATALOG if isinstance(connection, sqlite3.Connection) else _POSTGRES_CATALOG
