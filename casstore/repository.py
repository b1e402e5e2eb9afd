"""
`Repository`: the one object that owns a store's index and blob layer, and the only one that touches either.

The Haystack store, maintenance (`verify`, `gc`) and history (`stats`, `log`) are its clients: they ask typed
questions and get typed answers, and never hold a connection or a blob path. Every transaction is a `UnitOfWork`
that publishes what it learned only once it commits.

Layers, top to bottom (each imports only those below it):

    store.py (Haystack's ToolResultStore)   maintenance.py   history.py
                         \\                        |              /
                          repository.py (this module: transactions, the write and read protocols)
                         /                 |                \\
        index.py, index_queries.py     blobs.py (catalog rows,      guard.py
        (writes, visibility,           hints, locate/load)
         offloads, history)           /          |
                                 frames.py   blob_files.py
                         \\           |
                          database.py (SQLite connection, units of work, migrations)
"""

import dataclasses
import logging
import random
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol

from casstore import index, index_queries, report_queries, search_index
from casstore.blob_files import BlobDirectory
from casstore.blob_hints import LAST_SEEN_RESOLUTION
from casstore.blobs import BlobBackend, BlobStore, LearnedFrameRefused, StagedBlob, WaitingBlobs
from casstore.database import Database, UnitOfWork, ago
from casstore.disk import local_footprint
from casstore.errors import CasStoreError, CorruptBlobError, ReferenceNotFoundError, StorageError
from casstore.frames import FrameCodec, content_digest
from casstore.guard import OpenGuard
from casstore.index import CompactionRecord, OffloadRecord
from casstore.index_queries import CompactionRow, HistoryMark, NeededBlob, OffloadEntry, OffloadRow, WriteRow
from casstore.learning import Learner, TrainingJob, learner_for
from casstore.prepared import PreparedWrite
from casstore.references import parse_reference
from casstore.report_queries import ReportFigures, ResultRow, Scope
from casstore.search_index import MIN_TERM_CHARS, IndexedEntry, searchable_text
from casstore.searching import SearchHit, SearchOutcome, rank_candidates, read_order, score

__all__ = [
    "MIN_TERM_CHARS",
    "BlobCheck",
    "Collection",
    "CollectionPreview",
    "CompactionRow",
    "HasRepository",
    "IntegritySnapshot",
    "OffloadEntry",
    "OffloadRow",
    "ReportFigures",
    "Repository",
    "ResultRow",
    "SearchCheck",
    "SearchHit",
    "SearchOutcome",
    "WaitingBlobs",
    "WriteRow",
]

_logger = logging.getLogger(__name__)
_SEEN_AGO = ago(LAST_SEEN_RESOLUTION)
INDEX_FILE_NAME = "index.db"
BLOB_DIRECTORY_NAME = "blobs"
# Rows deleted per transaction by gc, so writers never wait long for the write lock.
_BATCH = 500
# Stored bytes deleted per transaction at most (a blob kept in the index frees its pages inside that transaction).
_BATCH_BYTES = 4 * 2**20
# A search reads every candidate when there are at most this many; otherwise this many per hit asked for, and at
# least the second figure, best placed first.
_READ_ALL_CANDIDATES = 100
_READ_PER_HIT = 3
_READ_AT_LEAST = 30
# The bytes of candidates one search reads at most (past the first): a few huge results would cost more than the rest.
_READ_BYTES = 16 * 1024 * 1024
# How often a write transaction the engine rolled back to break a deadlock is tried, in all.
_CONFLICT_ATTEMPTS = 8
# gc's passes over collectable blobs: a base or dictionary becomes collectable once the blobs that need it are gone,
# so each pass may free the next link of a chain (whose length the learner bounds).
_COLLECTION_PASSES = 10


@dataclass(frozen=True, slots=True)
class IntegritySnapshot:
    """What `verify` starts from, read in one consistent state of the index."""

    digests: list[str]
    dangling_writes: list[tuple[str, str]]
    unreferenced: set[str]


@dataclass(frozen=True, slots=True)
class BlobCheck:
    """One blob re-read and re-hashed: `ok`, `corrupt` (with `message`), `missing`, or `collected` meanwhile."""

    status: str
    message: str = ""


@dataclass(frozen=True, slots=True)
class Collection:
    """
    What a collection removed, or with a dry run would remove. With a size limit (`max_size`), also the stored
    bytes of the blobs the writes in scope needed before it, and the digests the forgotten writes referenced.
    """

    writes_forgotten: int = 0
    offloads_forgotten: int = 0
    blobs_deleted: int = 0
    blob_bytes_freed: int = 0
    needed_bytes_before: int | None = None
    released: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class CollectionPreview:
    """
    What a collection would do now, found in a transaction that is rolled back.

    `index_bytes_after` estimates what the index takes once the space of what it deletes is given back (None: the
    engine does not give it back, as PostgreSQL's, whose size stays); `outside_bytes_freed` is the stored bytes of
    the deleted blobs kept outside the index; `waiting` the blobs the grace period would keep, and
    `released_waiting` those of them the forgotten writes referenced; `needed_bytes_after` (with `max_size`) the
    stored bytes of the blobs the writes in scope would still need.
    """

    collection: Collection
    index_bytes_after: int | None
    outside_bytes_freed: int
    waiting: WaitingBlobs
    released_waiting: WaitingBlobs
    needed_bytes_after: int | None


