"""
`Repository`: the one object that owns a store's index and blob layer, and the only one that touches either.

The Haystack stores, maintenance (`verify`, `gc`, `copy`) and history (`stats`, `log`, `report`) are its clients:
they ask typed questions and get typed answers, and never hold a connection or a blob path. Every transaction is a
`UnitOfWork` that publishes what it learned only once it commits.

Its public surface is a constructor for a local store (`local`), a few verbs (`store`, `read`, `record_offloads`,
`record_compaction`, `close`), what it is (`description`, `read_only` and `read_only_error`, `searchable`), and four
collaborators handed out by name:

    repository.history     what happened: stats, log and report figures, encodings, bytes on disk   (history.py)
    repository.search      searching results; building, checking and measuring the search index     (search.py)
    repository.retention   what verify checks, and what gc forgets, deletes and gives back           (retention.py)
    repository.copies      what `casstore copy` reads out of one store and imports into another      (copies.py)

It is composed, not inherited: `core.RepositoryCore` holds what is opened (the index's engine, the blob store, the
guard that lets `close` wait for operations in flight, the search index's text engine), and each collaborator
receives that one core in its constructor. The writer (writes.py, with learned.py training dictionaries after a
write) and the reader (reads.py) stay behind the verbs; the search index's upkeep (indexing.py) is shared by the
writer, the search and retention.

Layers, top to bottom (each imports only those below it):

    stores/ (Haystack's ToolResultStore)   maintenance/   history/
                         \\                    |           /
                          repository/ (this package)
                         /          |              \\
        index/ (engines, queries)   blobs/ (catalog, codec,    search/ (trigram index,
                                    files, objects)            ranking)
"""

from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import Protocol, Self

from casstore.blobs.backend import BlobBackend
from casstore.blobs.collection import WaitingBlobs
from casstore.blobs.files import BlobDirectory
from casstore.disk import local_footprint
from casstore.errors import ReadOnlyStoreError
from casstore.index.copy_rows import CompactionRow, OffloadRow, WriteRow
from casstore.index.database import Database
from casstore.index.prepared import PreparedWrite, prepare
from casstore.index.queries import OffloadEntry
from casstore.index.report_archives import ArchiveRow
from casstore.index.report_queries import ReportFigures
from casstore.index.report_writes import ResultRow
from casstore.index.scope import NAMESPACE, DedupScope, check_dedup_scope
from casstore.index.writes import ArchiveRecord, CompactionRecord, OffloadRecord
from casstore.repository.copies import Copies
from casstore.repository.core import (
    BLOB_DIRECTORY_NAME,
    INDEX_FILE_NAME,
    IndexDatabase,
    RepositoryCore,
    StoredWriteRecorder,
    local_scope,
)
from casstore.repository.findings import BlobCheck, Collection, CollectionPreview, IntegritySnapshot
from casstore.repository.history import History
from casstore.repository.indexing import SearchIndexing
from casstore.repository.learned import Learning
from casstore.repository.reads import Reader
from casstore.repository.retention import Retention
from casstore.repository.search import Search, SearchCheck
from casstore.repository.writes import Writer
from casstore.search import MIN_TERM_CHARS, SearchText
from casstore.search.results import SearchHit, SearchOutcome

