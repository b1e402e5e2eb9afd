"""
`repository.retention`: what `verify` checks and what `gc` forgets, deletes and gives back.

A collection removes what it deletes from the search index too, with the search index's upkeep (`SearchIndexing`).
"""

import dataclasses
import time
from collections.abc import Iterable, Iterator
from datetime import timedelta
from typing import Any

from casstore import search as search_index
from casstore.blobs.collection import WaitingBlobs
from casstore.errors import CorruptBlobError
from casstore.index import queries as index_queries
from casstore.index import writes as index
from casstore.index.queries import NeededBlob
from casstore.index.work import UnitOfWork
from casstore.repository.core import ROWS_PER_TRANSACTION, RepositoryCore, lost_blobs
from casstore.repository.findings import BlobCheck, Collection, CollectionPreview, IntegritySnapshot
from casstore.repository.indexing import SearchIndexing

# Stored bytes deleted per transaction at most (a blob kept in the index frees its pages inside that transaction).
_BATCH_BYTES = 4 * 2**20
# gc's passes over collectable blobs: a base becomes collectable once the blobs that need it are gone, so each pass
# may free the next link of a chain (whose length the learner bounds).
_COLLECTION_PASSES = 10


class Retention:
    """Verifying blobs, forgetting history, and collecting what nothing needs."""

    def __init__(self, core: RepositoryCore, *, indexing: SearchIndexing) -> None:
        self._core = core
        self._index = core.index
        self._database = core.database
        self._blobs = core.blobs
        self._guard = core.guard
        self._search_text = core.search_text
        self._search_index_writes = core.search_index_writes
        self._indexing = indexing

    def integrity_snapshot(self) -> IntegritySnapshot:
        """
        :returns: Every blob, the writes without a blob, and the unreferenced blobs, in one consistent read.
        """
        with self._guard.held(), self._database.snapshot() as connection:
            return IntegritySnapshot(
                digests=self._blobs.digests(connection),
                dictionaries=self._blobs.dictionary_digests(connection),
                dangling_writes=index.dangling_writes(connection),
                unreferenced=set(index.unreferenced_digests(connection)),
            )

    def check_blob(self, digest: str) -> BlobCheck:
        """
        Re-read and re-hash one blob, as a read would; a blob found missing or damaged is recorded as lost, as a read
        records it (`RepositoryCore.mark_lost`), so that the next write of its content stores it again.

        :returns: What was found.
        """
        with self._guard.held():
            try:
                with self._index() as connection:
                    location = self._blobs.locate(connection, digest)
                self._blobs.load(location, guarded=False, fresh=True)
            except CorruptBlobError as error:
                lost = lost_blobs(error)
                if not error.missing:
                    self._core.mark_lost(lost)
                    return BlobCheck("corrupt", str(error))
                with self._index() as connection:
                    if not self._blobs.exists(connection, digest):
                        return BlobCheck("collected")  # a concurrent gc deleted it after the list was taken
                self._core.mark_lost(lost)
                return BlobCheck("missing", str(error))
        return BlobCheck("ok")

    def check_dictionary(self, digest: str) -> BlobCheck:
        """Re-read and re-hash one trained dictionary. :returns: What was found (`ok`, `corrupt`, `collected`)."""
        with self._guard.held():
            try:
                self._blobs.check_dictionary(digest)
            except CorruptBlobError as error:
                return BlobCheck("collected" if error.missing else "corrupt", str(error))
        return BlobCheck("ok")

    def stray_files(self, *, modified_before: float) -> tuple[int, int]:
        """
        :param modified_before: Only files last modified before this Unix time count (later ones belong to writes in
            flight, whose rows may not be committed yet).
        :returns: How many blob or temporary files no row points at, and their bytes.
        """
        count = size = 0
        with self._guard.held():
            for blob_file in self._blobs.files():
                if blob_file.mtime >= modified_before:
                    continue
                with self._index() as connection:
                    if self._blobs.is_stray(connection, blob_file):
                        count += 1
                        size += blob_file.size
        return count, size

    def preview_collection(
        self,
        *,
        namespace: str | None,
        older_than: timedelta | None,
        grace: timedelta,
        max_size: int | None = None,
        rebuild: bool = False,
    ) -> CollectionPreview:
        """
        :param rebuild: Estimate the index's size as if it were rebuilt afterwards (`rebuild_index`).
        :returns: What `forget` and `delete_collectable_blobs` would remove now, and what would be left; nothing is
            changed.
        """
        with self._guard.held(), self._database.rolled_back() as work:
            forgotten = self._forget(work, namespace=namespace, older_than=older_than, max_size=max_size)
            collectable = self._blobs.collectable(work.connection, grace=grace)
            waiting = self._blobs.waiting(work.connection, grace=grace)
            released_waiting = self._blobs.waiting(work.connection, grace=grace, among=forgotten.released)
            needed_after = None
            if max_size is not None:
                needed_after = _total(index_queries.needed_blobs(work.connection, namespace=namespace))
            outside = self._blobs.delete_rows(work, [digest for digest, _ in collectable])
            dictionaries = self._blobs.unneeded_dictionaries(work)
            bases_kept, dictionaries_kept = self._blobs.kept_for_others(work.connection)
            texts_unindexed = self._unindex_in(work) if self._core.searchable else 0
            index_after = self._database.estimated_bytes(work, rebuilt=rebuild)
        return CollectionPreview(
            collection=dataclasses.replace(
                forgotten,
                blobs_deleted=len(collectable),
                blob_bytes_freed=sum(size for _, size in collectable),
                dictionaries_deleted=dictionaries,
                bases_kept=bases_kept,
                dictionaries_kept=dictionaries_kept,
                texts_unindexed=texts_unindexed,
            ),
            index_bytes_after=index_after,
            outside_bytes_freed=outside,
            waiting=waiting,
            released_waiting=released_waiting,
            needed_bytes_after=needed_after,
        )

    def forget(self, *, namespace: str | None, older_than: timedelta | None, max_size: int | None = None) -> Collection:
        """
        Forget the writes and offloads of `namespace` (or all) older than `older_than` (or any age), in one go; with
        `max_size`, then also the oldest writes in that scope, until the blobs the rest need take at most `max_size`
        stored bytes (`--namespace` then narrows the scope instead of forgetting the whole namespace).
        """
        measured = None
        with self._guard.held():
            if max_size is not None and older_than is None:
                # What the writes need is measured before gc takes its lock, so writers wait only for the forgetting.
                # A write landing in between is newer than any write the cut forgets, so it is kept, and counted in
                # what is still needed afterwards.
                with self._index() as connection:
                    measured = index_queries.needed_blobs(connection, namespace=namespace)
            with self._database.transaction(exclusive=True) as work:
                return self._forget(
                    work, namespace=namespace, older_than=older_than, max_size=max_size, measured=measured
                )

    def _forget(
        self,
        work: UnitOfWork,
        *,
        namespace: str | None,
        older_than: timedelta | None,
        max_size: int | None,
        measured: list[NeededBlob] | None = None,
    ) -> Collection:
        connection = work.connection
        needed_before: int | None = None
        needed: list[NeededBlob] = []
        if max_size is not None:
            needed = measured if measured is not None else index_queries.needed_blobs(connection, namespace=namespace)
            needed_before = _total(needed)
        forgotten = index.Forgotten()
        if older_than is not None or max_size is None:
            forgotten = index.forget(
                work, namespace=namespace, older_than=older_than, with_digests=max_size is not None
            )
            if forgotten.writes and max_size is not None:
                needed = index_queries.needed_blobs(connection, namespace=namespace)
        writes, offloads, released = forgotten.writes, forgotten.offloads, forgotten.digests
        cut = None if max_size is None else index_queries.retention_cut(needed, max_size=max_size)
        if cut is not None:
            by_size = index.forget(work, namespace=namespace, older_than=None, through=cut, with_digests=True)
            writes, offloads = writes + by_size.writes, offloads + by_size.offloads
            released |= by_size.digests
        if writes and self._core.searchable:
            search_index.forget_entries(work)  # a namespace's search sees only what it still holds
        return Collection(
            writes_forgotten=writes, offloads_forgotten=offloads, needed_bytes_before=needed_before, released=released
        )

    def needed_bytes(self, *, namespace: str | None = None) -> int:
        """
        :returns: The stored bytes of the blobs the writes of `namespace` (or all writes) still need, anything they
            depend on included: what retention by size (`forget(max_size=...)`) keeps at most.
        """
        with self._index() as connection:
            return _total(index_queries.needed_blobs(connection, namespace=namespace))

    def blob_dependencies(self, digests: Iterable[str]) -> set[str]:
        """
        :param digests: Blobs by digest.
        :returns: Every blob those need to be read (a delta's base, and what that needs in turn),
            which gc must keep while any of `digests` is kept; `digests` themselves only where one needs another.
        """
        with self._index() as connection:
            return self._blobs.dependencies(connection, digests)

    def waiting_blobs(self, *, grace: timedelta, among: frozenset[str] | None = None) -> WaitingBlobs:
        """:returns: The blobs (of `among`, or all) no reference is visible for that `grace` keeps, and until when."""
        with self._index() as connection:
            return self._blobs.waiting(connection, grace=grace, among=among)

    def index_space(self, *, rebuild: bool) -> str:
        """
        :param rebuild: Whether `rebuild_index` follows the collection.
        :returns: What happens to the space of the rows a collection deletes: `returned` (to the file system, by
            `return_free_space`), `rebuilt`, `kept-until-rebuilt` (a SQLite index made before casstore set
            `auto_vacuum`: kept for later writes until `rebuild_index`), `reused-after-autovacuum` (PostgreSQL), or
            `vacuumed` (PostgreSQL, rebuilt).
        """
        return self._database.space_policy(rebuilt=rebuild)

    def rebuilds_after(self, collection: Collection) -> bool:
        """
        :param collection: What a collection deleted (or, in a dry run, would delete).
        :returns: Whether the index must be rebuilt (`rebuild_index`) for the bytes of what it deleted to leave its
            files in the same run: on SQLite, once any blob, dictionary or search text was deleted (see
            `rebuilds_to_delete` in `casstore.index.database`); never on PostgreSQL, whose rows wait for `gc --vacuum`.
        """
        deleted = collection.blobs_deleted or collection.dictionaries_deleted or collection.texts_unindexed
        return self._database.rebuilds_to_delete and bool(deleted)

    def return_free_space(self) -> bool:
        """
        Give the index's free space back to the file system, in short steps beside writers (SQLite's incremental
        vacuum); PostgreSQL's autovacuum does its own part, and nothing is done here.

        :returns: Whether space was given back (False for PostgreSQL, and for a SQLite index made before casstore
            set `auto_vacuum`, which `rebuild_index` converts).
        """
        with self._guard.held():
            try:
                return self._database.return_free_space()
            except self._database.failures as error:
                raise self._core.engine_failed(error) from error

    def rebuild_index(self) -> bool:
        """
        Rebuild the index: SQLite's full `VACUUM` (which also converts an index made before `auto_vacuum` was set,
        holding writers off until it ends), PostgreSQL's `VACUUM FULL` of the tables that hold content.

        :returns: Whether the rebuilt index is all the files hold: False while another connection reads an older
            state of a SQLite index, whose pages `index.db` keeps until that read ends.
        """
        with self._guard.held():
            try:
                return self._database.rebuild()
            except self._database.failures as error:
                raise self._core.engine_failed(error) from error

    def delete_collectable_blobs(self, *, grace: timedelta) -> Collection:
        """
        Delete every blob no reference is visible for and not seen within `grace`.

        Candidates come from one scan without the write lock; each is checked again under the lock, in batches of at
        most `ROWS_PER_TRANSACTION` blobs and `_BATCH_BYTES` stored bytes, with a pause for writers after each, so a
        writer waits for about one batch of deletions, however large the store.
        """
        deleted = freed = 0
        unindexed = False
        with self._guard.held():
            for _ in range(_COLLECTION_PASSES):
                with self._index() as connection:
                    candidates = self._blobs.collectable(connection, grace=grace)
                before = deleted
                for batch in _sized_batches(candidates):
                    started = time.perf_counter()
                    with self._database.transaction(exclusive=True) as work:
                        for digest, stored_size in batch:
                            # An indexed blob's text is read before the blob goes: the trigrams are removed with it.
                            indexed, text = self._indexing.indexed_text(work, digest)
                            if self._blobs.delete_if_collectable(work, digest, grace=grace):
                                if indexed or self._search_index_writes:  # its document, or a pending row
                                    unindexed |= search_index.remove(work, self._search_text, digest=digest, text=text)
                                deleted += 1
                                freed += stored_size
                    self._database.yield_to_writers(time.perf_counter() - started)
                if deleted == before:
                    break
            texts_unindexed = self._unindex_unreferenced()
            unindexed |= bool(texts_unindexed)
            with self._database.transaction(exclusive=True) as work:
                dictionaries = self._blobs.unneeded_dictionaries(work)
                if unindexed:
                    # Deleted means deleted: the search index's structures that still held the deleted results'
                    # trigrams are rewritten without them.
                    self._search_text.purge(work)
            with self._index() as connection:
                bases_kept, dictionaries_kept = self._blobs.kept_for_others(connection)
        return Collection(
            blobs_deleted=deleted,
            blob_bytes_freed=freed,
            dictionaries_deleted=dictionaries,
            bases_kept=bases_kept,
            dictionaries_kept=dictionaries_kept,
            texts_unindexed=texts_unindexed,
        )

    def _unindex_unreferenced(self) -> int:
        # Deleted means deleted: a blob kept though no write references it (a kept delta's base, or within the grace
        # period) keeps its bytes for the blob layer, not its text in the search index. A later write of it leaves a
        # pending row, which indexes it again. Candidates in digest order, each checked again under the write lock.
        # :returns: How many documents were removed.
        if not self._core.searchable:
            return 0
        removed = 0
        after = ""
        while True:
            with self._index() as connection:
                digests = search_index.unreferenced_documents(connection, after=after, limit=ROWS_PER_TRANSACTION)
            if not digests:
                return removed
            after = digests[-1]
            started = time.perf_counter()
            with self._database.transaction(exclusive=True) as work:
                for digest in digests:
                    if search_index.is_referenced(work.connection, digest):
                        continue  # written again meanwhile
                    _, text = self._indexing.indexed_text(work, digest)
                    removed += search_index.remove(work, self._search_text, digest=digest, text=text)
            self._database.yield_to_writers(time.perf_counter() - started)

    def _unindex_in(self, work: UnitOfWork) -> int:
        # A dry run's `_unindex_unreferenced`, in its transaction (rolled back): the search index loses what the real
        # run takes out of it, so the pages counted afterwards are those the run would leave.
        removed = 0
        for digest in search_index.unreferenced_documents(work.connection, after="", limit=2**62):
            _, text = self._indexing.indexed_text(work, digest)
            removed += search_index.remove(work, self._search_text, digest=digest, text=text)
        if removed:
            self._search_text.purge(work)
        return removed

    def remove_stray_files(self, *, modified_before: float, dry_run: bool) -> tuple[int, int]:
        """
        Remove blob and temporary files no row points at, last modified before `modified_before` (a Unix time),
        each checked under the write lock, in batches.

        :returns: How many files were (or, with `dry_run`, would be) removed, and their bytes.
        """
        count = size = 0
        with self._guard.held():
            for batch in _batches(self._blobs.files()):
                with self._database.transaction(exclusive=True) as work:
                    for blob_file in batch:
                        if blob_file.mtime >= modified_before or not self._blobs.is_stray(work.connection, blob_file):
                            continue
                        if not dry_run:
                            self._blobs.remove_stray(blob_file)
                        count += 1
                        size += blob_file.size
        return count, size


def _total(needed: list[NeededBlob]) -> int:
    return sum(blob.stored_size for blob in needed)


def _sized_batches(candidates: list[tuple[str, int]]) -> Iterator[list[tuple[str, int]]]:
    batch: list[tuple[str, int]] = []
    size = 0
    for candidate in candidates:
        if batch and (len(batch) == ROWS_PER_TRANSACTION or size + candidate[1] > _BATCH_BYTES):
            yield batch
            batch, size = [], 0
        batch.append(candidate)
        size += candidate[1]
    if batch:
        yield batch


def _batches(items: Iterator[Any], size: int = ROWS_PER_TRANSACTION) -> Iterator[list[Any]]:
    batch: list[Any] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch
