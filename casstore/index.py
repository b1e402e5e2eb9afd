"""
The index layer: the offload history in `index.db` (the `writes` and `offloads` tables) and the set of references
each namespace may read (`visible_references`), which this module alone keeps.

It also records what each compaction did to the conversation (the `compactions` table). The per-write statements
here are plain `sqlite3`, run inside the repository's transaction. The tables are documented in the docs and in
`migrations/`; a person can query them with `sqlite3 index.db`.
"""

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from casstore.database import NOW_SQL, SHIFTED_NOW_SQL, UnitOfWork, ago
from casstore.index_queries import WritePosition
from casstore.prepared import PreparedWrite

_INSERT_WRITE_SQL = (
    f"INSERT INTO writes (namespace, key, digest, kind, size, reference, written_at) "
    f"VALUES (?, ?, ?, ?, ?, ?, {NOW_SQL})"
)
# Inserts a row only when the reference was not visible yet; the count of rows it changed says whether it did. A
# RETURNING clause would say the same at a cost: on SQLite it materializes its rows, and that was most of what the
# layers added to a duplicate write (measured with `python -m benchmarks.duplicate_writes --instructions`).
_MAKE_VISIBLE_SQL = (
    "INSERT INTO visible_references (digest, namespace, reference) VALUES (?, ?, ?) ON CONFLICT DO NOTHING"
)
# The visibility no write is left for. Written with EXCEPT (a sort of each table) because SQLite runs a row-value
# `NOT IN (subquery)` as a scan of the subquery per row: 66 s instead of 0.4 s on 38,000 writes (benchmarks.gc_disk).
_FORGET_VISIBILITY_SQL = """
    DELETE FROM visible_references WHERE (digest, namespace, reference) IN (
        SELECT digest, namespace, reference FROM visible_references
        EXCEPT SELECT digest, namespace, reference FROM writes
    )
"""
_IS_VISIBLE_SQL = "SELECT 1 FROM visible_references WHERE digest = ? AND namespace = ? AND reference = ?"


@dataclass(frozen=True, slots=True)
class OffloadRecord:
    """One tool result that a compactor replaced by references, for the `offloads` table."""

    tool_name: str
    tool_call_id: str | None
    references: Sequence[str]
    original_tokens: int
    saved_tokens: int


@dataclass(frozen=True, slots=True)
class CompactionRecord:
    """
    One `compact` call that found the conversation over its target, for the `compactions` table.

    `tokens_after` equals `tokens_before` when the call found nothing it could offload. `context_window` is the
    model's window in tokens, or None when the compactor was not told it.
    """

    tokens_before: int
    tokens_after: int
    target_tokens: int
    context_window: int | None = None


def record_write(work: UnitOfWork, namespace: str, write: PreparedWrite) -> bool:
    """
    Append one row to `writes` and make its reference visible in `namespace`, inside the caller's transaction.

    :returns: Whether the reference was visible in its namespace already. Then its blob is stored: a reference
        becomes visible only in the transaction that stores or finds its blob, and `gc` deletes a blob only when no
        reference to it is visible, both under SQLite's write lock.
    """
    change = work.change
    digest, reference = write.digest, write.reference
    kind = "text" if write.is_text else "binary"
    change(_INSERT_WRITE_SQL, (namespace, write.key, digest, kind, len(write.data), reference))
    # The rows this statement itself inserted, 0 on a conflict: exact whatever triggers the schema may hold, unlike a
    # count of the connection's total changes.
    return change(_MAKE_VISIBLE_SQL, (digest, namespace, reference)) == 0


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


def record_compaction(work: UnitOfWork, *, namespace: str, compaction_id: str, compaction: CompactionRecord) -> None:
    """Append one row to `compactions`, inside the caller's transaction."""
    work.connection.execute(
        f"INSERT INTO compactions (compaction_id, namespace, tokens_before, tokens_after, target_tokens, "
        f"context_window, compacted_at) VALUES (?, ?, ?, ?, ?, ?, {NOW_SQL})",
        (
            compaction_id,
            namespace,
            compaction.tokens_before,
            compaction.tokens_after,
            compaction.target_tokens,
            compaction.context_window,
        ),
    )


def import_compactions(work: UnitOfWork, rows: Sequence[tuple[str, str, int, int, int, int | None, str]]) -> None:
    """
    Append compactions copied from another store, with their own times, inside the caller's transaction; a
    compaction whose id the target holds already is left as it is.

    :param rows: `(compaction_id, namespace, tokens_before, tokens_after, target_tokens, context_window,
        compacted_at)` for each compaction, as `compactions` holds them.
    """
    work.connection.executemany(
        "INSERT INTO compactions (compaction_id, namespace, tokens_before, tokens_after, target_tokens, "
        "context_window, compacted_at) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (compaction_id) DO NOTHING",
        rows,
    )


@dataclass(frozen=True, slots=True)
class Forgotten:
    """What `forget` deleted: counts, and (when asked for) the digests of the blobs the forgotten writes named."""

    writes: int = 0
    offloads: int = 0
    digests: frozenset[str] = frozenset()


def forget(
    work: UnitOfWork,
    *,
    namespace: str | None,
    older_than: timedelta | None,
    through: WritePosition | None = None,
    with_digests: bool = False,
) -> Forgotten:
    """
    Delete the writes, offloads and compactions of `namespace` (any namespace if None) older than `older_than` (any
    age if None) and, with `through`, at or before that write (offloads and compactions recorded no later than it),
    and the visibility of every reference no write is left for, inside the caller's transaction.

    :param through: The newest write to forget, in the order `(written_at, id)`: retention by size forgets every
        write up to one (see `index_queries.retention_cut`).
    :param with_digests: Also return the digests the forgotten writes referenced.
    :returns: What was deleted. With neither `namespace`, `older_than` nor `through`, nothing is deleted.
    """
    if namespace is None and older_than is None and through is None:
        return Forgotten()
    connection = work.connection
    counts = []
    digests: set[str] = set()
    # Compactions go with their offloads, by the same rule; they are not counted apart (gc reports writes and offloads).
    for table, column in (("writes", "written_at"), ("offloads", "offloaded_at"), ("compactions", "compacted_at")):
        clauses: list[str] = []
        parameters: list[object] = []
        if namespace is not None:
            clauses.append("namespace = ?")
            parameters.append(namespace)
        if older_than is not None:
            clauses.append(f"{column} < {SHIFTED_NOW_SQL}")
            parameters.append(ago(older_than))
        if through is not None and table == "writes":
            # Row values order the two columns as one key: ties of `written_at` are broken by the row id.
            clauses.append("(written_at, id) <= (?, ?)")
            parameters.extend((through.written_at, through.write_id))
        elif through is not None:
            clauses.append(f"{column} <= ?")
            parameters.append(through.written_at)
        statement = f"DELETE FROM {table} WHERE {' AND '.join(clauses)}"
        if with_digests and table == "writes":
            rows = connection.execute(f"{statement} RETURNING digest", parameters).fetchall()
            digests.update(row[0] for row in rows)
            counts.append(len(rows))
        else:
            counts.append(connection.execute(statement, parameters).rowcount)
    if counts[0]:
        connection.execute(_FORGET_VISIBILITY_SQL)
    return Forgotten(writes=counts[0], offloads=counts[1], digests=frozenset(digests))


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
