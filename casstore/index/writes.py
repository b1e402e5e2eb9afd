"""
The index layer: the offload history in the index (the `writes`, `offloads` and `compactions` tables), and which
references each namespace may read: a reference is visible in a namespace while a `writes` row of that namespace
names it.

The per-write statements here are plain SQL, the same on both engines, run inside the repository's transaction. The
tables are described in docs/schema.md; a person can query them with `sqlite3 index.db` or `psql`.
"""

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from casstore.index.prepared import PreparedWrite
from casstore.index.queries import WritePosition
from casstore.index.work import NOW_SQL, SHIFTED_NOW_SQL, UnitOfWork, ago
from casstore.references import reference_kind

_WRITE_COLUMNS = "namespace, key, blob_id, kind, extension, size, written_at"
# A write names its blob by id, so it is appended only if its blob has a row: then the caller needs no look-up of its
# own to know the blob is there (it looks only when `last_seen` is due, or the blob is a file that can vanish). A row
# counts: the statement runs in the caller's transaction, and gc deletes a blob only in one of its own, after the last
# write naming it is gone.
_APPEND_IF_STORED_SQL = (
    f"INSERT INTO write_rows ({_WRITE_COLUMNS}) SELECT ?, ?, id, ?, ?, ?, {NOW_SQL} FROM blobs WHERE digest = ?"
)
_IS_VISIBLE_SQL = (
    "SELECT 1 FROM blobs b JOIN write_rows w ON w.blob_id = b.id "
    "WHERE b.digest = ? AND w.namespace = ? AND w.kind = ? AND w.extension = ? LIMIT 1"
)
# What nothing keeps: no write names the blob, no kept blob is a delta on it.
_UNREFERENCED_SQL = (
    "SELECT digest FROM blobs b WHERE NOT EXISTS (SELECT 1 FROM write_rows w WHERE w.blob_id = b.id) "
    "AND NOT EXISTS (SELECT 1 FROM blobs d WHERE d.base_id = b.id)"
)


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


@dataclass(frozen=True, slots=True)
class ArchiveRecord:
    """
    One transcript `StepArchiveCompactor` wrote for the messages it took out of the conversation, for `archives`.

    `references` holds the transcript's reference first, then those of the images and files stored beside it.
    `first_step` and `last_step` number the archived steps across the run (None when no step was among the
    messages); `saved_tokens` is what the conversation lost in tokens, the note that replaced them counted.
    """

    references: Sequence[str]
    messages: int
    first_step: int | None
    last_step: int | None
    original_tokens: int
    saved_tokens: int


def record_write(work: UnitOfWork, namespace: str, write: PreparedWrite) -> bool:
    """
    Append one write to the history, which makes its reference visible in `namespace`, inside the caller's
    transaction, if its blob has a row.

    :returns: Whether the blob's row was there (and the write recorded): then the caller needs no look-up to know it
        is stored. If not, nothing was recorded: the caller stores the blob and records the write again.
    """
    kind, extension = reference_kind(write.reference)
    return bool(
        work.change(_APPEND_IF_STORED_SQL, (namespace, write.key, kind, extension, len(write.data), write.digest))
    )


