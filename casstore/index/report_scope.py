"""
What every question behind `casstore report` is asked over (`Scope`: one namespace or all, all history or a recent
period), and how a long series is cut into time buckets.

Large histories are summed in the index, not in Python: a series longer than its limit comes back in time buckets,
cut by a prefix of the timestamps (`YYYY-MM-DD HH:MM:SS.SS`: to the hundredth or the tenth of a second, the second,
minute, hour, day, month or year), the finest that keeps the series within the limit (`bucket_prefix`,
`prefix_sql`).
"""

import math
import sqlite3
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from casstore.index.work import SHIFTED_NOW_SQL, ago

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


def as_int(value: Any) -> int:
    """:returns: A sum SQL gave (None over no rows) as an int."""
    return 0 if value is None else int(value)


def prefix_sql(connection: Any, column: str, length: int) -> str:
    """:returns: SQL for the first `length` characters of a time column as text, `YYYY-MM-DD HH:MM:SS.SSS` (UTC)."""
    if isinstance(connection, sqlite3.Connection):
        return f"substr({column}, 1, {length})"
    return f"substr(to_char({column} AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.MS'), 1, {length})"
