"""
The history questions behind `casstore report`: read-only queries over the index's tables, for one namespace or all,
over all history or a recent period, in the SQL both engines share (SQLite's spelling; `casstore.index.postgres`
translates it).

Large histories are summed in the index, not in Python: a series longer than its limit comes back in time buckets,
cut by a prefix of the timestamps (`YYYY-MM-DD HH:MM:SS.SS`: to the hundredth or the tenth of a second, the second,
minute, hour, day, month or year), the finest that keeps the series within the limit.
"""

import heapq
import json
import math
import sqlite3
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from casstore.index.database import NOW_SQL, SHIFTED_NOW_SQL, ago
from casstore.index.offloads import HookToolOffloads, hook_tool_offloads

# How many characters of a timestamp name a bucket, finest first, and the seconds such a bucket spans at least (so
# that a span of S seconds meets at most ceil(S / seconds) + 1 buckets).
_BUCKET_PREFIXES = (
    (22, 0.01),
    (21, 0.1),
    (19, 1),
    (16, 60),
    (13, 3_600),
    (10, 86_400),
    (7, 28 * 86_400),
    (4, 365 * 86_400),
)
_BUCKET_NAMES = {
    22: "hundredth of a second",
    21: "tenth of a second",
    19: "second",
    16: "minute",
    13: "hour",
    10: "day",
    7: "month",
    4: "year",
}
# What Haystack's `FileSystemToolResultStore` takes for a write: one file of its size, in whole blocks of this many
# bytes, as `du` counts them on ext4 (an empty file takes none).
FILE_SYSTEM_BLOCK = 4096


@dataclass(frozen=True, slots=True)
class Scope:
    """Which history a question is about: one namespace or all, all history or the period before now."""

    namespace: str | None = None
    since: timedelta | None = None

    def where(self, time_column: str, *, table: str = "") -> tuple[str, list[object]]:
        """:returns: A `WHERE` clause (never empty) and its parameters, for a table with `namespace` and that time."""
        prefix = f"{table}." if table else ""
        clauses: list[str] = ["1 = 1"]
        parameters: list[object] = []
        if self.namespace is not None:
            clauses.append(f"{prefix}namespace = ?")
            parameters.append(self.namespace)
        if self.since is not None:
            clauses.append(f"{prefix}{time_column} >= {SHIFTED_NOW_SQL}")
            parameters.append(ago(self.since))
        return "WHERE " + " AND ".join(clauses), parameters


@dataclass(frozen=True, slots=True)
class CompactionMark:
    """One compaction (`count == 1`, `first == last`), or a time bucket of several (the figures are their means)."""

    first: str
    last: str
    count: int
    tokens_before: float
    tokens_after: float
    target_tokens: float
    context_window: float | None
    max_tokens_before: int
    min_tokens_after: int
    namespace: str = ""
    compaction_id: str = ""


@dataclass(frozen=True, slots=True)
class SavingMark:
    """Tokens one compaction saved (from its offloads), or a time bucket of compactions (their sums)."""

    first: str
    last: str
    compactions: int
    results: int
    saved_tokens: int
    original_tokens: int
    namespace: str = ""
    compaction_id: str = ""


@dataclass(frozen=True, slots=True)
class ToolSaving:
    """What offloading saved for one tool."""

    tool_name: str
    offloads: int
    compactions: int
    original_tokens: int
    saved_tokens: int


@dataclass(frozen=True, slots=True)
class BytesPoint:
    """The bytes written up to the end of one time bucket, cumulative from the start of the scope."""

    bucket: str
    writes: int
    logical_bytes: int
    unique_bytes: int
    stored_bytes: int
    file_system_bytes: int


@dataclass(frozen=True, slots=True)
class ResultRow:
    """One distinct result (a digest): how often it was written, its size, and a key it was written under."""

    digest: str
    kind: str
    times_written: int
    size: int
    stored_size: int
    bytes_saved: int
    example_key: str


@dataclass(frozen=True, slots=True)
class NamespaceActivity:
    """One namespace's writes, offloads and compactions, and its first and last activity of any kind."""

    namespace: str
    writes: int
    logical_bytes: int
    offloads: int
    compactions: int
    saved_tokens: int
    first_activity: str
    last_activity: str


@dataclass(frozen=True, slots=True)
class ArchiveRow:
    """One transcript `StepArchiveCompactor` wrote: when, where, which steps, and what it took out of the context."""

    archived_at: str
    namespace: str
    first_step: int | None
    last_step: int | None
    messages: int
    original_tokens: int
    saved_tokens: int
    reference: str