def import_writes(work: UnitOfWork, rows: Sequence[tuple[str, str, str, str, int, str, str]]) -> None:
    """
    Append writes copied from another store, with their own times, inside the caller's transaction, after their
    blobs' rows (a write whose blob has no row is not recorded).

    :param rows: `(namespace, key, digest, kind, size, reference, written_at)` for each write, as `writes` holds them.
    """
    work.connection.executemany(
        f"INSERT INTO write_rows ({_WRITE_COLUMNS}) SELECT ?, ?, id, ?, ?, ?, ? FROM blobs WHERE digest = ?",
        [
            (namespace, key, kind, reference_kind(reference)[1], size, written_at, digest)
            for namespace, key, digest, kind, size, reference, written_at in rows
        ],
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
    parameters = (digest, namespace, *reference_kind(reference))
    return connection.execute(_IS_VISIBLE_SQL, parameters).fetchone() is not None


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


def record_archive(work: UnitOfWork, *, namespace: str, compaction_id: str, archive: ArchiveRecord) -> None:
    """Append one row to `archives`, inside the caller's transaction."""
    work.connection.execute(
        f"INSERT INTO archives (compaction_id, namespace, refs, messages, first_step, last_step, original_tokens, "
        f"saved_tokens, archived_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, {NOW_SQL})",
        (
            compaction_id,
            namespace,
            json.dumps(list(archive.references)),
            archive.messages,
            archive.first_step,
            archive.last_step,
            archive.original_tokens,
            archive.saved_tokens,
        ),
    )


def import_archives(work: UnitOfWork, rows: Sequence[tuple[object, ...]]) -> None:
    """
    Append archives copied from another store, with their own times, inside the caller's transaction.

    :param rows: `(compaction_id, namespace, refs, messages, first_step, last_step, original_tokens, saved_tokens,
        archived_at)` for each archive, as `archives` holds them.
    """
    work.connection.executemany(
        "INSERT INTO archives (compaction_id, namespace, refs, messages, first_step, last_step, original_tokens, "
        "saved_tokens, archived_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        rows,
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
    blob_ids: set[int] = set()
    # Compactions and archives go with their offloads, by the same rule; they are not counted apart (gc reports writes
    # and offloads).
    for table, column in (
        ("write_rows", "written_at"),
        ("offloads", "offloaded_at"),
        ("compactions", "compacted_at"),
        ("archives", "archived_at"),
    ):
        clauses: list[str] = []
        parameters: list[object] = []
        if namespace is not None:
            clauses.append("namespace = ?")
            parameters.append(namespace)
        if older_than is not None:
            clauses.append(f"{column} < {SHIFTED_NOW_SQL}")
            parameters.append(ago(older_than))
        if through is not None and table == "write_rows":
            # Row values order the two columns as one key: ties of `written_at` are broken by the row id.
            clauses.append("(written_at, id) <= (?, ?)")
            parameters.extend((through.written_at, through.write_id))
        elif through is not None:
            clauses.append(f"{column} <= ?")
            parameters.append(through.written_at)
        statement = f"DELETE FROM {table} WHERE {' AND '.join(clauses)}"
        if with_digests and table == "write_rows":
            rows = connection.execute(f"{statement} RETURNING blob_id", parameters).fetchall()
            blob_ids.update(row[0] for row in rows)
            counts.append(len(rows))
        else:
            counts.append(connection.execute(statement, parameters).rowcount)
    return Forgotten(writes=counts[0], offloads=counts[1], digests=_digests_of(connection, blob_ids))


def _digests_of(connection: sqlite3.Connection, blob_ids: set[int]) -> frozenset[str]:
    # In batches: an engine limits the parameters of one statement.
    ordered = sorted(blob_ids)
    digests: set[str] = set()
    for start in range(0, len(ordered), 500):
        batch = ordered[start : start + 500]
        marks = ", ".join("?" * len(batch))
        digests.update(row[0] for row in connection.execute(f"SELECT digest FROM blobs WHERE id IN ({marks})", batch))
    return frozenset(digests)


def unreferenced_digests(connection: sqlite3.Connection) -> list[str]:
    """
    :returns: Digests of blobs that no write references any more and that no kept blob needs as its delta base.
    """
    return [row[0] for row in connection.execute(_UNREFERENCED_SQL)]


def dangling_writes(connection: sqlite3.Connection) -> list[tuple[str, str]]:
    """
    :returns: `(namespace, key)` of writes whose blob row is missing (a damaged index: the row, and with it the
        digest the write named, was deleted by hand).
    """
    return [
        (row[0], row[1])
        for row in connection.execute(
            "SELECT namespace, key FROM write_rows w "
            "WHERE NOT EXISTS (SELECT 1 FROM blobs b WHERE b.id = w.blob_id) ORDER BY id"
        )
    ]
