"""
The index layer: the offload history in `index.db` (the `writes` and `offloads` tables) and the set of references
each namespace may read (`visible_references`), which this module alone keeps.

The per-write statements here are plain `sqlite3`, run inside the repository's transaction. The tables are
documented in the docs and in `migrations/`; a person can query them with `sqlite3 index.db`.
"""

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from casstore.database import NOW_SQL, SHIFTED_NOW_SQL, UnitOfWork, ago
from casstore.prepared import PreparedWrite

_INSERT_WRITE_SQL = (
    f"INSERT INTO writes (namespace, key, digest, kind, size, reference, written_at) "
    f"VALUES (?, ?, ?, ?, ?, ?, {NOW_SQL})"
)
# Returns a row only when the reference was not visible yet.
_MAKE_VISIBLE_SQL = (
    "INSERT INTO visible_references (digest, namespace, reference) VALUES (?, ?, ?) ON CONFLICT DO NOTHING RETURNING 1"
)
_IS_VISIBLE_SQL = "SELECT 1 FROM visible_references WHERE digest = ? AND namespace = ? AND reference = ?"


@dataclass(frozen=True, slots=True)
class OffloadRecord:
    """One tool result that a compactor replaced by references, for the `offloads` table."""

    tool_name: str
    tool_call_id: str | None
    references: Sequence[str]
    original_tokens: int
    saved_tokens: int


def record_write(work: UnitOfWork, namespace: str, write: PreparedWrite) -> bool:
    """
    Append one row to `writes` and make its reference visible in `namespace`, inside the caller's transaction.

    :returns: Whether the reference was visible in its namespace already. Then its blob is stored: a reference
        becomes visible only in the transaction that stores or finds its blob, and `gc` deletes a blob only when no
        reference to it is visible, both under SQLite's write lock.
    """
    execute = work.connection.execute
    digest, reference = write.digest, write.reference
    kind = "text" if write.is_text else "binary"
    execute(_INSERT_WRITE_SQL, (namespace, write.key, digest, kind, len(write.data), reference))
    return execute(_MAKE_VISIBLE_SQL, (digest, namespace, reference)).fetchone() is None


def import_writes(work: UnitOfWork, rows: Sequence[tuple[str, str, str, str, int, str, str]]) -> None:
    """
    Append writes copied from another store, with their own times, and make their references visible, inside the
    caller's transaction.

    :param rows: `(namespace, key, digest, kind, size, reference, written_at)` for each write, as `writes` holds them.
    """
    connection = work.connection
    connection.executemany(
        "INSERT INTO writes (namespace, key, digest, kind, size, reference, written_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
        rows,
    )
    connection.executemany(
        "INSERT INTO visible_references (digest, namespace, reference) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
        sorted({(row[2], row[0], row[5]) for row in rows}),
    )


def import_offloads(work: UnitOfWork, rows: Sequence[tuple[str, str, str, str | None, str, int, int, str]]) -> None:
    """
    Append offloads copied from another store, with their own times, inside the caller's transaction.

    :param rows: `(compaction_id, namespace, tool_name, tool_call_id, refs, original_tokens, saved_tokens,
        offloaded_at)` for each offload, as `offloads` holds them.
    """
    work.connection.executemany(
        "INSERT INTO offloads (compaction_id, namespace, tool_name, tool_call_id, refs, original_tokens, "
        "saved_tokens, offloaded_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        rows,
    )


def is_visible(connection: sqlite3.Connection, *, namespace: str, digest: str, reference: str) -> bool:
    """:returns: Whether `reference` (to the blob `digest`) was written in `namespace` and is not forgotten."""
    return connection.execute(_IS_VISIBLE_SQL, (digest, namespace, reference)).fetchone() is not None


def record_offloads(work: UnitOfWork, *, namespace: str, compaction_id: str, offloads: Sequence[OffloadRecord]) -> None:
    """Append rows to `offloads`, inside the caller's transaction."""
    work.connection.executemany(
        f"INSERT INTO offloads (compaction_id, namespace, tool_name, tool_call_id, refs, original_tokens, "
        f"saved_tokens, offloaded_at) VALUES (?, ?, ?, ?, ?, ?, ?, {NOW_SQL})",
        [
            (
                compaction_id,
                namespace,
                offload.tool_name,
                offload.tool_call_id,
                json.dumps(list(offload.references)),
                offload.original_tokens,
                offload.saved_tokens,
            )
            for offload in offloads
        ],
    )


def forget(work: UnitOfWork, *, namespace: str | None, older_than: timedelta | None) -> tuple[int, int]:
    """
    Delete the writes and offloads of `namespace` (any namespace if None) older than `older_than` (any age if None),
    and the visibility of every reference no write is left for, inside the caller's transaction.

    :returns: How many writes and how many offloads were deleted. With neither argument, nothing is deleted.
    """
    if namespace is None and older_than is None:
        return 0, 0
    connection = work.connection
    counts = []
    for table, column in (("writes", "written_at"), ("offloads", "offloaded_at")):
        clauses: list[str] = []
        parameters: list[object] = []
        if namespace is not None:
            clauses.append("namespace = ?")
            parameters.append(namespace)
        if older_than is not None:
            clauses.append(f"{column} < {SHIFTED_NOW_SQL}")
            parameters.append(ago(older_than))
        counts.append(connection.execute(f"DELETE FROM {table} WHERE {' AND '.join(clauses)}", parameters).rowcount)
    if counts[0]:
        connection.execute(
            "DELETE FROM visible_references "
            "WHERE (namespace, reference) NOT IN (SELECT namespace, reference FROM writes)"
        )
    return counts[0], counts[1]


def unreferenced_digests(connection: sqlite3.Connection) -> list[str]:
    """
    :returns: Digests of blobs that no write references any more and that nothing else keeps: no other blob needs
        them (as its dictionary or base) and they are not a dictionary in use.
    """
    rows = connection.execute(
        "SELECT digest FROM blobs b WHERE NOT EXISTS (SELECT 1 FROM visible_references v WHERE v.digest = b.digest) "
        "AND NOT EXISTS (SELECT 1 FROM blob_dependencies d WHERE d.needs_id = b.id) "
        "AND NOT EXISTS (SELECT 1 FROM dictionaries k WHERE k.blob_id = b.id AND k.active = 1)"
    )
    return [row[0] for row in rows]


def dangling_writes(connection: sqlite3.Connection) -> list[tuple[str, str]]:
    """:returns: `(namespace, reference)` of writes whose blob row is missing."""
    return [
        (row[0], row[1])
        for row in connection.execute(
            "SELECT namespace, reference FROM writes WHERE digest NOT IN (SELECT digest FROM blobs) ORDER BY id"
        )
    ]