@dataclass(frozen=True, slots=True)
class SearchCheck:
    """
    The search index checked against the blobs: `documents` checked; documents whose blob row is gone
    (`without_blob`) or whose trigrams do not hold their blob's text (`mismatched`); rows of trigrams that belong to
    no document (`stray_rows`, left by gc removing a damaged blob's document). Any of these is repaired by
    `build_search_index(rebuild=True)`.
    """

    documents: int = 0
    without_blob: int = 0
    mismatched: int = 0
    stray_rows: int = 0
    stray_entries: int = 0

    @property
    def consistent(self) -> bool:
        """:returns: Whether every document matches its blob and nothing is left over."""
        return not (self.without_blob or self.mismatched or self.stray_rows or self.stray_entries)


class IndexDatabase(Protocol):
    """The engine under the index: SQLite (`casstore.database.Database`) or PostgreSQL (`casstore.postgres`)."""

    failures: tuple[type[Exception], ...]
    damage: tuple[type[Exception], ...]
    conflicts: tuple[type[Exception], ...]
    kind: str
    description: str

    def reading(self) -> AbstractContextManager[Any]: ...
    def snapshot(self) -> AbstractContextManager[Any]: ...
    def transaction(self, *, exclusive: bool = False) -> AbstractContextManager[UnitOfWork]: ...
    def rolled_back(self) -> AbstractContextManager[UnitOfWork]: ...
    def close(self) -> None: ...

    # Giving the space of deleted rows back (see each engine).
    def space_policy(self, *, rebuilt: bool) -> str: ...
    def yield_to_writers(self, held: float) -> None: ...
    def estimated_bytes(self, work: UnitOfWork, *, rebuilt: bool) -> int | None: ...
    def return_free_space(self) -> bool: ...
    def rebuild(self) -> None: ...


class StoredWriteRecorder(Protocol):
    """
    An engine's faster primitive for a write of one part whose blob is stored: the whole write transaction (the
    writers' lock, the blob row checked and its `last_seen` refreshed, the write and its visibility) in one statement.
    :returns: Whether it was recorded (False: the blob has no row, and nothing was written).
    """

    def __call__(
        self, *, namespace: str, key: str, digest: str, kind: str, size: int, reference: str, seen_ago: str
    ) -> bool: ...