@dataclass
class ReportFigures:
    """Everything `casstore report` draws, for one scope, read in one consistent state of the index."""

    scope: Scope
    now: str
    compactions: int
    compaction_bucket: str | None
    timeline: list[CompactionMark]
    saving_bucket: str | None
    savings: list[SavingMark]
    tools: list[ToolSaving]
    bytes_bucket: str | None
    bytes_over_time: list[BytesPoint]
    repeated: list[ResultRow]
    largest: list[ResultRow]
    namespaces: list[NamespaceActivity]
    namespaces_total: int
    known_namespaces: list[str] = field(default_factory=list)
    hook_tools: list[HookToolOffloads] = field(default_factory=list)
    # The newest archives (at most the rows limit), and how many there are in the scope.
    archives: list[ArchiveRow] = field(default_factory=list)
    archives_total: int = 0

    @property
    def empty(self) -> bool:
        """:returns: Whether nothing at all was recorded in the scope."""
        return not self.namespaces


def report_figures(
    connection: sqlite3.Connection, *, scope: Scope, series_limit: int, rows_limit: int, namespace_limit: int
) -> ReportFigures:
    """
    :param scope: The namespace and period.
    :param series_limit: At most this many marks per series; past it, time buckets.
    :param rows_limit: At most this many rows in each ranking of results (the most repeated, the largest).
    :param namespace_limit: At most this many namespaces (the busiest; `namespaces_total` counts them all).
    :returns: The report's figures.
    """
    now = connection.execute(f"SELECT {NOW_SQL}").fetchone()[0]
    archive_where, archive_parameters = scope.where("archived_at")
    compactions, compaction_bucket, timeline = _timeline(connection, scope, series_limit)
    saving_bucket, savings = _savings(connection, scope, series_limit)
    # One pass over the writes per distinct result answers three questions: the rankings, and unique bytes over time.
    results = _distinct_results(connection, scope)
    bytes_bucket, bytes_over_time = _bytes_over_time(connection, scope, series_limit, results)
    namespaces = _namespace_activity(connection, scope)
    known = [row[0] for row in connection.execute("SELECT DISTINCT namespace FROM writes ORDER BY 1 LIMIT 50")]
    repeated = heapq.nsmallest(
        rows_limit,
        (result for result in results if result[2] > 1),
        key=lambda result: (-(result[2] - 1) * result[3], -result[2], result[0]),
    )
    largest = heapq.nsmallest(rows_limit, results, key=lambda result: (-result[3], -result[2], result[0]))
    return ReportFigures(
        scope=scope,
        now=str(now),
        compactions=compactions,
        compaction_bucket=compaction_bucket,
        timeline=timeline,
        saving_bucket=saving_bucket,
        savings=savings,
        tools=_tools(connection, scope),
        bytes_bucket=bytes_bucket,
        bytes_over_time=bytes_over_time,
        repeated=[_result_row(result) for result in repeated],
        largest=[_result_row(result) for result in largest],
        namespaces=namespaces[:namespace_limit],
        namespaces_total=len(namespaces),
        known_namespaces=known,
        hook_tools=hook_tool_offloads(connection, namespace=scope.namespace, since=scope.since),
        archives=_archives(connection, scope, rows_limit),
        archives_total=int(
            connection.execute(f"SELECT count(*) FROM archives {archive_where}", archive_parameters).fetchone()[0]
        ),
    )


def bucket_prefix(first: str, last: str, limit: int) -> int:
    """:returns: How many leading characters of a timestamp name its bucket, so that `first`..`last` fits `limit`."""
    span = (_parse(last) - _parse(first)).total_seconds()
    for length, seconds in _BUCKET_PREFIXES:
        # Buckets are aligned to the calendar, so a span meets one more than it covers.
        if math.ceil(span / seconds - 1e-9) + 1 <= limit:
            return length
    return 4


def bucket_name(length: int) -> str:
    """:returns: What a bucket of that prefix length spans: `second`, `minute`, ... `year`."""
    return _BUCKET_NAMES[length]


def _parse(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp)


def _int(value: Any) -> int:
    return 0 if value is None else int(value)


