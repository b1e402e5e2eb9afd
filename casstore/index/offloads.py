"""
The offloads of Haystack's `ToolResultOffloadHook` in the history, beside those of `DedupOffloadCompactor`.

The hook keeps no record of its own: it writes each part of a result through the store under a key of its shape
(`casstore.hook_keys`), so its offloads are the writes of such keys in the view `writes`. The compactor's are the
rows of `offloads`. These questions read both, in SQL both engines share (SQLite's spelling; `casstore.index.postgres`
translates it), and tell the tool and call id from the key in Python, since neither engine can split it for certain.
"""

import heapq
import itertools
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta

from casstore.hook_keys import HookKey, parse_hook_key
from casstore.index import queries as index_queries
from casstore.index.queries import OffloadEntry
from casstore.index.work import SHIFTED_NOW_SQL, ago

HOOK = "hook"
# A hook's key starts with its step, a number: only writes whose key starts with a digit are read and parsed.
_STARTS_WITH_A_DIGIT = "substr(key, 1, 1) IN ('0', '1', '2', '3', '4', '5', '6', '7', '8', '9')"


@dataclass(frozen=True, slots=True)
class HookToolOffloads:
    """
    What the hook offloaded for one tool: results, the parts written for them (one each unless a result had several),
    and the first and last time. `tool_name` None gathers the keys that do not tell their tool for certain.
    """

    tool_name: str | None
    results: int
    parts: int
    first_offload: str
    last_offload: str


def offload_entries(
    connection: sqlite3.Connection,
    *,
    namespace: str | None,
    tool: str | None,
    since: timedelta | None,
    limit: int | None,
) -> list[OffloadEntry]:
    """
    :returns: The compactor's and the hook's offloads and the step archive's archives (which have no tool: only
        without `tool`) matching every filter given, newest first, at most `limit`.
    """
    compacted = index_queries.offload_entries(connection, namespace=namespace, tool=tool, since=since, limit=limit)
    hooked = itertools.islice(hook_entries(connection, namespace=namespace, tool=tool, since=since), limit)
    archived = (
        index_queries.archive_entries(connection, namespace=namespace, since=since, limit=limit) if tool is None else []
    )
    # All come newest first; at one moment, the compactor's entry comes first, then the archive's.
    merged = heapq.merge(compacted, archived, hooked, key=lambda entry: entry.offloaded_at, reverse=True)
    return list(itertools.islice(merged, limit))


def offload_count(
    connection: sqlite3.Connection, *, namespace: str | None, tool: str | None, since: timedelta | None
) -> int:
    """:returns: How many of the compactor's and the hook's offloads (and archives, without `tool`) match."""
    where, parameters = _hook_filter(namespace=namespace, tool=tool, since=since)
    # Only the keys, in no order: what a count needs of each write, about a third of the time of whole entries.
    keys = connection.execute(f"SELECT key FROM writes WHERE {where}", parameters)
    hooked = sum(1 for (key,) in keys if _names(parse_hook_key(key), tool))
    archived = index_queries.archive_count(connection, namespace=namespace, since=since) if tool is None else 0
    return index_queries.offload_count(connection, namespace=namespace, tool=tool, since=since) + hooked + archived


def hook_entries(
    connection: sqlite3.Connection, *, namespace: str | None, tool: str | None, since: timedelta | None
) -> Iterator[OffloadEntry]:
    """
    :param tool: Only the writes whose key names this tool for certain.
    :returns: The hook's offloads (one per part written) matching every filter given, newest first, read as needed.
    """
    where, parameters = _hook_filter(namespace=namespace, tool=tool, since=since)
    cursor = connection.execute(
        f"SELECT namespace, key, reference, written_at FROM writes WHERE {where} ORDER BY written_at DESC, id DESC",
        parameters,
    )
    for namespace_name, key, reference, written_at in cursor:
        parsed = parse_hook_key(key)
        if parsed is None or not _names(parsed, tool):
            continue
        yield OffloadEntry(
            offloaded_at=written_at,
            namespace=namespace_name,
            tool_name=parsed.tool_name,
            tool_call_id=parsed.tool_call_id,
            original_tokens=None,
            saved_tokens=None,
            references=[reference],
            compaction_id=None,
            source=HOOK,
            key=key,
            part=parsed.part,
        )


def hook_tool_offloads(
    connection: sqlite3.Connection, *, namespace: str | None, since: timedelta | None
) -> list[HookToolOffloads]:
    """:returns: What the hook offloaded per tool (the keys that tell none last), most results first."""
    rows: dict[str | None, HookToolOffloads] = {}
    for entry in hook_entries(connection, namespace=namespace, tool=None, since=since):
        # A result's parts are written in order, so a result is counted at its first part (or its only one).
        starts_a_result = int(entry.part is None or entry.part == 0)
        seen = rows.get(entry.tool_name)
        if seen is None:
            rows[entry.tool_name] = HookToolOffloads(
                entry.tool_name, starts_a_result, 1, entry.offloaded_at, entry.offloaded_at
            )
        else:
            # Newest first: each entry is the earliest so far.
            rows[entry.tool_name] = HookToolOffloads(
                entry.tool_name, seen.results + starts_a_result, seen.parts + 1, entry.offloaded_at, seen.last_offload
            )
    return sorted(rows.values(), key=lambda row: (row.tool_name is None, -row.results, row.tool_name or ""))


def _hook_filter(*, namespace: str | None, tool: str | None, since: timedelta | None) -> tuple[str, list[object]]:
    """:returns: A condition on `writes` that every hook offload matching the filters meets, and its parameters."""
    clauses = [_STARTS_WITH_A_DIGIT]
    parameters: list[object] = []
    if namespace is not None:
        clauses.append("namespace = ?")
        parameters.append(namespace)
    if since is not None:
        clauses.append(f"written_at >= {SHIFTED_NOW_SQL}")
        parameters.append(ago(since))
    if tool is not None:
        # Only narrows what is read (SQLite's LIKE ignores ASCII case): the parsed tool decides.
        clauses.append("key LIKE ? ESCAPE '!'")
        parameters.append(f"%{_like_text(tool)}%")
    return " AND ".join(clauses), parameters


def _names(parsed: HookKey | None, tool: str | None) -> bool:
    """:returns: Whether `parsed` is a hook's key, of `tool` for certain if a tool is asked for."""
    return parsed is not None and (tool is None or parsed.tool_name == tool)


def _like_text(text: str) -> str:
    return text.replace("!", "!!").replace("%", "!%").replace("_", "!_")
