"""
The history's rows as `casstore copy` compares them: every write, offload, archive and compaction with its values
(its row id aside), counted, so that copying adds only what the target lacks and a second copy adds nothing.
"""

import sqlite3
from collections import Counter

# A write or an offload as its table holds it, without its row id: what copying a store compares.
WriteRow = tuple[str, str, str, str, int, str, str]
OffloadRow = tuple[str, str, str, str | None, str, int, int, str]
CompactionRow = tuple[str, str, int, int, int, int | None, str]
# `(compaction_id, namespace, refs, messages, first_step, last_step, original_tokens, saved_tokens, archived_at)`.
ArchiveRow = tuple[str, str, str, int, int | None, int | None, int, int, str]


def write_rows(connection: sqlite3.Connection) -> list[WriteRow]:
    """
    :returns: Every write's `(namespace, key, digest, kind, size, reference, written_at)`, in the order they were
        recorded (so writes of the same millisecond keep their order in a copy, identical ones among the others too).
    """
    rows = connection.execute(
        "SELECT namespace, key, digest, kind, size, reference, written_at FROM writes ORDER BY id"
    )
    return [tuple(row) for row in rows]


def offload_rows(connection: sqlite3.Connection) -> Counter[OffloadRow]:
    """:returns: How many offloads there are of each row's values (its id aside), in the order of their first row."""
    rows = connection.execute(
        "SELECT compaction_id, namespace, tool_name, tool_call_id, refs, original_tokens, saved_tokens, offloaded_at, "
        "count(*) FROM offloads GROUP BY compaction_id, namespace, tool_name, tool_call_id, refs, original_tokens, "
        "saved_tokens, offloaded_at ORDER BY min(id)"
    )
    return Counter({tuple(row[:8]): int(row[8]) for row in rows})


def archive_rows(connection: sqlite3.Connection) -> Counter[ArchiveRow]:
    """:returns: How many archives there are of each row's values (its id aside), in the order of their first row."""
    columns = (
        "compaction_id, namespace, refs, messages, first_step, last_step, original_tokens, saved_tokens, archived_at"
    )
    rows = connection.execute(f"SELECT {columns}, count(*) FROM archives GROUP BY {columns} ORDER BY min(id)")
    return Counter({tuple(row[:-1]): int(row[-1]) for row in rows})


def compaction_rows(connection: sqlite3.Connection) -> dict[str, CompactionRow]:
    """:returns: Every compaction's row (its id aside), by `compaction_id`, which is unique."""
    rows = connection.execute(
        "SELECT compaction_id, namespace, tokens_before, tokens_after, target_tokens, context_window, compacted_at "
        "FROM compactions"
    )
    return {row[0]: tuple(row) for row in rows}
