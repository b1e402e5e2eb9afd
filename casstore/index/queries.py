"""
History questions the index answers, with typed arguments: read-only queries over its tables and views, so what
`casstore stats` and `casstore log` print is exactly what `sqlite3 index.db` shows.
"""

import json
import sqlite3
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from casstore.index.work import SHIFTED_NOW_SQL, ago
from casstore.references import reference_kind


@dataclass(frozen=True)
class OffloadEntry:
    """
    One entry of the offload history: a result `DedupOffloadCompactor` offloaded (`source` "compactor", a row of
    `offloads`), a part of one Haystack's `ToolResultOffloadHook` wrote (`source` "hook", a row of `writes`), or a
    transcript `StepArchiveCompactor` wrote (`source` "archive", a row of `archives`: no tool, its references the
    transcript's first, its steps in `first_step` and `last_step`, its messages in `messages`).

    The hook measures no tokens and belongs to no compaction: its `original_tokens`, `saved_tokens` and
    `compaction_id` are None. Its `key` is the key it wrote; `tool_name` is None when the key does not tell the tool
    apart from the call id for certain (`casstore.hook_keys`), and `part` is the part's position in a result of
    several.
    """

    offloaded_at: str
    namespace: str
    tool_name: str | None
    tool_call_id: str | None
    original_tokens: int | None
    saved_tokens: int | None
    references: list[str]
    compaction_id: str | None
    source: str = "compactor"
    key: str | None = None
    part: int | None = None
    first_step: int | None = None
    last_step: int | None = None
    messages: int | None = None


@dataclass(frozen=True, slots=True)
class HistoryMark:
    """How far the history reached at one moment (the highest row ids), to ask later what came after it."""

    last_write: int
    last_offload: int
    last_archive: int = 0


def summary(connection: sqlite3.Connection) -> dict[str, Any]:
    """:returns: The one row of the view `dedup_summary`, by column."""
    return _rows(connection, "SELECT * FROM dedup_summary")[0]


def namespace_totals(connection: sqlite3.Connection, *, namespace: str) -> dict[str, int]:
    """
    :returns: The `dedup_summary` figures of one namespace, in one statement (one consistent state): the `writes`
        and `logical_bytes` of its writes, and the `blobs`, `unique_bytes` and `stored_bytes` of the distinct blobs
        they reference (blobs shared with other namespaces included, each once).
    """
    row = connection.execute(
        """
        WITH mine AS (SELECT digest, size FROM writes WHERE namespace = ?)
        SELECT (SELECT count(*) FROM mine), (SELECT CAST(coalesce(sum(size), 0) AS BIGINT) FROM mine),
               count(*), CAST(coalesce(sum(size), 0) AS BIGINT), CAST(coalesce(sum(stored_size), 0) AS BIGINT)
        FROM blobs WHERE digest IN (SELECT digest FROM mine)
        """,
        (namespace,),
    ).fetchone()
    return {
        "writes": int(row[0]),
        "logical_bytes": int(row[1]),
        "blobs": int(row[2]),
        "unique_bytes": int(row[3]),
        "stored_bytes": int(row[4]),
    }


def namespace_rows(connection: sqlite3.Connection, *, namespace: str | None) -> list[dict[str, Any]]:
    """:returns: Per namespace (only `namespace` if given): `namespace_summary` with its offloads and tokens saved."""
    where, parameters = _namespace_filter(namespace)
    return _rows(
        connection,
        f"""
        SELECT * FROM namespace_summary
        LEFT JOIN (SELECT namespace, CAST(sum(offloads) AS BIGINT) AS offloads,
                          CAST(sum(saved_tokens) AS BIGINT) AS saved_tokens
                   FROM offload_summary GROUP BY namespace) AS per_namespace USING (namespace)
        {where} ORDER BY namespace
        """,
        parameters,
    )