def _timeline(connection: sqlite3.Connection, scope: Scope, limit: int) -> tuple[int, str | None, list[CompactionMark]]:
    where, parameters = scope.where("compacted_at")
    count, first, last = connection.execute(
        f"SELECT count(*), min(compacted_at), max(compacted_at) FROM compactions {where}", parameters
    ).fetchone()
    if not count:
        return 0, None, []
    if count <= limit:
        rows = connection.execute(
            "SELECT compacted_at, tokens_before, tokens_after, target_tokens, context_window, namespace, compaction_id "
            f"FROM compactions {where} ORDER BY compacted_at, id",
            parameters,
        )
        return (
            int(count),
            None,
            [
                CompactionMark(
                    first=row[0],
                    last=row[0],
                    count=1,
                    tokens_before=row[1],
                    tokens_after=row[2],
                    target_tokens=row[3],
                    context_window=row[4],
                    max_tokens_before=row[1],
                    min_tokens_after=row[2],
                    namespace=row[5],
                    compaction_id=row[6],
                )
                for row in rows
            ],
        )
    length = bucket_prefix(first, last, limit)
    rows = connection.execute(
        f"""
        SELECT {_prefix(connection, "compacted_at", length)} AS bucket, min(compacted_at), max(compacted_at), count(*),
               CAST(avg(tokens_before) AS DOUBLE PRECISION), CAST(avg(tokens_after) AS DOUBLE PRECISION),
               CAST(avg(target_tokens) AS DOUBLE PRECISION), CAST(avg(context_window) AS DOUBLE PRECISION),
               max(tokens_before), min(tokens_after)
        FROM compactions {where} GROUP BY bucket ORDER BY bucket
        """,
        parameters,
    )
    marks = [
        CompactionMark(
            first=row[1],
            last=row[2],
            count=int(row[3]),
            tokens_before=float(row[4]),
            tokens_after=float(row[5]),
            target_tokens=float(row[6]),
            context_window=None if row[7] is None else float(row[7]),
            max_tokens_before=int(row[8]),
            min_tokens_after=int(row[9]),
        )
        for row in rows
    ]
    return int(count), bucket_name(length), marks


def _savings(connection: sqlite3.Connection, scope: Scope, limit: int) -> tuple[str | None, list[SavingMark]]:
    where, parameters = scope.where("offloaded_at")
    per_compaction = f"""
        SELECT compaction_id, min(namespace) AS namespace, min(offloaded_at) AS at, count(*) AS results,
               CAST(sum(saved_tokens) AS BIGINT) AS saved, CAST(sum(original_tokens) AS BIGINT) AS original
        FROM offloads {where} GROUP BY compaction_id
    """
    count, first, last = connection.execute(
        f"SELECT count(*), min(at), max(at) FROM ({per_compaction}) AS c", parameters
    ).fetchone()
    if not count:
        return None, []
    if count <= limit:
        rows = connection.execute(
            f"SELECT at, compaction_id, namespace, results, saved, original FROM ({per_compaction}) AS c "
            "ORDER BY at, compaction_id",
            parameters,
        )
        return None, [
            SavingMark(
                first=row[0],
                last=row[0],
                compactions=1,
                results=int(row[3]),
                saved_tokens=_int(row[4]),
                original_tokens=_int(row[5]),
                namespace=row[2],
                compaction_id=row[1],
            )
            for row in rows
        ]
    length = bucket_prefix(first, last, limit)
    rows = connection.execute(
        f"""
        SELECT {_prefix(connection, "at", length)} AS bucket, min(at), max(at), count(*), CAST(sum(results) AS BIGINT),
               CAST(sum(saved) AS BIGINT), CAST(sum(original) AS BIGINT)
        FROM ({per_compaction}) AS c GROUP BY bucket ORDER BY bucket
        """,
        parameters,
    )
    return bucket_name(length), [
        SavingMark(
            first=row[1],
            last=row[2],
            compactions=int(row[3]),
            results=_int(row[4]),
            saved_tokens=_int(row[5]),
            original_tokens=_int(row[6]),
        )
        for row in rows
    ]


def _tools(connection: sqlite3.Connection, scope: Scope) -> list[ToolSaving]:
    where, parameters = scope.where("offloaded_at")
    rows = connection.execute(
        f"""
        SELECT tool_name, count(*), count(DISTINCT compaction_id), CAST(sum(original_tokens) AS BIGINT),
               CAST(sum(saved_tokens) AS BIGINT)
        FROM offloads {where} GROUP BY tool_name ORDER BY 5 DESC, 1
        """,
        parameters,
    )
    return [ToolSaving(row[0], int(row[1]), int(row[2]), _int(row[3]), _int(row[4])) for row in rows]


def _archives(connection: sqlite3.Connection, scope: Scope, limit: int) -> list[ArchiveRow]:
    """:returns: The newest `limit` archives in the scope, newest first."""
    where, parameters = scope.where("archived_at")
    rows = connection.execute(
        f"SELECT archived_at, namespace, first_step, last_step, messages, original_tokens, saved_tokens, refs "
        f"FROM archives {where} ORDER BY archived_at DESC, id DESC LIMIT ?",
        [*parameters, limit],
    )
    return [
        ArchiveRow(str(row[0]), row[1], row[2], row[3], int(row[4]), int(row[5]), int(row[6]), json.loads(row[7])[0])
        for row in rows
    ]


# A distinct result in the scope, as the one pass over the writes gives it: digest, kind, times written, size, an
# example key, the time of its first write there, and its stored size. Plain tuples: a large store has many.
_Distinct = tuple[str, str, int, int, str, str, int]