__all__ = [
    "BLOB_DIRECTORY_NAME",
    "INDEX_FILE_NAME",
    "MIN_TERM_CHARS",
    "ArchiveRecord",
    "ArchiveRow",
    "BlobCheck",
    "Collection",
    "CollectionPreview",
    "CompactionRecord",
    "CompactionRow",
    "Copies",
    "HasRepository",
    "History",
    "IndexDatabase",
    "IntegritySnapshot",
    "OffloadEntry",
    "OffloadRecord",
    "OffloadRow",
    "PreparedWrite",
    "ReportFigures",
    "Repository",
    "ResultRow",
    "Retention",
    "Search",
    "SearchCheck",
    "SearchHit",
    "SearchOutcome",
    "StoredWriteRecorder",
    "WaitingBlobs",
    "WriteRow",
    "check_dedup_scope",
    "prepare",
    "repository_of",
]


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
        search_text: SearchText | None = None,
        dedup_scope: DedupScope | None = None,
        requested_scope: str | None = None,
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
        :param searchable: The index has the search index's tables (`casstore.search`).
        :param search_index_writes: Index the text of every write as it is stored (after its commit), and turn the
            search index on.
        :param search_text: The engine's search text (`casstore.search.postgres.TRIGRAM_TEXT` for PostgreSQL);
            SQLite's FTS5 by default.
        :param dedup_scope: The scope the index records (`casstore.index.scope.settle`); None: it records none yet
            (read when a write is first hashed, recorded by the first write).
        :param requested_scope: The scope a lazy store was opened with, before its index existed: recorded by its
            first write, or checked against what another process recorded meanwhile.
        :raises SearchUnavailableError: With `search_index_writes`, if the index's engine cannot hold a search index
            (a PostgreSQL server without `pg_trgm`).
        """
        core = RepositoryCore(
            database=database,
            blob_backend=blob_backend,
            compression_level=compression_level,
            inline_max=inline_max,
            footprint=footprint,
            description=description,
            learn=learn,
            searchable=searchable,
            search_index_writes=search_index_writes,
            search_text=search_text,
            dedup_scope=dedup_scope,
            requested_scope=requested_scope,
        )
        self._core = core
        self._indexing = SearchIndexing(core)
        self._writer = Writer(core, learning=Learning(core), indexing=self._indexing)
        self._reader = Reader(core)
        self._history = History(core)
        self._search = Search(core, indexing=self._indexing)
        self._retention = Retention(core, indexing=self._indexing)
        self._copies = Copies(core)
        if core.search_index_writes:
            try:
                self._indexing.enable()
            except BaseException:
                self.close()
                raise

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
        dedup_scope: str | None = None,
    ) -> Self:
        """
        Open the local repository at `root` (`index.db` and `blobs/`), bringing an existing index's schema up to date.

        :param durable: Fsync blob files and use SQLite's `synchronous=FULL`.
        :param lazy: Create nothing on disk until the first write (the default): a repository never written to
            leaves no folder, no `index.db` and no `blobs/` behind, and reads it as an empty store. False creates
            `root`, `index.db` and `blobs/` now.
        :param search_index: Index the text of every write as it is stored (`casstore.search`).
        :param dedup_scope: `store`, `namespace` or None (what the index records; `store` for a new store). A lazy
            store made with `namespace` scope is created now: its secret must exist before its first digest.
        :raises ValueError: If `dedup_scope` is unknown or not the scope the index records.
        :raises SchemaError: If `index.db` exists and was written by a newer casstore or is not a casstore index
            (`IndexDamagedError` if SQLite finds it damaged).
        :raises CasStoreError: If the blob folder is a symlink or not a folder.
        """
        database = Database(root / INDEX_FILE_NAME, durable=durable, lazy=lazy)
        try:
            if dedup_scope == NAMESPACE and not database.exists:
                database.create()
            scope = local_scope(database, dedup_scope)
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
            dedup_scope=scope,
            requested_scope=dedup_scope,
        )

    # The verbs.

    def store(self, *, namespace: str, writes: Sequence[PreparedWrite]) -> None:
        """
        Store prepared writes (the parts of one tool result) together and record them: all of them, or none.

        :raises StorageError: If any part could not be stored (disk full, file size limit, I/O error); then none of
            them is recorded, and at most a blob file no row points at is left (`gc` removes it).
        :raises StoreClosedError: If the repository is closed.
        """
        self._writer.store(namespace=namespace, writes=writes)

    def read(self, *, namespace: str, digest: str, reference: str) -> bytes:
        """
        :returns: The verified content behind `reference`, if it is visible in `namespace`.
        :raises ReferenceNotFoundError: If it was not written in `namespace` (or was forgotten).
        :raises CorruptBlobError: If its blob is missing or damaged (`UnsafeBlobError` for a planted link).
        """
        return self._reader.read(namespace=namespace, digest=digest, reference=reference)

    def record_offloads(self, *, namespace: str, compaction_id: str, offloads: Sequence[OffloadRecord]) -> None:
        """Append a compaction's offloads to the `offloads` table, in one transaction."""
        self._writer.record_offloads(namespace=namespace, compaction_id=compaction_id, offloads=offloads)

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
        that offloaded nothing is recorded only in an index that exists: it never creates a store.
        """
        self._writer.record_compaction(
            namespace=namespace, compaction_id=compaction_id, compaction=compaction, offloads=offloads
        )

    def record_archive(
        self, *, namespace: str, compaction_id: str, compaction: CompactionRecord, archive: ArchiveRecord
    ) -> None:
        """Append a compaction to the `compactions` table and the transcript it archived to `archives`, together."""
        self._writer.record_archive(
            namespace=namespace, compaction_id=compaction_id, compaction=compaction, archive=archive
        )

    def close(self) -> None:
        """
        Index what this process wrote and has not indexed yet, then close the index and the blob backend, after
        waiting for operations in flight in other threads. Later calls raise `StoreClosedError`; closing twice is
        harmless.
        """
        self._indexing.flush()
        self._core.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()

    # What it is.

    @property
    def description(self) -> str:
        """Where the repository is, for messages (no password)."""
        return self._core.description

    @property
    def read_only(self) -> bool:
        """Whether the index can only be read (a local store on read-only media, or that this process may not write)."""
        return self._core.read_only

    def read_only_error(self, what: str) -> ReadOnlyStoreError:
        """:returns: The error that says the repository is read-only, and `what` cannot be done for that."""
        return self._core.read_only_error(what)

    @property
    def dedup_scope(self) -> DedupScope:
        """
        The store's dedup scope (docs/dedup-scope.md): its `name`, `store` (content deduplicated across namespaces) or
        `namespace` (only within one), and `key_for(namespace)`, the key a namespace's digests are keyed with.
        """
        core = self._core
        return core.scope if core.scope_read else core.dedup_scope()

    @property
    def searchable(self) -> bool:
        """Whether this repository's index can hold a search index (both engines' can)."""
        return self._core.searchable

    # Its collaborators, by name.

    @property
    def history(self) -> History:
        """What happened (stats, log, report figures), the encodings stored, and the bytes the repository takes."""
        return self._history

    @property
    def search(self) -> Search:
        """Searching a namespace's results; building, checking and measuring the search index."""
        return self._search

    @property
    def retention(self) -> Retention:
        """What `verify` checks, and what `gc` forgets, deletes and gives back."""
        return self._retention

    @property
    def copies(self) -> Copies:
        """What `casstore copy` reads out of a store, and imports into another."""
        return self._copies


class HasRepository(Protocol):
    """Anything built on a repository (a store), for functions that accept either."""

    @property
    def repository(self) -> Repository: ...


def repository_of(source: "Repository | HasRepository") -> Repository:
    """:returns: `source` itself if it is a repository, else the repository it is built on."""
    return source if isinstance(source, Repository) else source.repository
