"""
The index layer: the offload history in `index.db` (the `writes` and `offloads` tables) and the queries over it.

The per-write statements here are plain `sqlite3`, run inside the store's transaction. The tables are documented in
the README and in `migrations/`; a person can query them with `sqlite3 index.db`.
"""

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

from casstore.database import NOW_SQL

_INSERT_WRITE_SQL = (
    f"INSERT INTO writes (namespace, key, digest, kind, size, reference, written_at) "
    f"VALUES (?, ?, ?, ?, ?, ?, {NOW_SQL})"
)


@dataclass(frozen=True, slots=True)
class OffloadRecord:
    """One tool result that a compactor replaced by references, for the `offloads` table."""

    tool_name: str
    tool_call_id: str | None
    references: Sequence[str]
    original_tokens: int
    saved_tokens: int


def record_write(
    connection: sqlite3.Connection,
    *,
    namespace: str,
    key: str,
    digest: str,
    is_text: bool,
    size: int,
    reference: str,
) -> bool:
    """
    Append one row to `writes`, inside the caller's transaction. The schema's trigger makes the reference visible in
    its namespace (`visible_references`) in the same statement.

    :returns: Whether the reference was visible in `namespace` already. Then its blob is stored: a reference becomes
        visible only in the transaction that stores or finds its blob, and `gc` deletes a blob only when no reference
        to it is visible, both under SQLite's write lock.
    """
    changes_before = connection.total_changes
    connection.execute(_INSERT_WRITE_SQL, (namespace, key, digest, "text" if is_text else "binary", size, reference))
    # The row is one change; the trigger's insert into `visible_references` is another unless the row was there. Any
    # other trigger on these tables would change this count (tests/test_migrations.py checks there is none).
    return connection.total_changes - changes_before == 1


def readable_blob(
    connection: sqlite3.Connection, *, namespace: str, digest: str, reference: str
) -> tuple[int | None, str | None, bytes | None] | None:
    """
    Look up a reference and its blob in one statement (so in one consistent state of the index).

    :returns: None if `reference` is not visible in `namespace`; otherwise the blob's `(size, stored_in, frame)`, all
        None if the blob's row is gone.
    """
    row: tuple[int | None, str | None, bytes | None] | None = connection.execute(
        "SELECT size, stored_in, frame FROM readable_blobs WHERE digest = ? AND namespace = ? AND reference = ?",
        (digest, namespace, reference),
    ).fetchone()
    return row


def record_offloads(
    connection: sqlite3.Connection, *, namespace: str, compaction_id: str, offloads: Sequence[OffloadRecord]
) -> None:
    """Append rows to `offloads`, inside the caller's transaction."""
    connection.executemany(
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


def forget_writes(connection: sqlite3.Connection, *, where: str, parameters: Sequence[object]) -> int:
    """
    Delete the writes matching `where` (an SQL condition over `writes`), and the visibility of references no write
    is left for, inside the caller's transaction.

    :returns: How many writes were deleted.
    """
    deleted = connection.execute(f"DELETE FROM writes WHERE {where}", parameters).rowcount
    if deleted:
        connection.execute(
            "DELETE FROM visible_references "
            "WHERE (namespace, reference) NOT IN (SELECT namespace, reference FROM writes)"
        )
    return deleted


def forget_offloads(connection: sqlite3.Connection, *, where: str, parameters: Sequence[object]) -> int:
    """:returns: How many offloads matching `where` (an SQL condition over `offloads`) were deleted."""
    return connection.execute(f"DELETE FROM offloads WHERE {where}", parameters).rowcount


def unreferenced_digests(connection: sqlite3.Connection) -> list[str]:
    """:returns: Digests of blobs that no write references any more."""
    return [
        row[0] for row in connection.execute("SELECT digest FROM blobs EXCEPT SELECT digest FROM visible_references")
    ]


def is_referenced(connection: sqlite3.Connection, digest: str) -> bool:
    """:returns: Whether any write (in any namespace) references the blob `digest`."""
    return (
        connection.execute("SELECT 1 FROM visible_references WHERE digest = ? LIMIT 1", (digest,)).fetchone()
        is not None
    )


def dangling_writes(connection: sqlite3.Connection) -> list[tuple[str, str]]:
    """:returns: `(namespace, reference)` of writes whose blob row is missing."""
    return [
        (row[0], row[1])
        for row in connection.execute(
            "SELECT namespace, reference FROM writes WHERE digest NOT IN (SELECT digest FROM blobs) ORDER BY id"
        )
    ]