def tool_rows(connection: sqlite3.Connection, *, namespace: str | None) -> list[dict[str, Any]]:
    """:returns: Per namespace and tool (only `namespace`'s if given): offloads and tokens, most offloads first."""
    where, parameters = _namespace_filter(namespace)
    return _rows(
        connection,
        f"SELECT namespace, tool_name, offloads, original_tokens, saved_tokens FROM offload_summary {where} "
        "ORDER BY namespace, offloads DESC, tool_name",
        parameters,
    )


def offload_entries(
    connection: sqlite3.Connection,
    *,
    namespace: str | None,
    tool: str | None,
    since: timedelta | None,
    limit: int | None,
) -> list[OffloadEntry]:
    """:returns: Offloads matching every filter given, newest first, at most `limit` of them."""
    clauses, parameters = _offload_filter(namespace=namespace, tool=tool, since=since)
    limit_clause = ""
    if limit is not None:
        limit_clause = " LIMIT ?"
        parameters.append(limit)
    rows = _rows(
        connection,
        f"SELECT * FROM offloads WHERE {' AND '.join(clauses)} ORDER BY offloaded_at DESC, id DESC{limit_clause}",
        parameters,
    )
    return [
        OffloadEntry(
            offloaded_at=row["offloaded_at"],
            namespace=row["namespace"],
            tool_name=row["tool_name"],
            tool_call_id=row["tool_call_id"],
            original_tokens=row["original_tokens"],
            saved_tokens=row["saved_tokens"],
            references=json.loads(row["refs"]),
            compaction_id=row["compaction_id"],
        )
        for row in rows
    ]


def offload_count(
    connection: sqlite3.Connection, *, namespace: str | None, tool: str | None, since: timedelta | None
) -> int:
    """:returns: How many offloads match every filter given."""
    clauses, parameters = _offload_filter(namespace=namespace, tool=tool, since=since)
    return int(
        connection.execute(f"SELECT count(*) FROM offloads WHERE {' AND '.join(clauses)}", parameters).fetchone()[0]
    )


def archive_entries(
    connection: sqlite3.Connection, *, namespace: str | None, since: timedelta | None, limit: int | None
) -> list[OffloadEntry]:
    """:returns: The archives matching every filter given, newest first, at most `limit` of them."""
    where, parameters = _archive_filter(namespace=namespace, since=since)
    limit_clause = ""
    if limit is not None:
        limit_clause = " LIMIT ?"
        parameters.append(limit)
    rows = _rows(
        connection, f"SELECT * FROM archives WHERE {where} ORDER BY archived_at DESC, id DESC{limit_clause}", parameters
    )
    return [
        OffloadEntry(
            offloaded_at=row["archived_at"],
            namespace=row["namespace"],
            tool_name=None,
            tool_call_id=None,
            original_tokens=row["original_tokens"],
            saved_tokens=row["saved_tokens"],
            references=json.loads(row["refs"]),
            compaction_id=row["compaction_id"],
            source="archive",
            first_step=row["first_step"],
            last_step=row["last_step"],
            messages=row["messages"],
        )
        for row in rows
    ]


def archive_count(connection: sqlite3.Connection, *, namespace: str | None, since: timedelta | None) -> int:
    """:returns: How many archives match every filter given."""
    where, parameters = _archive_filter(namespace=namespace, since=since)
    return int(connection.execute(f"SELECT count(*) FROM archives WHERE {where}", parameters).fetchone()[0])


def _archive_filter(*, namespace: str | None, since: timedelta | None) -> tuple[str, list[object]]:
    clauses: list[str] = ["1 = 1"]
    parameters: list[object] = []
    if namespace is not None:
        clauses.append("namespace = ?")
        parameters.append(namespace)
    if since is not None:
        clauses.append(f"archived_at >= {SHIFTED_NOW_SQL}")
        parameters.append(ago(since))
    return " AND ".join(clauses), parameters


