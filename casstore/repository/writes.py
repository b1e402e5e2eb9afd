"""The `Repository`'s writer: the parts of one result stored and recorded together, or none."""

import random
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from casstore.blobs.catalog import LearnedFrameRefused
from casstore.blobs.encoder import StagedBlob
from casstore.blobs.hints import LAST_SEEN_RESOLUTION
from casstore.disk import file_in_the_way
from casstore.errors import CasStoreError, StorageError
from casstore.index import writes as index
from casstore.index.prepared import PreparedWrite
from casstore.index.work import UnitOfWork, ago
from casstore.index.writes import ArchiveRecord, CompactionRecord, OffloadRecord
from casstore.repository.core import RepositoryCore, StoredWriteRecorder
from casstore.repository.indexing import SearchIndexing
from casstore.repository.learned import Learning

_SEEN_AGO = ago(LAST_SEEN_RESOLUTION)
# How often a write transaction the engine rolled back to break a deadlock is tried, in all.
_CONFLICT_ATTEMPTS = 8


class Writer:
    """
    Storing results and recording offloads and compactions. With the search index on, a write leaves its text for the
    search index's upkeep to index after the commit (`SearchIndexing.index_written_texts`).
    """

    def __init__(self, core: RepositoryCore, *, learning: Learning, indexing: SearchIndexing) -> None:
        self._core = core
        self._database = core.database
        self._blobs = core.blobs
        self._guard = core.guard
        self._learning = learning
        self._indexing = indexing
        self._search_index_writes = core.search_index_writes
        # Engine primitives where a round trip costs more than a statement (PostgreSQL); the local SQLite index has
        # none and keeps its statements. A stored-writes statement trusts blob rows, so it needs a backend whose rows
        # imply presence.
        # With the search index on, a write also records its pending row: the one-statement write has no room for it.
        recorder: StoredWriteRecorder | None = getattr(core.database, "record_stored_write", None)
        fast = self._blobs.rows_imply_presence and not self._search_index_writes
        self._record_stored_write = recorder if fast else None
        # A lazy index (the local one) is created by the first write, before its first blob file: a first write that
        # fails then leaves at most an empty index, never blob files in a folder without one.
        self._create_index: Callable[[], None] | None = getattr(core.database, "create", None)

    def store(self, *, namespace: str, writes: Sequence[PreparedWrite]) -> None:
        """
        Store prepared writes (the parts of one tool result) together and record them: all of them, or none.

        :raises StorageError: If any part could not be stored (disk full, file size limit, I/O error); then none of
            them is recorded, and at most a blob file no row points at is left (`gc` removes it).
        :raises StoreClosedError: If the repository is closed.
        """
        # Refused before any blob file is written: on read-only media that would fail only halfway.
        self._core.refuse_if_read_only("it cannot be written")
        try:
            with self._guard.held():
                create_index = self._create_index
                if create_index is not None:
                    create_index()
                    self._create_index = None  # an index, once there, stays: no later write needs to ask
                core = self._core
                if not core.scope_settled:
                    core.settle_scope()
                # Every part was hashed for this namespace under its scope (a digest keyed otherwise names no blob of
                # it): the namespace under `namespace` scope, whose scope alone has a secret; None under `store`.
                keyed_for = None if core.scope.secret is None else namespace
                for write in writes:
                    if write.keyed_for != keyed_for:
                        raise _wrong_key(write, namespace, core.scope.name)
                self._store(namespace, writes)
                if self._blobs.learner is not None:
                    self._learning.train_if_due(namespace)
                if self._search_index_writes and self._indexing.written_texts_due:
                    self._indexing.index_written_texts()
        except CasStoreError:
            raise
        except self._core.failures as error:
            size = sum(len(write.data) for write in writes)
            in_the_way = (
                file_in_the_way(Path(self._core.description))
                if isinstance(error, (FileExistsError, NotADirectoryError))
                else None
            )
            if in_the_way is not None:
                root = self._core.description
                where = "a file" if in_the_way == Path(root) else f"under the file {in_the_way}"
                raise StorageError(
                    f"Could not store {len(writes)} result part(s) ({size} bytes): the store's root {root} is {where}, "
                    f"not a folder. Choose a folder (or a path that does not exist yet) for the store's root."
                ) from error
            where = (
                f"the {self._database.kind} at {self._database.description} failed"
                if isinstance(error, self._database.failures)
                else f"the store at {self._core.description} failed"
            )
            raise StorageError(
                f"Could not store {len(writes)} result part(s) ({size} bytes): {where}: {error}. Nothing of this write "
                f"was recorded; fix what failed ({self._database.failure_causes}), then write again."
            ) from error

    def _store(self, namespace: str, writes: Sequence[PreparedWrite]) -> None:
        # One transaction records every part. New content is compressed (and a large blob's file written) before it,
        # so the write lock is held only for row operations. If a part's blob turns out to be missing under the lock
        # (gc took it meanwhile), the transaction is rolled back and goes again with that part staged. An engine that
        # records a one-part write in one statement (PostgreSQL) takes the other way, `_store_one`.
        # On PostgreSQL, writers on several hosts run at once: rows are locked in digest order, and a transaction
        # PostgreSQL chose to break a deadlock (or a serialization conflict) with is rolled back and run again.
        conflicts = 0
        while True:
            try:
                if self._record_stored_write is not None and len(writes) == 1:
                    self._store_one(namespace, writes[0])
                else:
                    self._store_parts(namespace, writes)
            except self._database.conflicts:
                conflicts += 1
                if conflicts >= _CONFLICT_ATTEMPTS:
                    raise
                time.sleep(random.uniform(0, 0.01 * 2**conflicts))  # so the two sides do not meet again at once
                continue
            return

    def _store_parts(self, namespace: str, writes: Sequence[PreparedWrite]) -> None:
        staged = self._stage_unknown(writes)
        while True:
            try:
                with self._database.transaction() as work:
                    self._record_parts(work, namespace, writes, staged)
            except _BlobsMissing as missing:
                data = {write.digest: write.data for write in writes}
                for digest in missing.digests:
                    staged[digest] = self._blobs.stage(digest, data[digest], namespace=writes[0].keyed_for)
                continue
            except LearnedFrameRefused as refused:
                data = {write.digest: write.data for write in writes}
                staged[refused.digest] = self._blobs.stage(
                    refused.digest, data[refused.digest], plain=True, namespace=writes[0].keyed_for
                )
                continue
            return

    def _store_one(self, namespace: str, write: PreparedWrite) -> None:
        # With an engine that records a stored blob's write in one statement (PostgreSQL): that statement is tried
        # first, whatever the hints say. It takes the writers' lock and records nothing unless the blob's row is
        # there, so it also answers whether the content is new, at no look-up of its own.
        assert self._record_stored_write is not None
        if self._record_stored_write(
            namespace=namespace,
            key=write.key,
            digest=write.digest,
            kind="text" if write.is_text else "binary",
            size=len(write.data),
            reference=write.reference,
            seen_ago=_SEEN_AGO,
        ):
            return
        # New content (or collected meanwhile). Its blob is staged inside the transaction, under the writers' lock
        # (which only gc's exclusive one excludes): every removal of an object happens under gc's lock, so the object
        # written or found here stays until the commit, and `put` needs not look at it again.
        plain = False
        while True:
            try:
                with self._database.transaction() as work:
                    staged = self._blobs.stage(
                        write.digest, write.data, key=write.key, plain=plain, namespace=write.keyed_for
                    )
                    self._record_parts(work, namespace, [write], {write.digest: staged}, stored_under_lock=True)
            except LearnedFrameRefused:
                plain = True
                continue
            return

    def _stage_unknown(self, writes: Sequence[PreparedWrite]) -> dict[str, StagedBlob]:
        # Which parts are new is asked without the lock, and not at all for content this repository stored or found
        # lately; the transaction settles it either way.
        known = self._blobs.known
        unknown = []
        for write in writes:  # a loop, not a comprehension (a call of its own): this is every write's path
            if not known(write.digest):
                unknown.append(write)
        if not unknown:
            return {}
        with self._database.reading() as connection:
            new = {write.digest: write for write in unknown if self._blobs.needs_storing(connection, write.digest)}
        return {
            digest: self._blobs.stage(digest, write.data, key=write.key, namespace=write.keyed_for)
            for digest, write in new.items()
        }

    def _record_parts(
        self,
        work: UnitOfWork,
        namespace: str,
        writes: Sequence[PreparedWrite],
        staged: dict[str, StagedBlob],
        *,
        stored_under_lock: bool = False,
    ) -> None:
        # A part whose reference was visible already needs no look-up of its blob: the statement that found the
        # reference found it through the blob's row, in this transaction (see `index.record_write`). It still looks
        # when `last_seen` is due for a refresh, or the blob lives in a file whose presence only a look-up checks.
        if staged:
            for digest in sorted(staged):
                self._blobs.put(work, staged[digest], stored_under_lock=stored_under_lock)
        to_confirm = []
        unrecorded = set()
        needs_confirmation = self._blobs.needs_confirmation
        for write in writes:
            digest = write.digest
            # A write names its blob by id: without the blob's row nothing is recorded, and the transaction goes
            # again with the blob staged.
            if not index.record_write(work, namespace, write):
                unrecorded.add(digest)
                continue
            if self._search_index_writes:
                self._indexing.leave_for_indexing(work, namespace, write)
            if digest not in staged and needs_confirmation(digest):
                to_confirm.append(digest)
        if to_confirm or unrecorded:
            missing = {digest for digest in set(to_confirm) if not self._blobs.confirm(work, digest)}
            if missing or unrecorded:
                raise _BlobsMissing(sorted(missing | unrecorded))

    def record_offloads(self, *, namespace: str, compaction_id: str, offloads: Sequence[OffloadRecord]) -> None:
        """Append a compaction's offloads to the `offloads` table, in one transaction."""
        with self._guard.held(), self._database.transaction() as work:
            index.record_offloads(work, namespace=namespace, compaction_id=compaction_id, offloads=offloads)

    def record_compaction(
        self,
        *,
        namespace: str,
        compaction_id: str,
        compaction: CompactionRecord,
        offloads: Sequence[OffloadRecord] = (),
    ) -> None:
        """
        Append a compaction to the `compactions` table and its offloads to `offloads`, in one transaction. A compaction
        that offloaded nothing is recorded only in an index that exists: it never creates a store (only a write does,
        as Haystack's own store makes its folder on the first write).
        """
        if not offloads and not getattr(self._database, "exists", True):
            return
        with self._guard.held(), self._database.transaction() as work:
            index.record_compaction(work, namespace=namespace, compaction_id=compaction_id, compaction=compaction)
            if offloads:
                index.record_offloads(work, namespace=namespace, compaction_id=compaction_id, offloads=offloads)

    def record_archive(
        self, *, namespace: str, compaction_id: str, compaction: CompactionRecord, archive: ArchiveRecord
    ) -> None:
        """Append a compaction to the `compactions` table and the transcript it archived to `archives`, together."""
        with self._guard.held(), self._database.transaction() as work:
            index.record_compaction(work, namespace=namespace, compaction_id=compaction_id, compaction=compaction)
            index.record_archive(work, namespace=namespace, compaction_id=compaction_id, archive=archive)


def _wrong_key(write: PreparedWrite, namespace: str, scope: str) -> ValueError:
    hashed = "for no namespace" if write.keyed_for is None else f"for namespace {write.keyed_for!r}"
    return ValueError(
        f"The prepared write {write.reference} was hashed {hashed}, but is written in namespace {namespace!r} of a "
        f"store whose dedup scope is {scope!r}: prepare it again with this store's `prepare_write`, then write it."
    )


class _BlobsMissing(Exception):
    """Raised inside a write transaction, to roll it back: these parts' blobs must be staged (gc took them)."""

    def __init__(self, digests: list[str]) -> None:
        super().__init__(digests)
        self.digests = digests