def _distinct_results(connection: sqlite3.Connection, scope: Scope) -> list[_Distinct]:
    where, parameters = scope.where("written_at")
    stored = dict(connection.execute("SELECT digest, stored_size FROM blobs").fetchall())
    rows = connection.execute(
        f"SELECT digest, min(kind), count(*), max(size), min(key), min(written_at) FROM writes {where} GROUP BY digest",
        parameters,
    ).fetchall()
    return [(*row, stored.get(row[0]) or 0) for row in rows]


def _result_row(result: _Distinct) -> ResultRow:
    digest, kind, times, size, key, _, stored_size = result
    times, size = int(times), int(size)
    return ResultRow(digest, kind, times, size, int(stored_size), (times - 1) * size, key)


def _bytes_over_time(
    connection: sqlite3.Connection, scope: Scope, limit: int, results: list[_Distinct]
) -> tuple[str | None, list[BytesPoint]]:
    where, parameters = scope.where("written_at")
    first, last = connection.execute(
        f"SELECT min(written_at), max(written_at) FROM writes {where}", parameters
    ).fetchone()
    if first is None:
        return None, []
    length = bucket_prefix(first, last, limit)
    bucket = _prefix(connection, "written_at", length)
    logical = {
        row[0]: (int(row[1]), _int(row[2]), _int(row[3]))
        for row in connection.execute(
            f"""
            SELECT {bucket}, count(*), CAST(sum(size) AS BIGINT),
                   CAST(sum((size + {FILE_SYSTEM_BLOCK - 1}) / {FILE_SYSTEM_BLOCK} * {FILE_SYSTEM_BLOCK}) AS BIGINT)
            FROM writes {where} GROUP BY {bucket}
            """,
            parameters,
        )
    }
    # Unique and stored bytes: each distinct result counts once, in the bucket of its first write within the scope.
    unique: dict[str, list[int]] = {}
    for result in results:
        sums = unique.setdefault(result[5][:length], [0, 0])
        sums[0] += result[3]
        sums[1] += result[6]
    points: list[BytesPoint] = []
    writes = logical_bytes = unique_bytes = stored_bytes = file_system = 0
    for name in sorted(set(logical) | set(unique)):
        count, size, blocks = logical.get(name, (0, 0, 0))
        distinct, stored = unique.get(name, (0, 0))
        writes, logical_bytes, file_system = writes + count, logical_bytes + size, file_system + blocks
        unique_bytes, stored_bytes = unique_bytes + distinct, stored_bytes + stored
        points.append(BytesPoint(name, writes, logical_bytes, unique_bytes, stored_bytes, file_system))
    return bucket_name(length), points


def _namespace_activity(connection: sqlite3.Connection, scope: Scope) -> list[NamespaceActivity]:
    writes_where, writes_parameters = scope.where("written_at")
    offloads_where, offloads_parameters = scope.where("offloaded_at")
    compactions_where, compactions_parameters = scope.where("compacted_at")
    rows = connection.execute(
        f"""
        SELECT namespace, CAST(sum(writes) AS BIGINT), CAST(sum(logical_bytes) AS BIGINT),
               CAST(sum(offloads) AS BIGINT), CAST(sum(compactions) AS BIGINT), CAST(sum(saved_tokens) AS BIGINT),
               min(first_at), max(last_at)
        FROM (
            SELECT namespace, count(*) AS writes, sum(size) AS logical_bytes, 0 AS offloads, 0 AS compactions,
                   0 AS saved_tokens, min(written_at) AS first_at, max(written_at) AS last_at
            FROM writes {writes_where} GROUP BY namespace
            UNION ALL
            SELECT namespace, 0, 0, count(*), 0, sum(saved_tokens), min(offloaded_at), max(offloaded_at)
            FROM offloads {offloads_where} GROUP BY namespace
            UNION ALL
            SELECT namespace, 0, 0, 0, count(*), 0, min(compacted_at), max(compacted_at)
            FROM compactions {compactions_where} GROUP BY namespace
        ) AS activity
        GROUP BY namespace ORDER BY 2 DESC, 1
        """,
        [*writes_parameters, *offloads_parameters, *compactions_parameters],
    )
    return [
        NamespaceActivity(row[0], _int(row[1]), _int(row[2]), _int(row[3]), _int(row[4]), _int(row[5]), row[6], row[7])
        for row in rows
    ]


def _prefix(connection: Any, column: str, length: int) -> str:
    """:returns: SQL for the first `length` characters of a time column as text, `YYYY-MM-DD HH:MM:SS.SSS` (UTC)."""
    if isinstance(connection, sqlite3.Connection):
        return f"substr({column}, 1, {length})"
    return f"substr(to_char({column} AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.MS'), 1, {length})"
