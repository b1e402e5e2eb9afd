"""
The index layer: the offload history in `index.db` (the `writes` and `offloads` tables) and the set of references
each namespace may read (`visible_references`), which this module alone keeps.

Since migration 0011, `writes` and `visible_references` are views over what is stored: `namespaces`, one row per
distinct (namespace, reference) in `namespace_references` (digest, kind, extension and size, stored once; the reference
is derived from them), and `write_log` (which reference, the key, when, in milliseconds). This module writes those.
Since migration 0016 a reference is found by its blob's id (`namespace_references.blob_id`, which triggers on `blobs`
keep), asked of `blobs` by digest in the same statement.

It also records what each compaction did to the conversation (the `compactions` table). The per-write statements
here are plain `sqlite3`, run inside the repository's transaction. The tables are documented in the docs and in
`migrations/`; a person can query them with `sqlite3 index.db`.
"""

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from casstore.database import NOW_MS_SQL, NOW_SQL, SHIFTED_NOW_MS_SQL, SHIFTED_NOW_SQL, UnitOfWork, ago
from casstore.index_queries import REFERENCE_OF_DIGEST, WritePosition
from casstore.key_stems import MAX_KEY_STEMS, KeyParts, split_key
from casstore.prepared import PreparedWrite
from casstore.references import reference_kind

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