class Repository:
    """A store's index and its blobs: frames kept in the index, and a blob backend (a folder or an object store)."""

    def __init__(
        self,
        *,
        database: IndexDatabase,
        blob_backend: BlobBackend,
        compression_level: int,
        inline_max: int,
        footprint: Callable[[], tuple[int, int]],
        description: str,
        learn: bool = True,
        searchable: bool = False,
        search_index_writes: bool = False,
    ) -> None:
        """
        Join an opened index and blob backend; the repository owns them from now on and closes them.

        :param database: The index, its schema up to date.
        :param blob_backend: Where blobs too large for the index are kept.
        :param compression_level: The zstd level for new blobs, 1 to 22.
        :param inline_max: Frames of at most this many bytes are kept in the index; `0` puts every blob in the backend.
        :param footprint: Returns the bytes the index and the blob backend occupy where they are kept.
        :param description: Where the repository is, for messages (no password).
        :param learn: Store new content with the learned encodings (trained dictionaries, deltas against earlier
            versions); False stores plain zstd frames. Blobs stored either way are read either way.
        :param searchable: The index has the search index's tables (`casstore.search_index`: SQLite's).
        :param search_index_writes: Index the text of every write as it is stored, and turn the search index on.
        """
        self._database = database
        self._searchable = searchable
        self._search_index_writes = searchable and search_index_writes
        self._guard = OpenGuard()
        self._footprint = footprint
        self.description = description
        self._failures: tuple[type[Exception], ...] = (OSError, *database.failures)
        self._blobs = BlobStore(
            files=blob_backend,
            codec=FrameCodec(compression_level=compression_level),
            inline_max=inline_max,
            file_access=self._guard,
            reading=self._index_for_blobs,
            learner=learner_for(description) if learn else None,
        )
        # Engine primitives where a round trip costs more than a statement (PostgreSQL); the local SQLite index has
        # none and keeps its statements. A stored-writes statement trusts blob rows, so it needs a backend whose rows
        # imply presence.
        recorder: StoredWriteRecorder | None = getattr(database, "record_stored_write", None)
        self._record_stored_write = recorder if self._blobs.rows_imply_presence else None
        # A lazy index (the local one) is created by the first write, before its first blob file: a first write that
        # fails then leaves at most an empty index, never blob files in a folder without one.
        self._create_index: Callable[[], None] | None = getattr(database, "create", None)
        if self._search_index_writes:
            self._enable_search_index()

    @classmethod
    def local(
        cls,
        root: Path,
        *,
        compression_level: int,
        inline_max: int,
        durable: bool,
        learn: bool = True,
        lazy: bool = True,
        search_index: bool = False,
    ) -> "Repository":
        """
        Open the local repository at `root` (`index.db` and `blobs/`), bringing an existing index's schema up to date.

        :param durable: Fsync blob files and use SQLite's `synchronous=FULL`.
        :param lazy: Create nothing on disk until the first write (the default): a repository never written to
            leaves no folder, no `index.db` and no `blobs/` behind, and reads it as an empty store. False creates
            `root`, `index.db` and `blobs/` now.
        :param search_index: Index the text of every write as it is stored (`casstore.search_index`).
        :raises SchemaError: If `index.db` exists and was written by a newer casstore or is not a casstore index
            (`IndexDamagedError` if SQLite finds it damaged).
        :raises CasStoreError: If the blob folder is a symlink or not a folder.
        """
        database = Database(root / INDEX_FILE_NAME, durable=durable, lazy=lazy)
        try:
            files = BlobDirectory(root / BLOB_DIRECTORY_NAME, durable=durable, lazy=lazy)
        except BaseException:
            database.close()
            raise
        return cls(
            database=database,
            blob_backend=files,
            compression_level=compression_level,
            inline_max=inline_max,
            footprint=partial(local_footprint, root),
            description=str(root),
            learn=learn,
            searchable=True,
            search_index_writes=search_index,
        )

    @contextmanager
    def _index(self) -> Iterator[Any]:
        """The connection for one question, a failure of the engine reported as `StorageError` naming it."""
        try:
            with self._database.reading() as connection:
                yield connection
        except self._database.failures as error:
            if isinstance(error, self._database.damage):
                raise
            raise self._engine_failed(error) from error

    @contextmanager
    def _index_for_blobs(self) -> Iterator[Any]:
        """
        The connection for the blob layer's own questions (the blob a learned frame needs), the engine's failures as
        `StorageError` and a damaged index as `CorruptBlobError`, which is what they are to a read.
        """
        try:
            with self._database.reading() as connection:
                yield connection
        except self._database.failures as error:
            if isinstance(error, self._database.damage):
                raise CorruptBlobError(
                    f"Cannot look up a blob: the index is damaged ({error}). See 'Recovery' in the README."
                ) from error
            raise self._engine_failed(error) from error

    def _engine_failed(self, error: Exception) -> StorageError:
        return StorageError(f"The {self._database.kind} at {self._database.description} failed: {error}")

    # Writing.

    def store(self, *, namespace: str, writes: Sequence[PreparedWrite]) -> None:
        """
        Store prepared writes (the parts of one tool result) together and record them: all of them, or none.

        :raises StorageError: If any part could not be stored (disk full, file size limit, I/O error); then none of
            them is recorded, and at most a blob file no row points at is left (`gc` removes it).
        :raises StoreClosedError: If the repository is closed.
        """
        try:
            with self._guard.held():
                create_index = self._create_index
                if create_index is not None:
                    create_index()
                    self._create_index = None  # an index, once there, stays: no later write needs to ask
                self._store(namespace, writes)
                if self._blobs.learner is not None:
                    self._train_if_due()
        except CasStoreError:
            raise
        except self._failures as error:
            size = sum(len(write.data) for write in writes)
            where = (
                f"the {self._database.kind} at {self._database.description} failed"
                if isinstance(error, self._database.failures)
                else f"the store at {self.description} failed"
            )
            raise StorageError(
                f"Could not store {len(writes)} result part(s) ({size} bytes): {where}: {error}. Nothing of this write "
                f"was recorded; fix what failed (free space, start the server), then write again."
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
                    staged[digest] = self._blobs.stage(digest, data[digest])
                continue
            except LearnedFrameRefused as refused:
                data = {write.digest: write.data for write in writes}
                staged[refused.digest] = self._blobs.stage(refused.digest, data[refused.digest], plain=True)
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
                    staged = self._blobs.stage(write.digest, write.data, key=write.key, plain=plain)
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
            new = {write.digest: write for write in unknown if not self._blobs.exists(connection, write.digest)}
        return {digest: self._blobs.stage(digest, write.data, key=write.key) for digest, write in new.items()}

    def _train_if_due(self) -> None:
        # After a write has committed, in the writer, outside any transaction: a dictionary due for a tool is trained
        # on the samples the learner kept (bounded, tens of milliseconds) and stored. Nothing is re-encoded: writes
        # after it use it. A failure here loses nothing and fails no write; it is logged, and plain frames go on.
        learner = self._blobs.learner
        assert learner is not None
        job = learner.due()
        if job is None:
            return
        failures: tuple[type[Exception], ...] = (CasStoreError, *self._failures)
        try:
            self._train(learner, job)
        except failures as error:
            _logger.warning(
                "casstore could not store a dictionary for %r (%s); writes go on without it", job.tool, error
            )

    def _train(self, learner: Learner, job: TrainingJob) -> None:
        with self._index() as connection:
            active = self._blobs.active_dictionary(connection, job.tool)
        if active is not None and active[0] != job.current and active[1] >= job.samples:
            learner.adopt(job.tool, active[0], samples=active[1])  # another process trained one meanwhile
            return
        current = self._blobs.dictionary(active[0]) if active is not None else None
        content = learner.train(job, None if current is None else current.zstd)
        if content is None:
            return
        digest = content_digest(content)
        staged = self._blobs.stage(digest, content)
        with self._database.transaction() as work:
            self._blobs.put(work, staged)
            self._blobs.record_dictionary(
                work, digest, tool=job.tool, samples=job.samples, sample_bytes=job.sample_bytes
            )
        learner.adopt(job.tool, digest, samples=job.samples)

    def _record_parts(
        self,
        work: UnitOfWork,
        namespace: str,
        writes: Sequence[PreparedWrite],
        staged: dict[str, StagedBlob],
        *,
        stored_under_lock: bool = False,
    ) -> None:
        # A part whose reference was visible already needs no look-up of its blob (see `index.record_write`), unless
        # its `last_seen` is due for a refresh or it lives in a file whose presence only a look-up checks.
        if staged:
            for digest in sorted(staged):
                self._blobs.put(work, staged[digest], stored_under_lock=stored_under_lock)
        to_confirm = []
        needs_confirmation = self._blobs.needs_confirmation
        for write in writes:
            was_visible = index.record_write(work, namespace, write)
            if self._search_index_writes:
                _index_text(work, namespace, write)
            digest = write.digest
            if digest in staged or (was_visible and not needs_confirmation(digest)):
                continue
            to_confirm.append(digest)
        if to_confirm:
            missing = [digest for digest in sorted(set(to_confirm)) if not self._blobs.confirm(work, digest)]
            if missing:
                raise _BlobsMissing(missing)

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

    # Reading.

    def read(self, *, namespace: str, digest: str, reference: str) -> bytes:
        """
        :returns: The verified content behind `reference`, if it is visible in `namespace`.
        :raises ReferenceNotFoundError: If it was not written in `namespace` (or was forgotten).
        :raises CorruptBlobError: If its blob is missing or damaged (`UnsafeBlobError` for a planted link).
        """
        try:
            return self._read_once(namespace, digest, reference)
        except CorruptBlobError as error:
            if not error.missing:
                raise
        # The blob vanished after the look-up: a concurrent `gc` may have collected it after its reference was
        # forgotten, and a writer may have stored the same content again since. Looked at once more under the
        # index's write lock, the only lock under which blobs are deleted, what is found is final.
        return self._read_locked(namespace, digest, reference)

    def _read_once(self, namespace: str, digest: str, reference: str) -> bytes:
        try:
            with self._database.reading() as connection:
                location = self._blobs.locate_readable(connection, digest, namespace, reference)
            if location is None:
                raise _not_found(namespace, reference)
        except self._database.damage as error:
            raise _damaged_index(digest, error) from error
        except self._database.failures as error:
            raise self._read_failed(digest, error) from error
        return self._blobs.load(location)

    def _read_locked(self, namespace: str, digest: str, reference: str) -> bytes:
        try:
            with self._guard.held(), self._database.rolled_back() as work:
                if not index.is_visible(work.connection, namespace=namespace, digest=digest, reference=reference):
                    raise _not_found(namespace, reference)
                return self._blobs.load(self._blobs.locate(work.connection, digest), guarded=False)
        except self._database.damage as error:
            raise _damaged_index(digest, error) from error
        except self._database.failures as error:
            raise self._read_failed(digest, error) from error

    def _read_failed(self, digest: str, error: Exception) -> StorageError:
        database = self._database
        return StorageError(
            f"Could not look up blob {digest}: the {database.kind} at {database.description} failed: {error}"
        )

    # History.

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
        """:returns: Offloads matching every filter given, newest first, at most `limit`."""
        with self._index() as connection:
            return index_queries.offload_entries(connection, namespace=namespace, tool=tool, since=since, limit=limit)

    def offload_count(
        self, *, namespace: str | None = None, tool: str | None = None, since: timedelta | None = None
    ) -> int:
        """:returns: How many offloads match every filter given."""
        with self._index() as connection:
            return index_queries.offload_count(connection, namespace=namespace, tool=tool, since=since)

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

    def history_mark(self) -> HistoryMark:
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
    ) -> ReportFigures:
        """
        :param namespace: Only this namespace's history (all namespaces when None).
        :param since: Only the history of this period before now (all history when None).
        :param series_limit: At most this many marks per series (compactions, savings, bytes); past it, time buckets.
        :param rows_limit: At most this many rows per ranking of results (the most repeated, the largest).
        :param namespace_limit: At most this many namespaces, the busiest first.
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
                )
        except self._database.failures as error:
            if isinstance(error, self._database.damage):
                raise
            raise self._engine_failed(error) from error

    def disk_bytes(self) -> int:
        """:returns: Bytes the repository occupies (for a local one: on disk as `du` counts them, index included)."""
        return sum(self.footprint())

    def footprint(self) -> tuple[int, int]:
        """
        :returns: Bytes the index and the blobs kept outside it occupy, apart: for a local repository `index.db` (with
            its write-ahead log) and the `blobs/` folder on disk; for a shared one, casstore's tables in PostgreSQL
            and the objects under the prefix.
        """
        return self._footprint()

    # Maintenance.

    def integrity_snapshot(self) -> IntegritySnapshot:
        """:returns: Every blob, the writes without a blob, and the unreferenced blobs, in one consistent read."""
        with self._guard.held(), self._database.snapshot() as connection:
            return IntegritySnapshot(
                digests=self._blobs.digests(connection),
                dangling_writes=index.dangling_writes(connection),
                unreferenced=set(index.unreferenced_digests(connection)),
            )

    def check_blob(self, digest: str) -> BlobCheck:
        """Re-read and re-hash one blob, as a read would. :returns: What was found."""
        with self._guard.held():
            try:
                with self._index() as connection:
                    location = self._blobs.locate(connection, digest)
                self._blobs.load(location, guarded=False, fresh=True)
            except CorruptBlobError as error:
                if not error.missing:
                    return BlobCheck("corrupt", str(error))
                with self._index() as connection:
                    if not self._blobs.exists(connection, digest):
                        return BlobCheck("collected")  # a concurrent gc deleted it after the list was taken
                return BlobCheck("missing", str(error))
        return BlobCheck("ok")

    def blob_dependencies(self, digests: Iterable[str]) -> set[str]:
        """
        :param digests: Blobs by digest.
        :returns: Every blob those need to be read (a trained dictionary, a delta's base, and what those need in turn),
            which gc must keep while any of `digests` is kept; `digests` themselves only where one needs another.
        """
        with self._index() as connection:
            return self._blobs.dependencies(connection, digests)

    def encoding_counts(self) -> dict[str, int]:
        """:returns: How many blobs are stored `plain`, with a `dictionary`, as a `delta`; and how many dictionaries."""
        with self._index() as connection:
            return self._blobs.encodings(connection)

    def learning_figures(self) -> dict[str, float]:
        """:returns: How often this repository object trained a dictionary, and the seconds it took in all."""
        learner = self._blobs.learner
        if learner is None:
            return {"trainings": 0.0, "training_seconds": 0.0}
        return {"trainings": float(learner.trainings), "training_seconds": learner.training_seconds}

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
            index_after = self._database.estimated_bytes(work, rebuilt=rebuild)
        return CollectionPreview(
            collection=dataclasses.replace(
                forgotten, blobs_deleted=len(collectable), blob_bytes_freed=sum(size for _, size in collectable)
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
        if writes and self._searchable:
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
                raise self._engine_failed(error) from error

    def rebuild_index(self) -> None:
        """
        Rebuild the index: SQLite's full `VACUUM` (which also converts an index made before `auto_vacuum` was set,
        holding writers off until it ends), PostgreSQL's `VACUUM (ANALYZE)` of casstore's tables (beside writers).
        """
        with self._guard.held():
            try:
                self._database.rebuild()
            except self._database.failures as error:
                raise self._engine_failed(error) from error

    def delete_collectable_blobs(self, *, grace: timedelta) -> Collection:
        """
        Delete every blob no reference is visible for and not seen within `grace`.

        Candidates come from one scan without the write lock; each is checked again under the lock, in batches of at
        most `_BATCH` blobs and `_BATCH_BYTES` stored bytes, with a pause for writers after each, so a writer waits
        for about one batch of deletions, however large the store.
        """
        deleted = freed = 0
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
                            indexed, text = self._indexed_text(work, digest)
                            if self._blobs.delete_if_collectable(work, digest, grace=grace):
                                if indexed:
                                    search_index.remove(work, digest=digest, text=text)
                                deleted += 1
                                freed += stored_size
                    self._database.yield_to_writers(time.perf_counter() - started)
                if deleted == before:
                    break
        return Collection(blobs_deleted=deleted, blob_bytes_freed=freed)

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

    # Copying from another repository (`casstore.copying`).

    def blob_seen_times(self) -> dict[str, tuple[str, str]]:
        """:returns: Every blob's digest with its `(first_seen, last_seen)`."""
        with self._index() as connection:
            return self._blobs.seen_times(connection)

    def blob_content(self, digest: str) -> bytes:
        """
        :returns: The verified content of the blob `digest`, whoever references it.
        :raises CorruptBlobError: If the blob is missing or damaged.
        """
        with self._guard.held():
            with self._index() as connection:
                location = self._blobs.locate(connection, digest)
            return self._blobs.load(location, guarded=False)

    def import_blob(self, digest: str, data: bytes, *, seen: tuple[str, str]) -> None:
        """Store a blob copied from another store (`data` already verified against `digest`), keeping its times."""
        with self._guard.held():
            staged = self._blobs.stage(digest, data)
            with self._database.transaction() as work:
                self._blobs.put(work, staged, seen=seen)

    def write_rows(self) -> "Counter[WriteRow]":
        """:returns: How many writes there are of each `(namespace, key, digest, kind, size, reference, written_at)`."""
        with self._index() as connection:
            return index_queries.write_rows(connection)

    def offload_rows(self) -> "Counter[OffloadRow]":
        """:returns: How many offloads there are of each row's values."""
        with self._index() as connection:
            return index_queries.offload_rows(connection)

    def compaction_rows(self) -> dict[str, CompactionRow]:
        """:returns: Every compaction's `(compaction_id, namespace, tokens_before, tokens_after, target_tokens,
        context_window, compacted_at)`, by id."""
        with self._index() as connection:
            return index_queries.compaction_rows(connection)

    def import_writes(self, rows: Sequence[WriteRow]) -> None:
        """
        Append writes copied from another store, with their own times, in one transaction.

        :raises CorruptBlobError: If a write's blob is not stored here (copy the blobs first); nothing is appended.
        """
        with self._guard.held(), self._database.transaction() as work:
            for digest in sorted({row[2] for row in rows}):
                if not self._blobs.is_stored(work, digest):
                    raise CorruptBlobError(
                        f"Blob {digest} is not stored here; copy it before its writes.", digest=digest
                    )
            index.import_writes(work, rows)

    def import_offloads(self, rows: Sequence[OffloadRow]) -> None:
        """Append offloads copied from another store, with their own times, in one transaction."""
        with self._guard.held(), self._database.transaction() as work:
            index.import_offloads(work, rows)

    def import_compactions(self, rows: Sequence[CompactionRow]) -> None:
        """Append compactions copied from another store, with their own times, in one transaction (ids held already
        are skipped)."""
        with self._guard.held(), self._database.transaction() as work:
            index.import_compactions(work, rows)

    # Searching (`casstore.search_index`).

    @property
    def searchable(self) -> bool:
        """Whether this repository's index can hold a search index (the local SQLite one can)."""
        return self._searchable

    def _enable_search_index(self) -> None:
        with self._guard.held():
            with self._index() as connection:
                if search_index.is_enabled(connection):
                    return
            with self._database.transaction() as work:
                search_index.enable(work)

    def search(
        self, *, namespace: str, terms: Sequence[str], tool_name: str | None, limit: int, seconds: float
    ) -> SearchOutcome:
        """
        Find the namespace's text results that hold any of `terms` (each a case-insensitive substring of at least
        `search_index.MIN_TERM_CHARS` characters), best first.

        Candidates come from the search index; each is read (and its digest checked, as any read) and kept only if a
        term is in it. Ranking uses only the namespace's own results.

        :param tool_name: Only results of this tool (see `search_index.tool_digests`).
        :param limit: At most this many hits.
        :param seconds: The search answers with what it has after about this long.
        :returns: The hits and what more there is; `enabled=False` if the store has no search index.
        """
        deadline = time.monotonic() + seconds
        with self._guard.held():
            if not self._searchable:
                return SearchOutcome(enabled=False)
            try:
                with self._index() as connection:
                    if not search_index.is_enabled(connection):
                        return SearchOutcome(enabled=False)
                    allowed = (
                        search_index.documents_of(
                            connection, search_index.tool_digests(connection, namespace=namespace, tool_name=tool_name)
                        )
                        if tool_name is not None
                        else None
                    )
                    candidates, statistics = search_index.candidates(
                        connection, namespace=namespace, terms=terms, deadline=deadline
                    )
            except search_index.SearchTimeout:
                return SearchOutcome(enabled=True, timed_out=True)
            if allowed is not None:
                candidates = [candidate for candidate in candidates if candidate.document in allowed]
            return self._read_candidates(
                namespace=namespace,
                terms=terms,
                tool_name=tool_name,
                ordered=read_order(candidates, statistics),
                statistics=statistics,
                limit=limit,
                deadline=deadline,
            )

    def _read_candidates(
        self,
        *,
        namespace: str,
        terms: Sequence[str],
        tool_name: str | None,
        ordered: list[search_index.Candidate],
        statistics: search_index.NamespaceStatistics,
        limit: int,
        deadline: float,
    ) -> SearchOutcome:
        # Every candidate is read when there are few; otherwise enough of the best-placed ones to rank the hits shown
        # among several times as many (more while fewer hits than asked for were found: a term whose trigrams are
        # common has many candidates that do not hold it), within a budget of bytes, and the rest are counted unread.
        # Every term is looked for in each text read, so the terms a hit holds are exact whatever the index handed over.
        budget = len(ordered) if len(ordered) <= _READ_ALL_CANDIDATES else max(_READ_PER_HIT * limit, _READ_AT_LEAST)
        folded = [term.lower() for term in terms]
        found: list[tuple[search_index.Candidate, str, dict[int, int]]] = []
        read = unreadable = bytes_read = 0
        timed_out = False
        for candidate in ordered:
            if read >= budget and len(found) >= limit:
                break  # past the budget, reading goes on only while too few hits were found (bounded by bytes)
            if time.monotonic() > deadline:
                timed_out = True
                break
            if read and bytes_read + candidate.size > _READ_BYTES:
                break
            read += 1
            bytes_read += candidate.size
            try:
                with self._index() as connection:
                    digest = search_index.digest_of(connection, candidate.document)
                    if digest is None:
                        continue  # collected meanwhile
                    location = self._blobs.locate(connection, digest)
                text = self._blobs.load(location, guarded=False).decode("utf-8", "replace")
            except CorruptBlobError:
                unreadable += 1
                continue
            lowered = text.lower()
            occurrences = {term: lowered.count(word) for term, word in enumerate(folded) if word in lowered}
            if occurrences:
                found.append((candidate, text, occurrences))
        with self._index() as connection:
            details = search_index.hit_details(
                connection, namespace=namespace, documents=[candidate.document for candidate, _, _ in found]
            )
        hits = []
        for candidate, text, occurrences in found:
            detail = details.get(candidate.document)
            if detail is None:
                continue  # forgotten meanwhile
            hit = SearchHit(
                reference=detail.reference,
                tool_name=detail.tool_name or tool_name,
                written_at=detail.written_at,
                size=candidate.size,
                text=text,
                terms=tuple(terms[term] for term in sorted(occurrences)),
                score=score(occurrences=occurrences, size=candidate.size, statistics=statistics),
            )
            hits.append((candidate, hit))
        shown, more = rank_candidates(hits, limit=limit)
        return SearchOutcome(
            enabled=True,
            hits=shown,
            more_hits=more,
            # Past the per-term bound, the candidates not handed over are counted too (a tool's filter saw them all).
            unread=(len(ordered) if tool_name is not None else max(len(ordered), statistics.most_candidates)) - read,
            unreadable=unreadable,
            timed_out=timed_out,
        )

    def build_search_index(
        self, *, rebuild: bool = False, progress: Callable[[int, int], None] | None = None
    ) -> tuple[int, int]:
        """
        Turn the search index on and index every stored result that has no document yet (all of them, with
        `rebuild`), in batches of one transaction each: a crash keeps what committed, and running it again goes on.

        :param rebuild: Remove every document first (after a `verify` that found the index inconsistent).
        :param progress: Called as `progress(done, total)` after each batch (`total` is what is left at the start).
        :returns: How many blobs were indexed, and how many were skipped (binary content that is not text, or
            unreadable).
        :raises CasStoreError: If this store's index has no search index (the shared store).
        """
        if not self._searchable:
            raise CasStoreError(
                f"The {self._database.kind} at {self._database.description} has no search index: only the local store "
                f"(ContentAddressedToolResultStore) has one."
            )
        indexed = skipped = 0
        with self._guard.held():
            with self._database.transaction() as work:
                search_index.enable(work)
                if rebuild:
                    search_index.clear(work)
            with self._index() as connection:
                total = len(search_index.unindexed_blobs(connection, after="", limit=-1))
            after = ""
            while True:
                with self._index() as connection:
                    batch = search_index.unindexed_blobs(connection, after=after, limit=_BATCH)
                if not batch:
                    break
                after = batch[-1][0]
                texts: list[tuple[str, str]] = []
                for digest, written_as_text in batch:
                    try:
                        with self._index() as connection:
                            location = self._blobs.locate(connection, digest)
                        text = searchable_text(self._blobs.load(location, guarded=False), is_text=written_as_text)
                    except CorruptBlobError:
                        text = None
                    if text is None:
                        skipped += 1
                    else:
                        texts.append((digest, text))
                with self._database.transaction() as work:
                    for digest, text in texts:
                        if search_index.add(work, digest=digest, text=text):
                            indexed += 1
                if progress is not None:
                    progress(indexed + skipped, total)
            with self._database.transaction() as work:
                search_index.add_missing_entries(work)
        return indexed, skipped

    def check_search_index(self) -> SearchCheck:
        """:returns: The search index checked against the blobs (each document's blob re-read); see `SearchCheck`."""
        if not self._searchable:
            return SearchCheck()
        with self._guard.held():
            with self._index() as connection:
                documents: list[IndexedEntry] = search_index.entries(connection)
                stray = search_index.stray_rows(connection)
                stray_entries = search_index.stray_entries(connection) + search_index.miscounted(connection)
            without_blob = mismatched = 0
            for entry in documents:
                if not entry.has_blob:
                    without_blob += 1
                    continue
                try:
                    with self._index() as connection:
                        location = self._blobs.locate(connection, entry.digest)
                    text = self._blobs.load(location, guarded=False).decode("utf-8", "replace")
                except CorruptBlobError:
                    continue  # verify reports the blob itself
                with self._index() as connection:
                    if not search_index.finds(connection, document=entry.document, text=text):
                        mismatched += 1
        return SearchCheck(
            documents=len(documents),
            without_blob=without_blob,
            mismatched=mismatched,
            stray_rows=stray,
            stray_entries=stray_entries,
        )

    def search_index_bytes(self) -> int:
        """:returns: Bytes the search index's tables take in the index (0 where there is none)."""
        if not self._searchable:
            return 0
        with self._index() as connection:
            return search_index.index_bytes(connection)

    def _indexed_text(self, work: UnitOfWork, digest: str) -> tuple[bool, str | None]:
        # What gc needs to remove a blob's document: whether there is one, and the text its trigrams came from.
        if not self._searchable or not search_index.is_indexed(work.connection, digest):
            return False, None
        try:
            data = self._blobs.load(self._blobs.locate(work.connection, digest), guarded=False)
        except CorruptBlobError:
            return True, None
        return True, data.decode("utf-8", "replace")

    # Lifetime.

    def close(self) -> None:
        """
        Close the index and the blob folder, after waiting for operations in flight in other threads.

        Later calls raise `StoreClosedError`; closing twice is harmless.
        """
        if self._guard.close():
            self._database.close()
            self._blobs.close()

    def __enter__(self) -> "Repository":
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()


