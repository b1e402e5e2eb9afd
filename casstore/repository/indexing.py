"""
The search index's upkeep, shared by the `Repository`'s writer, its search and its retention: turning the index on,
indexing what writes left pending, and the text gc removes with a blob.
"""

import logging
import time
from functools import partial

from casstore import search as search_index
from casstore.errors import CasStoreError, CorruptBlobError, StoreClosedError
from casstore.index.prepared import PreparedWrite
from casstore.index.work import UnitOfWork
from casstore.repository.core import ROWS_PER_TRANSACTION, RepositoryCore
from casstore.search import WrittenText, searchable_text

_logger = logging.getLogger(__name__)


class SearchIndexing:
    """What waits to be indexed (`search_index.add_pending`), indexed; and an indexed blob's text, for gc."""

    def __init__(self, core: RepositoryCore) -> None:
        self._core = core
        self._index = core.index
        self._database = core.database
        self._blobs = core.blobs
        self._search_text = core.search_text
        self._written_texts = core.written_texts

    def enable(self) -> None:
        """Turn the search index on, if it is not on yet."""
        with self._core.guard.held():
            with self._index() as connection:
                if search_index.is_enabled(connection):
                    return
            try:
                with self._database.transaction() as work:
                    search_index.enable(work, self._search_text)
            except self._database.failures as error:
                raise self._core.engine_failed(error) from error

    def leave_for_indexing(self, work: UnitOfWork, namespace: str, write: PreparedWrite) -> None:
        """Record `write`'s pending row in its transaction, and keep its text for the batch after the commit."""
        # One insert, and the text kept in memory once it commits, for the next batch to index without reading the
        # blob back. Binary content is indexed only if it is UTF-8 text.
        if write.is_text:
            text = write.data.decode("utf-8")
        else:
            found = searchable_text(write.data, is_text=False)
            if found is None:
                return
            text = found
        search_index.add_pending(work, self._search_text, namespace=namespace, digest=write.digest)
        work.on_commit(partial(self._written_texts.add, WrittenText(namespace, write.digest, text)))

    @property
    def written_texts_due(self) -> bool:
        """Whether enough texts this process wrote wait for a batch to index them."""
        return self._written_texts.due

    def index_written_texts(self) -> None:
        """Index the texts this process wrote; a failure is logged, and their pending rows wait for `catch_up`."""
        # After commits, in the writer, in one short transaction of its own. A failure fails no write (they
        # committed).
        texts = self._written_texts.take()
        if not texts:
            return
        failures: tuple[type[Exception], ...] = (CasStoreError, *self._core.failures)
        try:
            with self._database.transaction() as work:
                for text in texts:
                    search_index.index_pending(
                        work, self._search_text, namespace=text.namespace, digest=text.digest, text=text.text
                    )
        except failures as error:
            _logger.warning(
                "casstore could not index %d written result(s) for search (%s); the next search indexes them",
                len(texts),
                error,
            )

    def catch_up(self, *, namespace: str | None, deadline: float | None) -> int:
        """
        Index what waits to be indexed, of `namespace` (or of all): this process's texts first, then the pending rows
        any writer left (a crash, another process), each blob read back, in batches of a transaction each.

        :returns: How many results of `namespace` still wait (the deadline came first).
        """
        self.index_written_texts()
        # A read-only index cannot take what waits: it stays pending, and is counted.
        while not self._core.read_only and (deadline is None or time.monotonic() < deadline):
            with self._index() as connection:
                rows = search_index.pending(connection, namespace=namespace, limit=ROWS_PER_TRANSACTION)
            if not rows:
                return 0
            texts = [(entry, self._stored_text(entry.digest, written_as_text=entry.written_as_text)) for entry in rows]
            try:
                with self._database.transaction() as work:
                    for entry, text in texts:
                        search_index.index_pending(
                            work, self._search_text, namespace=entry.namespace, digest=entry.digest, text=text
                        )
            except self._database.conflicts:
                break  # PostgreSQL broke a deadlock with another process indexing them: they stay pending, counted
        with self._index() as connection:
            return search_index.pending_count(connection, namespace=namespace)

    def _stored_text(self, digest: str, *, written_as_text: bool) -> str | None:
        # A blob's text as the index takes it, read back and verified; None if it is not text, gone or damaged.
        try:
            with self._index() as connection:
                location = self._blobs.locate(connection, digest)
            return searchable_text(self._blobs.load(location, guarded=False), is_text=written_as_text)
        except CorruptBlobError:
            return None

    def indexed_text(self, work: UnitOfWork, digest: str) -> tuple[bool, str | None]:
        """:returns: Whether blob `digest` has a document, and the text its trigrams came from (None if unreadable)."""
        # What gc needs to remove a blob's document.
        if not self._core.searchable or not search_index.is_indexed(work.connection, digest):
            return False, None
        try:
            data = self._blobs.load(self._blobs.locate(work.connection, digest), guarded=False)
        except CorruptBlobError:
            return True, None
        return True, data.decode("utf-8", "replace")

    def flush(self) -> None:
        """
        Index what this process wrote and has not indexed yet, before the repository closes. A failure to index is
        logged; the results' pending rows wait for the next search or build.
        """
        if len(self._written_texts):
            try:
                with self._core.guard.held():
                    self.index_written_texts()
            except StoreClosedError:
                pass