def _offload_filter(
    *, namespace: str | None, tool: str | None, since: timedelta | None
) -> tuple[list[str], list[object]]:
    clauses: list[str] = ["1 = 1"]
    parameters: list[object] = []
    if namespace is not None:
        clauses.append("namespace = ?")
        parameters.append(namespace)
    if tool is not None:
        clauses.append("tool_name = ?")
        parameters.append(tool)
    if since is not None:
        clauses.append(f"offloaded_at >= {SHIFTED_NOW_SQL}")
        parameters.append(ago(since))
    return clauses, parameters


def namespaces(connection: sqlite3.Connection) -> list[str]:
    """:returns: Every namespace that has writes or offloads, in order."""
    rows = connection.execute("SELECT namespace FROM writes UNION SELECT namespace FROM offloads ORDER BY 1")
    return [row[0] for row in rows]


def namespaces_holding(connection: sqlite3.Connection, *, digest: str, reference: str) -> list[str]:
    """:returns: The namespaces in which `reference` was written and is not forgotten, in order."""
    rows = connection.execute(
        "SELECT DISTINCT namespace FROM writes WHERE digest = ? AND kind = ? AND extension = ? ORDER BY 1",
        (digest, *reference_kind(reference)),
    )
    return [row[0] for row in rows]


def history_mark(connection: sqlite3.Connection) -> HistoryMark:
    """:returns: The highest `writes`, `offloads` and `archives` ids so far (0 when empty)."""
    row = connection.execute(
        "SELECT (SELECT coalesce(max(id), 0) FROM writes), (SELECT coalesce(max(id), 0) FROM offloads), "
        "(SELECT coalesce(max(id), 0) FROM archives)"
    ).fetchone()
    return HistoryMark(last_write=int(row[0]), last_offload=int(row[1]), last_archive=int(row[2]))


def figures_since(connection: sqlite3.Connection, *, namespace: str, mark: HistoryMark) -> dict[str, int]:
    """
    :returns: What `namespace` did after `mark`: `results_offloaded`, `compactions` (that offloaded), `tokens_saved`
        (by offloading), `archives` and `steps_archived`, and the `logical_bytes` of its writes with the
        `unique_bytes` and `stored_bytes` of the blobs they reference.
    """
    offloaded, compactions, saved = connection.execute(
        "SELECT count(*), count(DISTINCT compaction_id), CAST(coalesce(sum(saved_tokens), 0) AS BIGINT) FROM offloads "
        "WHERE namespace = ? AND id > ?",
        (namespace, mark.last_offload),
    ).fetchone()
    archives, steps_archived = connection.execute(
        "SELECT count(*), CAST(coalesce(sum(last_step - first_step + 1), 0) AS BIGINT) FROM archives "
        "WHERE namespace = ? AND id > ?",
        (namespace, mark.last_archive),
    ).fetchone()
    logical, unique, stored = connection.execute(
        """
        SELECT (SELECT CAST(coalesce(sum(size), 0) AS BIGINT) FROM writes WHERE namespace = ? AND id > ?),
               CAST(coalesce(sum(size), 0) AS BIGINT), CAST(coalesce(sum(stored_size), 0) AS BIGINT)
        FROM blobs WHERE digest IN (SELECT digest FROM writes WHERE namespace = ? AND id > ?)
        """,
        (namespace, mark.last_write, namespace, mark.last_write),
    ).fetchone()
    return {
        "results_offloaded": offloaded,
        "compactions": compactions,
        "tokens_saved": saved,
        "archives": archives,
        "steps_archived": steps_archived,
        "logical_bytes": logical,
        "unique_bytes": unique,
        "stored_bytes": stored,
    }


def writes_since(connection: sqlite3.Connection, *, namespace: str, mark: HistoryMark) -> list[tuple[str, str]]:
    """:returns: `(key, reference)` of every write of `namespace` after `mark`, in order."""
    rows = connection.execute(
        "SELECT key, reference FROM writes WHERE namespace = ? AND id > ? ORDER BY id", (namespace, mark.last_write)
    )
    return [(row[0], row[1]) for row in rows]


