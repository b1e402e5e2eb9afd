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
from collections.abc import Sequence
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


@dataclass(frozen=True, slots=True)
class OtherTools:
    """
    The tools past the report's cut, summed: how many they are, and what they offloaded together (`offloads` and the
    tokens for the compactor's, `offloads` and `parts` for the hook's, which measures no tokens).
    """

    tools: int
    offloads: int
    original_tokens: int = 0
    saved_tokens: int = 0
    parts: int = 0


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
    # The tools past the cut (`tools` and `hook_tools` hold the first `tool_limit`), summed; None when there are none.
    other_tools: OtherTools | None = None
    other_hook_tools: OtherTools | None = None
    # The newest archives of the step archive (at most the rows limit), and how many there are in the scope.
    archives: list[ArchiveRow] = field(default_factory=list)
    archives_total: int = 0

    @property
    def empty(self) -> bool:
        """:returns: Whether nothing at all was recorded in the scope."""
        return not self.namespaces


def report_figures(
    connection: sqlite3.Connection,
    *,
    scope: Scope,
    series_limit: int,
    rows_limit: int,
    namespace_limit: int,
    tool_limit: int,
) -> ReportFigures:
    """
    :param scope: The namespace and period.
    :param series_limit: At most this many marks per series; past it, time buckets.
    :param rows_limit: At most this many rows in each ranking of results (the most repeated, the largest).
    :param namespace_limit: At most this many namespaces (the busiest; `namespaces_total` counts them all).
    :param tool_limit: At most this many tools of the compactor's (the most tokens saved) and of the hook's (the most
        results, and the keys that tell no tool); the rest are summed in `other_tools` and `other_hook_tools`.
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
    tools = tool_savings(connection, scope)
    hook_tools = hook_tool_offloads(connection, namespace=scope.namespace, since=scope.since)
    named_hook_tools = [tool for tool in hook_tools if tool.tool_name is not None]
    untold = [tool for tool in hook_tools if tool.tool_name is None]
    return ReportFigures(
        scope=scope,
        now=str(now),
        compactions=compactions,
        compaction_bucket=compaction_bucket,
        timeline=timeline,
        saving_bucket=saving_bucket,
        savings=savings,
        tools=tools[:tool_limit],
        other_tools=_other_tools(tools[tool_limit:]),
        bytes_bucket=bytes_bucket,
        bytes_over_time=points,
        repeated=[result_row(result) for result in repeated],
        largest=[result_row(result) for result in largest],
        namespaces=namespaces[:namespace_limit],
        namespaces_total=len(namespaces),
        known_namespaces=known,
        hook_tools=named_hook_tools[:tool_limit] + untold,
        other_hook_tools=_other_hook_tools(named_hook_tools[tool_limit:]),
        archives=newest_archives,
        archives_total=archives_total,
    )


def _other_tools(rest: Sequence[ToolSaving]) -> OtherTools | None:
    if not rest:
        return None
    return OtherTools(
        tools=len(rest),
        offloads=sum(tool.offloads for tool in rest),
        original_tokens=sum(tool.original_tokens for tool in rest),
        saved_tokens=sum(tool.saved_tokens for tool in rest),
    )


def _other_hook_tools(rest: Sequence[HookToolOffloads]) -> OtherTools | None:
    if not rest:
        return None
    return OtherTools(
        tools=len(rest), offloads=sum(tool.results for tool in rest), parts=sum(tool.parts for tool in rest)
    )
