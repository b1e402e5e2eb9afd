"""
The report's questions about what was written: each distinct result once (for the rankings of the most repeated and
the largest, `distinct_results`), the bytes written over time against what Haystack's `FileSystemToolResultStore`
would take (`bytes_over_time`), and each namespace's activity (`namespace_activity`). Read-only queries over
`writes`, `blobs`, `offloads` and `compactions`, in the SQL both engines share.
"""

import sqlite3
from dataclasses import dataclass

from casstore.index.report_scope import Scope, as_int, bucket_name, bucket_prefix, prefix_sql

# What Haystack's `FileSystemToolResultStore` takes for a write: one file of its size, in whole blocks of this many
# bytes, as `du` counts them on ext4 (an empty file takes none).
FILE_SYSTEM_BLOCK = 4096


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


# A distinct result in the scope, as the one pass over the writes gives it: digest, kind, times written, size, an
# example key, the time of its first write there, and its stored size. Plain tuples: a large store has many.
DistinctResult = tuple[str, str, int, int, str, str, int]


def distinct_results(connection: sqlite3.Connection, scope: Scope) -> list[DistinctResult]:
    """:returns: Each distinct result written in the scope, once (one pass over the writes)."""
    where, parameters = scope.where("written_at")
    stored = dict(connection.execute("SELECT digest, stored_size FROM blobs").fetchall())
    rows = connection.execute(
        f"SELECT digest, min(kind), count(*), max(size), min(key), min(written_at) FROM writes {where} GROUP BY digest",
        parameters,
    ).fetchall()
    return [(*row, stored.get(row[0]) or 0) for row in rows]


def result_row(result: DistinctResult) -> ResultRow:
    """:returns: A distinct result as a row of a ranking, with the bytes storing it once saved."""
    digest, kind, times, size, key, _, stored_size = result
    times, size = int(times), int(size)
    return ResultRow(digest, kind, times, size, int(stored_size), (times - 1) * size, key)


def bytes_over_time(
    connection: sqlite3.Connection, scope: Scope, limit: int, results: list[DistinctResult]
) -> tuple[str | None, list[BytesPoint]]:
    """
    :returns: The bucket's name and the cumulative bytes at the end of each bucket (at most about `limit`):
        logical, unique and stored (each of `results` counted in the bucket of its first write), and a file
        system store's estimate.
    """
    where, parameters = scope.where("written_at")
    first, last = connection.execute(
        f"SELECT min(written_at), max(written_at) FROM writes {where}", parameters
    ).fetchone()
    if first is None:
        return None, []
    length = bucket_prefix(first, last, limit)
    bucket = prefix_sql(connection, "written_at", length)
    logical = {
        row[0]: (int(row[1]), as_int(row[2]), as_int(row[3]))
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


def namespace_activity(connection: sqlite3.Connection, scope: Scope) -> list[NamespaceActivity]:
    """:returns: Every namespace with activity in the scope, most writes first."""
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
        NamespaceActivity(
            row[0],
            as_int(row[1]),
            as_int(row[2]),
            as_int(row[3]),
            as_int(row[4]),
            as_int(row[5]),
            row[6],
            row[7],
        )
        for row in rows
    ]
