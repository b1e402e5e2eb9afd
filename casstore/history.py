"""
Reading the offload history: the figures behind `casstore stats` and the rows behind `casstore log`.

These are read-only queries over the index's tables and views, so what the command prints is exactly what
`sqlite3 index.db` shows.
"""

import json
import os
import sqlite3
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from casstore.database import SHIFTED_NOW_SQL, ago
from casstore.references import parse_reference
from casstore.store import ContentAddressedToolResultStore


@dataclass
class StoreStats:
    """Size, dedup and compression of a store, with writes and offloads per namespace and per tool."""

    blobs: int
    writes: int
    logical_bytes: int
    unique_bytes: int
    stored_bytes: int
    disk_bytes: int
    dedup_ratio: float | None
    compression_ratio: float | None
    namespaces: list[dict[str, Any]] = field(default_factory=list)
    tools: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class OffloadEntry:
    """One row of the offload history."""

    offloaded_at: str
    namespace: str
    tool_name: str
    tool_call_id: str | None
    original_tokens: int
    saved_tokens: int
    references: list[str]
    compaction_id: str


def disk_usage(root: Path) -> int:
    """:returns: Bytes the folder occupies on disk (allocated blocks, as `du` counts), index files included."""
    total = 0
    for directory, _, files in os.walk(root):
        for name in files:
            try:
                total += os.lstat(os.path.join(directory, name)).st_blocks * 512
            except FileNotFoundError:
                continue
    return total


def namespaces(store: ContentAddressedToolResultStore) -> list[str]:
    """:returns: Every namespace that has writes or offloads."""
    with store.database.reading() as connection:
        rows = connection.execute("SELECT namespace FROM writes UNION SELECT namespace FROM offloads ORDER BY 1")
        return [row[0] for row in rows]


def namespaces_holding(store: ContentAddressedToolResultStore, reference: str) -> list[str]:
    """:returns: The namespaces in which `reference` was written and is not forgotten, in order."""
    digest = parse_reference(reference).digest
    with store.database.reading() as connection:
        rows = connection.execute(
            "SELECT namespace FROM visible_references WHERE digest = ? AND reference = ? ORDER BY 1",
            (digest, reference),
        )
        return [row[0] for row in rows]


def stats(store: ContentAddressedToolResultStore, *, namespace: str | None = None) -> StoreStats:
    """
    :param store: The store.
    :param namespace: Limit the per-namespace and per-tool rows to this namespace (the totals stay store-wide).
    :returns: The store's figures.
    """
    with store.database.reading() as connection:
        summary = _rows(connection, "SELECT * FROM dedup_summary")[0]
        parameters = [] if namespace is None else [namespace]
        where = "" if namespace is None else "WHERE namespace = ?"
        per_namespace = _rows(
            connection,
            f"""
            SELECT * FROM namespace_summary
            LEFT JOIN (SELECT namespace, sum(offloads) AS offloads, sum(saved_tokens) AS saved_tokens
                       FROM offload_summary GROUP BY namespace) USING (namespace)
            {where} ORDER BY namespace
            """,
            parameters,
        )
        per_tool = _rows(
            connection,
            f"SELECT namespace, tool_name, offloads, original_tokens, saved_tokens FROM offload_summary {where} "
            "ORDER BY namespace, offloads DESC, tool_name",
            parameters,
        )
    return StoreStats(
        blobs=summary["blobs"],
        writes=summary["writes"],
        logical_bytes=summary["logical_bytes"],
        unique_bytes=summary["unique_bytes"],
        stored_bytes=summary["stored_bytes"],
        disk_bytes=disk_usage(store.root),
        dedup_ratio=summary["dedup_ratio"],
        compression_ratio=summary["compression_ratio"],
        namespaces=per_namespace,
        tools=per_tool,
    )


def offload_log(
    store: ContentAddressedToolResultStore,
    *,
    namespace: str | None = None,
    tool: str | None = None,
    since: timedelta | None = None,
    limit: int | None = None,
) -> list[OffloadEntry]:
    """
    :param store: The store.
    :param namespace: Only this namespace's offloads.
    :param tool: Only this tool's offloads.
    :param since: Only offloads within this period before now.
    :param limit: At most this many entries.
    :returns: Offloads, newest first.
    """
    clauses: list[str] = ["1"]
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
    parameters.append(-1 if limit is None else limit)
    with store.database.reading() as connection:
        rows = _rows(
            connection,
            f"SELECT * FROM offloads WHERE {' AND '.join(clauses)} ORDER BY offloaded_at DESC, id DESC LIMIT ?",
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


def _rows(connection: sqlite3.Connection, sql: str, parameters: list[Any] | None = None) -> list[dict[str, Any]]:
    cursor = connection.execute(sql, parameters or [])
    columns = [description[0] for description in cursor.description]
    return [dict(zip(columns, row, strict=True)) for row in cursor]
