"""
The history questions behind `casstore report`: read-only queries over the index's tables, for one namespace or all,
over all history or a recent period, in the SQL both engines share (SQLite's spelling; `casstore.index.postgres`
translates it).

Here: every figure the report draws, read in one consistent state of the index (`report_figures`). The questions are
asked by `report_savings` (compactions, what they saved, per tool), `report_archives` (the step archive's transcripts)
and `report_writes` (results, bytes over time, namespaces), over a `report_scope.Scope`.
"""

import heapq
import sqlite3
from dataclasses import dataclass, field

from casstore.index.offloads import HookToolOffloads, hook_tool_offloads
from casstore.index.report_archives import ArchiveRow, archives
from casstore.index.report_savings import (
    CompactionMark,
    SavingMark,
    ToolSaving,
    compaction_savings,
    compaction_timeline,
    tool_savings,
)
from casstore.index.report_scope import Scope
from casstore.index.report_writes import (
    BytesPoint,
    NamespaceActivity,
    ResultRow,
    bytes_over_time,
    distinct_results,
    namespace_activity,
    result_row,
)
from casstore.index.work import NOW_SQL


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
    # The newest archives of the step archive (at most the rows limit), and how many there are in the scope.
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
    archives_total, newest_archives = archives(connection, scope, rows_limit)
    compactions, compaction_bucket, timeline = compaction_timeline(connection, scope, series_limit)
    saving_bucket, savings = compaction_savings(connection, scope, series_limit)
    # One pass over the writes per distinct result answers three questions: the rankings, and unique bytes over time.
    results = distinct_results(connection, scope)
    bytes_bucket, points = bytes_over_time(connection, scope, series_limit, results)
    namespaces = namespace_activity(connection, scope)
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
        tools=tool_savings(connection, scope),
        bytes_bucket=bytes_bucket,
        bytes_over_time=points,
        repeated=[result_row(result) for result in repeated],
        largest=[result_row(result) for result in largest],
        namespaces=namespaces[:namespace_limit],
        namespaces_total=len(namespaces),
        known_namespaces=known,
        hook_tools=hook_tool_offloads(connection, namespace=scope.namespace, since=scope.since),
        archives=newest_archives,
        archives_total=archives_total,
    )
