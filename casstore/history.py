"""
Reading the offload history: the figures behind `casstore stats` and the rows behind `casstore log`.

A thin client of the repository's history questions (`casstore.index_queries`), which are read-only queries over the
index's tables and views, so what the command prints is exactly what `sqlite3 index.db` shows.
"""

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from casstore.disk import disk_usage
from casstore.repository import HasRepository, OffloadEntry, Repository, repository_of

__all__ = [
    "OffloadEntry",
    "StoreStats",
    "count_offloads",
    "disk_usage",
    "namespaces",
    "namespaces_holding",
    "offload_log",
    "stats",
]


@dataclass
class StoreStats:
    """Size, dedup and compression of a store, with writes and offloads per namespace and per tool."""

    blobs: int
    writes: int
    logical_bytes: int
    unique_bytes: int
    stored_bytes: int
    disk_bytes: int
    index_bytes: int
    blob_bytes: int
    dedup_ratio: float | None
    compression_ratio: float | None
    namespaces: list[dict[str, Any]] = field(default_factory=list)
    tools: list[dict[str, Any]] = field(default_factory=list)


def namespaces(source: Repository | HasRepository) -> list[str]:
    """:returns: Every namespace that has writes or offloads."""
    return repository_of(source).namespaces()


def namespaces_holding(source: Repository | HasRepository, reference: str) -> list[str]:
    """:returns: The namespaces in which `reference` was written and is not forgotten, in order."""
    return repository_of(source).namespaces_holding(reference)


def stats(source: Repository | HasRepository, *, namespace: str | None = None) -> StoreStats:
    """
    :param source: The store, or its repository.
    :param namespace: Limit the per-namespace and per-tool rows to this namespace (the totals stay store-wide).
    :returns: The store's figures.
    """
    repository = repository_of(source)
    summary = repository.summary()
    index_bytes, blob_bytes = repository.footprint()
    return StoreStats(
        blobs=summary["blobs"],
        writes=summary["writes"],
        logical_bytes=summary["logical_bytes"],
        unique_bytes=summary["unique_bytes"],
        stored_bytes=summary["stored_bytes"],
        disk_bytes=index_bytes + blob_bytes,
        index_bytes=index_bytes,
        blob_bytes=blob_bytes,
        dedup_ratio=summary["dedup_ratio"],
        compression_ratio=summary["compression_ratio"],
        namespaces=repository.namespace_rows(namespace=namespace),
        tools=repository.tool_rows(namespace=namespace),
    )


def count_offloads(
    source: Repository | HasRepository,
    *,
    namespace: str | None = None,
    tool: str | None = None,
    since: timedelta | None = None,
) -> int:
    """:returns: How many offloads match the filters (as `offload_log` takes them), however many it would list."""
    return repository_of(source).offload_count(namespace=namespace, tool=tool, since=since)


def offload_log(
    source: Repository | HasRepository,
    *,
    namespace: str | None = None,
    tool: str | None = None,
    since: timedelta | None = None,
    limit: int | None = None,
) -> list[OffloadEntry]:
    """
    :param source: The store, or its repository.
    :param namespace: Only this namespace's offloads.
    :param tool: Only this tool's offloads.
    :param since: Only offloads within this period before now.
    :param limit: At most this many entries.
    :returns: Offloads, newest first.
    """
    return repository_of(source).offload_entries(namespace=namespace, tool=tool, since=since, limit=limit)
