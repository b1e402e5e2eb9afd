"""
Reading the offload history: the figures behind `casstore stats` and the rows behind `casstore log`.

A thin client of the repository's history questions (`casstore.index.queries`), which are read-only queries over the
index's tables and views, so what the command prints is exactly what `sqlite3 index.db` shows.
"""

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from casstore.disk import disk_usage
from casstore.history.figures import ratio
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
    """
    Size, dedup and compression of a store or of one namespace, with writes and offloads per namespace and per tool.

    `scope` says what the figures count: `store` (every write and every stored blob, those no write references any
    more until gc deletes them included) or `namespace` (the writes of `namespace` and the distinct blobs they
    reference, shared ones included). Ratios are defined in `casstore.history.figures`. Bytes on disk (`disk_bytes`,
    `index_bytes`, `blob_bytes`) belong to the whole store, whose namespaces share its blobs: None for a namespace.
    `dedup_scope` is the store's dedup scope (`store` or `namespace`: docs/dedup-scope.md), whatever `scope` is.
    """

    scope: str
    namespace: str | None
    dedup_scope: str
    blobs: int
    writes: int
    logical_bytes: int
    unique_bytes: int
    stored_bytes: int
    disk_bytes: int | None
    index_bytes: int | None
    blob_bytes: int | None
    dedup_ratio: float | None
    compression_ratio: float | None
    total_ratio: float | None
    namespaces: list[dict[str, Any]] = field(default_factory=list)
    tools: list[dict[str, Any]] = field(default_factory=list)


def namespaces(source: Repository | HasRepository) -> list[str]:
    """:returns: Every namespace that has writes or offloads."""
    return repository_of(source).history.namespaces()


def namespaces_holding(source: Repository | HasRepository, reference: str) -> list[str]:
    """:returns: The namespaces in which `reference` was written and is not forgotten, in order."""
    return repository_of(source).history.namespaces_holding(reference)


def stats(source: Repository | HasRepository, *, namespace: str | None = None) -> StoreStats:
    """
    :param source: The store, or its repository.
    :param namespace: Only this namespace: every figure is its own (its writes and the blobs they reference), and
        the per-namespace and per-tool rows are its rows.
    :returns: The figures.
    """
    repository = repository_of(source)
    disk: tuple[int, int] | tuple[None, None]
    if namespace is None:
        totals = repository.history.summary()
        disk = repository.history.footprint()
    else:
        totals = repository.history.namespace_totals(namespace=namespace)
        disk = (None, None)
    logical, unique, stored = totals["logical_bytes"], totals["unique_bytes"], totals["stored_bytes"]
    index_bytes, blob_bytes = disk
    return StoreStats(
        scope="store" if namespace is None else "namespace",
        namespace=namespace,
        dedup_scope=repository.dedup_scope.name,
        blobs=totals["blobs"],
        writes=totals["writes"],
        logical_bytes=logical,
        unique_bytes=unique,
        stored_bytes=stored,
        disk_bytes=None if index_bytes is None or blob_bytes is None else index_bytes + blob_bytes,
        index_bytes=index_bytes,
        blob_bytes=blob_bytes,
        dedup_ratio=ratio(logical, unique),
        compression_ratio=ratio(unique, stored),
        total_ratio=ratio(logical, stored),
        namespaces=repository.history.namespace_rows(namespace=namespace),
        tools=repository.history.tool_rows(namespace=namespace),
    )


def count_offloads(
    source: Repository | HasRepository,
    *,
    namespace: str | None = None,
    tool: str | None = None,
    since: timedelta | None = None,
) -> int:
    """
    :returns: How many entries `offload_log` would list with these filters and no limit: the compactor's and the
        hook's offloads, and (without `tool`) the step archive's archives.
    """
    return repository_of(source).history.offload_count(namespace=namespace, tool=tool, since=since)


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
    :param tool: Only this tool's offloads (a hook's key must name it for certain: see `OffloadEntry`).
    :param since: Only offloads within this period before now.
    :param limit: At most this many entries.
    :returns: Offloads, newest first: each result `DedupOffloadCompactor` offloaded (`source` "compactor"), and each
        part Haystack's `ToolResultOffloadHook` wrote (`source` "hook", without token figures).
    """
    return repository_of(source).history.offload_entries(namespace=namespace, tool=tool, since=since, limit=limit)
