"""`repository.history`: what happened (stats, log and report figures, with typed arguments) and what it takes."""

from datetime import timedelta
from typing import Any

from casstore.index import offloads as hook_offloads
from casstore.index import queries as index_queries
from casstore.index import report_queries
from casstore.index.queries import HistoryMark, OffloadEntry
from casstore.index.report_queries import ReportFigures
from casstore.index.report_scope import Scope
from casstore.references import parse_reference
from casstore.repository.core import RepositoryCore


class History:
    """What happened: writes, offloads and compactions, asked of the index; and the bytes the repository takes."""

    def __init__(self, core: RepositoryCore) -> None:
        self._core = core
        self._index = core.index
        self._database = core.database

    def summary(self) -> dict[str, Any]:
        """:returns: The view `dedup_summary`'s one row: writes, blobs, bytes and ratios over the whole store."""
        with self._index() as connection:
            return index_queries.summary(connection)

    def namespace_totals(self, *, namespace: str) -> dict[str, int]:
        """:returns: Writes and logical bytes of `namespace`, and the blobs and bytes of what they reference."""
        with self._index() as connection:
            return index_queries.namespace_totals(connection, namespace=namespace)

    def namespace_rows(self, *, namespace: str | None = None) -> list[dict[str, Any]]:
        """:returns: Writes, distinct results, bytes, offloads and tokens saved per namespace (or of `namespace`)."""
        with self._index() as connection:
            return index_queries.namespace_rows(connection, namespace=namespace)

    def tool_rows(self, *, namespace: str | None = None) -> list[dict[str, Any]]:
        """:returns: Offloads and tokens per namespace and tool (or of `namespace`)."""
        with self._index() as connection:
            return index_queries.tool_rows(connection, namespace=namespace)

    def offload_entries(
        self,
        *,
        namespace: str | None = None,
        tool: str | None = None,
        since: timedelta | None = None,
        limit: int | None = None,
    ) -> list[OffloadEntry]:
        """
        :returns: The compactor's offloads and the hook's (`hook_offloads`) matching every filter given, newest first,
            at most `limit`.
        """
        with self._index() as connection:
            return hook_offloads.offload_entries(connection, namespace=namespace, tool=tool, since=since, limit=limit)

    def offload_count(
        self, *, namespace: str | None = None, tool: str | None = None, since: timedelta | None = None
    ) -> int:
        """:returns: How many of the compactor's and the hook's offloads, and (without `tool`) archives, match."""
        with self._index() as connection:
            return hook_offloads.offload_count(connection, namespace=namespace, tool=tool, since=since)

    def namespaces(self) -> list[str]:
        """:returns: Every namespace that has writes or offloads, in order."""
        with self._index() as connection:
            return index_queries.namespaces(connection)

    def namespaces_holding(self, reference: str) -> list[str]:
        """
        :returns: The namespaces in which `reference` was written and is not forgotten, in order.
        :raises InvalidReferenceError: If `reference` is malformed.
        """
        digest = parse_reference(reference).digest
        with self._index() as connection:
            return index_queries.namespaces_holding(connection, digest=digest, reference=reference)

    def mark(self) -> HistoryMark:
        """:returns: How far the history reaches now, for `figures_since` and `writes_since`."""
        with self._index() as connection:
            return index_queries.history_mark(connection)

    def figures_since(self, *, namespace: str, mark: HistoryMark) -> dict[str, int]:
        """:returns: Offloads, tokens and bytes of what `namespace` did after `mark` (`index_queries.figures_since`)."""
        with self._index() as connection:
            return index_queries.figures_since(connection, namespace=namespace, mark=mark)

    def writes_since(self, *, namespace: str, mark: HistoryMark) -> list[tuple[str, str]]:
        """:returns: `(key, reference)` of every write of `namespace` after `mark`, in order."""
        with self._index() as connection:
            return index_queries.writes_since(connection, namespace=namespace, mark=mark)

    def report_figures(
        self,
        *,
        namespace: str | None = None,
        since: timedelta | None = None,
        series_limit: int = 500,
        rows_limit: int = 20,
        namespace_limit: int = 200,
        tool_limit: int = 30,
    ) -> ReportFigures:
        """
        :param namespace: Only this namespace's history (all namespaces when None).
        :param since: Only the history of this period before now (all history when None).
        :param series_limit: At most this many marks per series (compactions, savings, bytes); past it, time buckets.
        :param rows_limit: At most this many rows per ranking of results (the most repeated, the largest).
        :param namespace_limit: At most this many namespaces, the busiest first.
        :param tool_limit: At most this many tools per table of tools, the busiest first; the rest are summed.
        :returns: What `casstore report` draws, read in one consistent state of the index.
        """
        scope = Scope(namespace=namespace, since=since)
        try:
            with self._database.snapshot() as connection:
                return report_queries.report_figures(
                    connection,
                    scope=scope,
                    series_limit=series_limit,
                    rows_limit=rows_limit,
                    namespace_limit=namespace_limit,
                    tool_limit=tool_limit,
                )
        except self._database.failures as error:
            if isinstance(error, self._database.damage):
                raise
            raise self._core.engine_failed(error) from error

    def disk_bytes(self) -> int:
        """:returns: Bytes the repository occupies (for a local one: on disk as `du` counts them, index included)."""
        return sum(self.footprint())

    def footprint(self) -> tuple[int, int]:
        """
        :returns: Bytes the index and the blobs kept outside it occupy, apart: for a local repository `index.db` (with
            its write-ahead log) and the `blobs/` folder on disk; for a shared one, casstore's tables in PostgreSQL
            and the objects under the prefix.
        """
        return self._core.footprint()

    def encoding_counts(self) -> dict[str, int]:
        """:returns: How many blobs are stored `plain`, with a `dictionary`, as a `delta`; and how many dictionaries."""
        with self._index() as connection:
            return self._core.blobs.encodings(connection)

    def learning_figures(self) -> dict[str, float]:
        """:returns: How often this repository object trained a dictionary, and the seconds it took in all."""
        learner = self._core.blobs.learner
        if learner is None:
            return {"trainings": 0.0, "training_seconds": 0.0}
        return {"trainings": float(learner.trainings), "training_seconds": learner.training_seconds}