@dataclass(frozen=True, slots=True, order=True)
class WritePosition:
    """Where a write stands in the order of writing: `(written_at, id)`, the row id breaking ties of the time."""

    written_at: str
    write_id: int


@dataclass(frozen=True, slots=True)
class NeededBlob:
    """A blob that writes still need, its stored size, and the newest write that needs it."""

    digest: str
    stored_size: int
    newest_write: WritePosition


# The blobs the writes (of one namespace, or all) still need, each with the newest write that needs it, newest first.
# This is the one statement that answers "what must be kept for these writes": a blob that others depend on (a
# delta base) belongs here too, with the newest write of any blob that depends on it.
# A blob a kept write names is needed, and so is every blob it needs to be read (its delta's base, and what that
# needs: a chain the learner bounds, and the depth bounds here against a damaged, cyclic index), each for as long as
# the newest write that needs it through any of its dependents is kept. (Dictionaries are not blobs.)
_NEEDED_BLOBS_SQL = """
    WITH RECURSIVE newest_writes AS (
        SELECT digest, written_at, id,
               row_number() OVER (PARTITION BY digest ORDER BY written_at DESC, id DESC) AS newest
        FROM writes {where}
    ), needed (blob_id, written_at, write_id, depth) AS (
        SELECT b.id, w.written_at, w.id, 0
        FROM newest_writes w JOIN blobs b ON b.digest = w.digest
        WHERE w.newest = 1
        UNION ALL
        SELECT d.base_id, n.written_at, n.write_id, n.depth + 1
        FROM needed n JOIN blobs d ON d.id = n.blob_id
        WHERE d.base_id IS NOT NULL AND n.depth < 16
    ), newest_need AS (
        SELECT blob_id, written_at, write_id,
               row_number() OVER (PARTITION BY blob_id ORDER BY written_at DESC, write_id DESC) AS newest
        FROM needed
    )
    SELECT b.digest, b.stored_size, n.written_at, n.write_id
    FROM newest_need n JOIN blobs b ON b.id = n.blob_id
    WHERE n.newest = 1
    ORDER BY n.written_at DESC, n.write_id DESC
"""


def needed_blobs(connection: sqlite3.Connection, *, namespace: str | None) -> list[NeededBlob]:
    """
    :param namespace: Only the writes of this namespace (None: every write).
    :returns: Every blob those writes need (anything they depend on included), with its stored size and the newest
        write that needs it, newest first. A write whose blob row is gone (damage `verify` reports) needs nothing.
    """
    where, parameters = _namespace_filter(namespace)
    rows = connection.execute(_NEEDED_BLOBS_SQL.format(where=where), parameters)
    return [NeededBlob(row[0], int(row[1]), WritePosition(row[2], int(row[3]))) for row in rows]


def retention_cut(needed: list[NeededBlob], *, max_size: int) -> WritePosition | None:
    """
    :param needed: What `needed_blobs` returned, newest first.
    :param max_size: The most bytes the blobs still needed may take.
    :returns: The newest write to forget so that the blobs the writes after it need take at most `max_size` bytes,
        forgetting as few writes as possible, oldest first; None when they fit already.
    """
    total = 0
    for blob in needed:
        total += blob.stored_size
        if total > max_size:
            # Keeping this blob would exceed the size: every write up to its newest one goes, and with them every
            # blob whose newest write is older (those that follow in `needed`).
            return blob.newest_write
    return None


def _namespace_filter(namespace: str | None) -> tuple[str, list[object]]:
    return ("", []) if namespace is None else ("WHERE namespace = ?", [namespace])


def _rows(connection: sqlite3.Connection, sql: str, parameters: list[Any] | None = None) -> list[dict[str, Any]]:
    cursor = connection.execute(sql, parameters or [])
    columns = [description[0] for description in cursor.description]
    return [dict(zip(columns, row, strict=True)) for row in cursor]