# A write is a `write_log` row pointing at its namespace's reference (migration 0011): looked up first, as the
# reference is visible already for every repeated write; made (with its namespace, the first time) otherwise. A
# reference is found by its blob's id (migration 0016), which `blobs`' own index of digests gives in the same
# statement. A write commits only with its blob's row (stored, or confirmed), and a blob row made again takes the
# references that waited for it (trigger `blobs_attach_references`), so a write needs no look-up of a reference whose
# blob row is missing: it finds that reference by id once the row is back.
_BLOB_ID_OF_DIGEST = "(SELECT id FROM blobs WHERE digest = ?)"
_FIND_REFERENCE_SQL = (
    f"SELECT id FROM namespace_references WHERE blob_id = {_BLOB_ID_OF_DIGEST} "
    "AND namespace_id = (SELECT id FROM namespaces WHERE namespace = ?) AND is_binary = ? AND extension = ?"
)
# A reference whose blob row is missing has no blob id: the unique index's NULL entries are those references only.
_FIND_REFERENCE_WITHOUT_BLOB_SQL = (
    "SELECT id FROM namespace_references WHERE blob_id IS NULL AND digest = ? "
    "AND namespace_id = (SELECT id FROM namespaces WHERE namespace = ?) AND is_binary = ? AND extension = ?"
)
_IS_VISIBLE_SQL = (
    f"SELECT 1 FROM namespace_references r WHERE {REFERENCE_OF_DIGEST} "
    "AND r.namespace_id = (SELECT id FROM namespaces WHERE namespace = ?) AND r.is_binary = ? AND r.extension = ?"
)
_ADD_NAMESPACE_SQL = (
    "INSERT INTO namespaces (namespace) SELECT ? WHERE NOT EXISTS (SELECT 1 FROM namespaces WHERE namespace = ?) "
    "ON CONFLICT DO NOTHING"
)
# Nothing returned: a concurrent writer (PostgreSQL) made the same reference first; it is then looked up again.
_ADD_REFERENCE_SQL = (
    "INSERT INTO namespace_references (namespace_id, blob_id, digest, is_binary, extension, size) "
    f"VALUES ((SELECT id FROM namespaces WHERE namespace = ?), {_BLOB_ID_OF_DIGEST}, ?, ?, ?, ?) "
    "ON CONFLICT DO NOTHING RETURNING id"
)
# The same in SQLite, where a reference keeps its digest only while its blob row is missing (migration 0018): the
# blob's row holds it otherwise. The same parameters; `WHERE true` keeps SQLite from reading ON CONFLICT as a join's.
_ADD_REFERENCE_SQLITE_SQL = (
    "INSERT INTO namespace_references (namespace_id, blob_id, digest, is_binary, extension, size) "
    "SELECT n.id, b.id, CASE WHEN b.id IS NULL THEN d.digest END, d.is_binary, d.extension, d.size "
    "FROM (SELECT ? AS namespace, ? AS digest, ? AS lookup, ? AS is_binary, ? AS extension, ? AS size) d "
    "JOIN namespaces n ON n.namespace = d.namespace LEFT JOIN blobs b ON b.digest = d.lookup WHERE true "
    "ON CONFLICT DO NOTHING RETURNING id"
)
_INSERT_WRITE_SQL = f"INSERT INTO write_log (reference_id, key, written_at) VALUES (?, ?, {NOW_MS_SQL})"
# A repeated write in one statement: the reference found and the write appended, or nothing changed (the reference is
# not visible yet). One statement where the look-up and the insert were two, which pays for the look-up of the blob's
# id in `blobs` that finding a reference by its blob's id takes (migration 0016).
_APPEND_REPEATED_WRITE_SQL = (
    f"INSERT INTO write_log (reference_id, key, written_at) SELECT id, ?, {NOW_MS_SQL} FROM namespace_references "
    f"WHERE blob_id = {_BLOB_ID_OF_DIGEST} AND namespace_id = (SELECT id FROM namespaces WHERE namespace = ?) "
    "AND is_binary = ? AND extension = ?"
)
# SQLite keeps a key's stem once (migration 0021, `casstore.key_stems`): a write names its stem's row, found in the
# same statement. A stem without a row (past `MAX_KEY_STEMS`, or a key without one) leaves the key whole. The first
# four parameters are the step, the whole key, the rest of the key and the stem (NULL: none).
_SPLIT_KEY_COLUMNS = "reference_id, key_step, key_stem_id, key, written_at"
_SPLIT_KEY_VALUES = "CASE WHEN s.id IS NULL THEN NULL ELSE ? END, s.id, CASE WHEN s.id IS NULL THEN ? ELSE ? END"
_KEY_STEM_JOIN = "LEFT JOIN key_stems s ON s.stem = ?"
_INSERT_WRITE_SQLITE_SQL = (
    f"INSERT INTO write_log ({_SPLIT_KEY_COLUMNS}) SELECT ?, {_SPLIT_KEY_VALUES}, {NOW_MS_SQL} "
    f"FROM (SELECT 1) {_KEY_STEM_JOIN}"
)
_APPEND_REPEATED_WRITE_SQLITE_SQL = (
    f"INSERT INTO write_log ({_SPLIT_KEY_COLUMNS}) SELECT r.id, {_SPLIT_KEY_VALUES}, {NOW_MS_SQL} "
    f"FROM namespace_references r {_KEY_STEM_JOIN} "
    f"WHERE r.blob_id = {_BLOB_ID_OF_DIGEST} AND r.namespace_id = (SELECT id FROM namespaces WHERE namespace = ?) "
    "AND r.is_binary = ? AND r.extension = ?"
)
# The same with the write's own time, which comes before the stem among the parameters.
_IMPORT_WRITE_SQLITE_SQL = (
    f"INSERT INTO write_log ({_SPLIT_KEY_COLUMNS}) SELECT ?, {_SPLIT_KEY_VALUES}, ? FROM (SELECT 1) {_KEY_STEM_JOIN}"
)
# A stem is added by the first write of a new reference that has it (a repeated write finds it there), until there
# are `MAX_KEY_STEMS`; never deleted, as rows of `write_log` name it.
_ADD_KEY_STEM_SQL = (
    "INSERT INTO key_stems (stem) SELECT ? WHERE NOT EXISTS (SELECT 1 FROM key_stems WHERE stem = ?) "
    f"AND (SELECT count(*) FROM key_stems) < {MAX_KEY_STEMS} ON CONFLICT DO NOTHING"
)
# A `write_log` row's whole key (SQLite), as the view `writes` shows it.
_WHOLE_KEY_SQL = (
    "CAST(CASE WHEN w.key_stem_id IS NULL THEN w.key ELSE coalesce(w.key_step || '_', '') "
    "|| (SELECT s.stem FROM key_stems s WHERE s.id = w.key_stem_id) || w.key END AS TEXT)"
)
# The visibility no write is left for. Written with EXCEPT (a sort of each table) because a correlated NOT EXISTS
# would scan `write_log` (which has no index but its row id) once per reference.
_FORGET_VISIBILITY_SQL = """
    DELETE FROM namespace_references WHERE id IN (
        SELECT id FROM namespace_references EXCEPT SELECT reference_id FROM write_log
    )
"""
_IN_NAMESPACE = (
    "reference_id IN (SELECT r.id FROM namespace_references r JOIN namespaces n ON n.id = r.namespace_id "
    "WHERE n.namespace = ?)"
)
# A reference's digest is its blob's, or its own while the blob row is missing (SQLite's migration 0018).
_DIGEST_OF_WRITE = (
    "(SELECT coalesce(r.digest, b.digest) FROM namespace_references r LEFT JOIN blobs b ON b.id = r.blob_id "
    "WHERE r.id = reference_id)"
)
# What nothing keeps: no reference names the blob (by its id, migration 0016), no blob needs it, no group uses it.
# What is needed is read in one pass (`NOT IN`): SQLite's index of it holds the deltas' needs only (migration 0020).
_UNREFERENCED_SQL = (
    "SELECT digest FROM blobs b WHERE NOT EXISTS (SELECT 1 FROM namespace_references v WHERE v.blob_id = b.id) "
    "AND b.id NOT IN (SELECT d.needs_id FROM blob_dependencies d WHERE d.needs_id IS NOT NULL) "
    "AND NOT EXISTS (SELECT 1 FROM dictionaries k WHERE k.blob_id = b.id AND k.active = 1)"
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


def record_write(work: UnitOfWork, namespace: str, write: PreparedWrite) -> bool:
    """
    Append one write to the history and make its reference visible in `namespace`, inside the caller's transaction.

    :returns: Whether the reference was visible in its namespace already. Then its blob's row is there: the statement
        finds the reference through that row (by the blob's id), inside the caller's transaction, and `gc` deletes a
        blob only inside a transaction of its own, so the two are never interleaved.
    """
    binary, extension = reference_kind(write.reference)
    sqlite = isinstance(work.connection, sqlite3.Connection)
    if sqlite:
        key = _key_parameters(write.key)
        if work.change(_APPEND_REPEATED_WRITE_SQLITE_SQL, (*key, write.digest, namespace, binary, extension)):
            return True
    elif work.change(_APPEND_REPEATED_WRITE_SQL, (write.key, write.digest, namespace, binary, extension)):
        return True
    # Not visible, or visible without its blob row (a damaged index): that reference is written to, never made twice,
    # but it proves nothing stored (the caller confirms the blob, and a blob row made again takes the reference).
    row = work.connection.execute(
        _FIND_REFERENCE_WITHOUT_BLOB_SQL, (write.digest, namespace, binary, extension)
    ).fetchone()
    if row is None:
        row = _add_reference(
            work, namespace, digest=write.digest, binary=binary, extension=extension, size=len(write.data)
        )
    if not sqlite:
        work.change(_INSERT_WRITE_SQL, (row[0], write.key))
        return False
    if key[3] is not None:
        work.change(_ADD_KEY_STEM_SQL, (key[3], key[3]))
    work.change(_INSERT_WRITE_SQLITE_SQL, (row[0], *key))
    return False


def _key_parameters(key: str) -> tuple[int | None, str, str, str | None]:
    """:returns: `(step, whole key, rest, stem)`, as the SQLite statements that write `write_log` take them."""
    parts: KeyParts | None = split_key(key)
    if parts is None:
        return None, key, key, None
    return parts.step, key, parts.rest, parts.stem


def _add_reference(work: UnitOfWork, namespace: str, *, digest: str, binary: int, extension: str, size: int) -> Any:
    connection = work.connection
    work.change(_ADD_NAMESPACE_SQL, (namespace, namespace))
    statement = _ADD_REFERENCE_SQLITE_SQL if isinstance(connection, sqlite3.Connection) else _ADD_REFERENCE_SQL
    row = connection.execute(statement, (namespace, digest, digest, binary, extension, size)).fetchone()
    if row is None:
        row = connection.execute(_FIND_REFERENCE_SQL, (digest, namespace, binary, extension)).fetchone()
    return row


def import_writes(work: UnitOfWork, rows: Sequence[tuple[str, str, str, str, int, str, str]]) -> None:
    """
    Append writes copied from another store, with their own times, and make their references visible, inside the
    caller's transaction.

    :param rows: `(namespace, key, digest, kind, size, reference, written_at)` for each write, as `writes` holds them.
    """
    connection = work.connection
    # Namespaces, then references, each in one order (as before 0011 a batch made its references visible in digest
    # order): two batches at once (two copies into one PostgreSQL index) then never wait on each other in a cycle.
    for namespace in sorted({row[0] for row in rows}):
        work.change(_ADD_NAMESPACE_SQL, (namespace, namespace))
    references: dict[tuple[str, str], int] = {}
    for digest, namespace, reference, size in sorted({(row[2], row[0], row[5], row[4]) for row in rows}):
        if (namespace, reference) in references:
            continue
        binary, extension = reference_kind(reference)
        row = connection.execute(_FIND_REFERENCE_SQL, (digest, namespace, binary, extension)).fetchone()
        if row is None:
            row = _add_reference(work, namespace, digest=digest, binary=binary, extension=extension, size=size)
        references[(namespace, reference)] = int(row[0])
    sqlite = isinstance(connection, sqlite3.Connection)  # PostgreSQL keeps keys whole (its migration 0021)
    if not sqlite:
        connection.executemany(
            "INSERT INTO write_log (reference_id, key, written_at) VALUES (?, ?, ?)",
            [
                (references[(namespace, reference)], key, milliseconds(at))
                for namespace, key, _, _, _, reference, at in rows
            ],
        )
        return
    keys = {key: _key_parameters(key) for key in {row[1] for row in rows}}
    for stem in sorted({parameters[3] for parameters in keys.values() if parameters[3] is not None}):
        work.change(_ADD_KEY_STEM_SQL, (stem, stem))
    connection.executemany(
        _IMPORT_WRITE_SQLITE_SQL,
        [
            (references[(namespace, reference)], *keys[key][:3], milliseconds(at), keys[key][3])
            for namespace, key, _, _, _, reference, at in rows
        ],
    )


def milliseconds(moment: str) -> int:
    """
    :param moment: A time as the index shows it (UTC, `YYYY-MM-DD HH:MM:SS.SSS`).
    :returns: The same moment as `write_log` keeps it: milliseconds since 1970-01-01 00:00:00 UTC.
    """
    when = datetime.fromisoformat(moment).replace(tzinfo=UTC)
    return (when - _EPOCH) // timedelta(milliseconds=1)


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
    parameters = (digest, digest, namespace, *reference_kind(reference))
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
    for table, column in (("write_log", "written_at"), ("offloads", "offloaded_at"), ("compactions", "compacted_at")):
        history = table == "write_log"  # its times are milliseconds, its namespace that of its reference
        clauses: list[str] = []
        parameters: list[object] = []
        if namespace is not None:
            clauses.append(_IN_NAMESPACE if history else "namespace = ?")
            parameters.append(namespace)
        if older_than is not None:
            clauses.append(f"{column} < {SHIFTED_NOW_MS_SQL if history else SHIFTED_NOW_SQL}")
            parameters.append(ago(older_than))
        if through is not None and history:
            # Row values order the two columns as one key: ties of `written_at` are broken by the row id.
            clauses.append("(written_at, id) <= (?, ?)")
            parameters.extend((milliseconds(through.written_at), through.write_id))
        elif through is not None:
            clauses.append(f"{column} <= ?")
            parameters.append(through.written_at)
        statement = f"DELETE FROM {table} WHERE {' AND '.join(clauses)}"
        if with_digests and history:
            rows = connection.execute(f"{statement} RETURNING {_DIGEST_OF_WRITE}", parameters).fetchall()
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
    return [row[0] for row in connection.execute(_UNREFERENCED_SQL)]


def writes_without_reference(connection: sqlite3.Connection) -> list[tuple[int, str]]:
    """
    :returns: `(id, key)` of `write_log` rows whose reference row (or its namespace's row) is gone, as a hand edit or
        a damaged index can leave them: the view `writes` joins them away, so that nothing else shows them.
    """
    key = _WHOLE_KEY_SQL if isinstance(connection, sqlite3.Connection) else "w.key"
    return [
        (int(row[0]), row[1])
        for row in connection.execute(
            f"SELECT w.id, {key} FROM write_log w WHERE NOT EXISTS (SELECT 1 FROM namespace_references r "
            "JOIN namespaces n ON n.id = r.namespace_id WHERE r.id = w.reference_id) ORDER BY w.id"
        )
    ]


def dangling_writes(connection: sqlite3.Connection) -> list[tuple[str, str]]:
    """:returns: `(namespace, reference)` of writes whose blob row is missing."""
    return [
        (row[0], row[1])
        for row in connection.execute(
            "SELECT namespace, reference FROM writes WHERE digest NOT IN (SELECT digest FROM blobs) ORDER BY id"
        )
    ]