class HasRepository(Protocol):
    """Anything built on a repository (a store), for functions that accept either."""

    @property
    def repository(self) -> Repository: ...


def repository_of(source: "Repository | HasRepository") -> Repository:
    """:returns: `source` itself if it is a repository, else the repository it is built on."""
    return source if isinstance(source, Repository) else source.repository


class _BlobsMissing(Exception):
    """Raised inside a write transaction, to roll it back: these parts' blobs must be staged (gc took them)."""

    def __init__(self, digests: list[str]) -> None:
        super().__init__(digests)
        self.digests = digests


def _not_found(namespace: str, reference: str) -> ReferenceNotFoundError:
    return ReferenceNotFoundError(
        f"No result {reference} in namespace {namespace!r}. References are only readable in the namespace that "
        f"wrote them."
    )


def _damaged_index(digest: str, error: Exception) -> CorruptBlobError:
    return CorruptBlobError(
        f"Cannot look up blob {digest}: the index is damaged ({error}). See 'Recovery' in casstore's docs/gc.md.",
        digest=digest,
    )


def _total(needed: list[NeededBlob]) -> int:
    return sum(blob.stored_size for blob in needed)


def _sized_batches(candidates: list[tuple[str, int]]) -> Iterator[list[tuple[str, int]]]:
    batch: list[tuple[str, int]] = []
    size = 0
    for candidate in candidates:
        if batch and (len(batch) == _BATCH or size + candidate[1] > _BATCH_BYTES):
            yield batch
            batch, size = [], 0
        batch.append(candidate)
        size += candidate[1]
    if batch:
        yield batch


def _index_text(work: UnitOfWork, namespace: str, write: PreparedWrite) -> None:
    """
    Index a write's text in its own transaction, if it is text (`search_index.add` once per blob), and record it as
    the namespace's first write of that blob (a repeat changes nothing).
    """
    if write.is_text:
        search_index.add_text_write(work, digest=write.digest, data=write.data)
    elif searchable_text(write.data, is_text=False) is not None:
        if not search_index.is_indexed(work.connection, write.digest):
            search_index.add(work, digest=write.digest, text=write.data.decode("utf-8"))
    else:
        return
    search_index.add_entry(work, namespace=namespace, digest=write.digest)


def _batches(items: Iterator[Any], size: int = _BATCH) -> Iterator[list[Any]]:
    batch: list[Any] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch
