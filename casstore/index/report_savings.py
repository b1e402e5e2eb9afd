"""
The report's questions about compaction: each compaction's conversation size before and after
(`compaction_timeline`), the tokens each compaction's offloads saved (`compaction_savings`), and per tool
(`tool_savings`). Read-only queries over `compactions` and `offloads`, in the SQL both engines share.
"""

import sqlite3
from dataclasses import dataclass

from casstore.index.report_scope import Scope, as_int, bucket_name, bucket_prefix, prefix_sql


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


def compaction_timeline(
    connection: sqlite3.Connection, scope: Scope, limit: int
) -> tuple[int, str | None, list[CompactionMark]]:
    """
    :returns: How many compactions the scope holds, the bucket's name (None: one mark per compaction), and
        the marks, in time order; past `limit` compactions, one mark per time bucket with their means.
    """
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
        SELECT {prefix_sql(connection, "compacted_at", length)} AS bucket, min(compacted_at), max(compacted_at),
               count(*),
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


def compaction_savings(connection: sqlite3.Connection, scope: Scope, limit: int) -> tuple[str | None, list[SavingMark]]:
    """
    :returns: The bucket's name (None: one mark per compaction) and the tokens each compaction's offloads saved,
        in time order; past `limit` compactions, one mark per time bucket with their sums.
    """
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
                saved_tokens=as_int(row[4]),
                original_tokens=as_int(row[5]),
                namespace=row[2],
                compaction_id=row[1],
            )
            for row in rows
        ]
    length = bucket_prefix(first, last, limit)
    rows = connection.execute(
        f"""
        SELECT {prefix_sql(connection, "at", length)} AS bucket, min(at), max(at), count(*),
               CAST(sum(results) AS BIGINT), CAST(sum(saved) AS BIGINT), CAST(sum(original) AS BIGINT)
        FROM ({per_compaction}) AS c GROUP BY bucket ORDER BY bucket
        """,
        parameters,
    )
    return bucket_name(length), [
        SavingMark(
            first=row[1],
            last=row[2],
            compactions=int(row[3]),
            results=as_int(row[4]),
            saved_tokens=as_int(row[5]),
            original_tokens=as_int(row[6]),
        )
        for row in rows
    ]


def tool_savings(connection: sqlite3.Connection, scope: Scope) -> list[ToolSaving]:
    """:returns: What offloading saved per tool, the most tokens saved first."""
    where, parameters = scope.where("offloaded_at")
    rows = connection.execute(
        f"""
        SELECT tool_name, count(*), count(DISTINCT compaction_id), CAST(sum(original_tokens) AS BIGINT),
               CAST(sum(saved_tokens) AS BIGINT)
        FROM offloads {where} GROUP BY tool_name ORDER BY 5 DESC, 1
        """,
        parameters,
    )
    return [ToolSaving(row[0], int(row[1]), int(row[2]), as_int(row[3]), as_int(row[4])) for row in rows]
