"""
The repository's core: the index and the blob layer it owns, opened and closed; the connection every question uses.

The other modules of `casstore.repository` add the protocols (writes, reads, history, search, retention, copies) to
this core, each as a part of the one `Repository` object.
"""

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol, Self

from casstore import search as search_index
from casstore.blobs.catalog import BlobBackend, BlobStore
from casstore.blobs.files import BlobDirectory
from casstore.blobs.frames import FrameCodec
from casstore.blobs.learning import learner_for
from casstore.disk import local_footprint
from casstore.errors import (
    CorruptBlobError,
    IndexDamagedError,
    ReadOnlyStoreError,
    ReferenceNotFoundError,
    StorageError,
)
from casstore.index import read_only
from casstore.index import scope as dedup_scopes
from casstore.index.database import Database, UnitOfWork
from casstore.index.scope import DedupScope
from casstore.repository.guard import OpenGuard

INDEX_FILE_NAME = "index.db"
BLOB_DIRECTORY_NAME = "blobs"
# Rows changed per transaction by gc and by the search index's build, so writers never wait long for the write lock.
ROWS_PER_TRANSACTION = 500


class IndexDatabase(Protocol):
    """The engine under the index: SQLite (`casstore.index.database`) or PostgreSQL (`casstore.index.postgres`)."""

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


class RepositoryCore:
    """A store's index and its blobs, opened: what every part of the `Repository` works with."""

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
        search_text: "search_index.SearchText | None" = None,
        dedup_scope: DedupScope | None = None,
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
        :raises SearchUnavailableError: With `search_index_writes`, if the index's engine cannot hold a search index
            (a PostgreSQL server without `pg_trgm`).
        """
        self._database = database
        self._scope = dedup_scope or DedupScope()
        # Whether the index records the scope: if not, the first write records `store` (or finds what another
        # process recorded meanwhile) before anything is hashed into the index.
        self._scope_settled = dedup_scope is not None
        # Whether the recorded scope was looked for since the repository opened without one (asked once, when a write
        # is first hashed: opening a store asks nothing of its index).
        self._scope_read = self._scope_settled
        self._searchable = searchable
        self._search_index_writes = searchable and search_index_writes
        self._search_text: search_index.SearchText = search_text or search_index.FTS5_TEXT
        # Texts this process wrote with the index on, waiting (each with its `search_pending` row) to be indexed after
        # their commit, in batches.
        self._written_texts = search_index.WrittenTexts()
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
            digest_key=self._key_for_blob,
        )
        # Engine primitives where a round trip costs more than a statement (PostgreSQL); the local SQLite index has
        # none and keeps its statements. A stored-writes statement trusts blob rows, so it needs a backend whose rows
        # imply presence.
        # With the search index on, a write also records its pending row: the one-statement write has no room for it.
        recorder: StoredWriteRecorder | None = getattr(database, "record_stored_write", None)
        fast = self._blobs.rows_imply_presence and not self._search_index_writes
        self._record_stored_write = recorder if fast else None
        # A lazy index (the local one) is created by the first write, before its first blob file: a first write that
        # fails then leaves at most an empty index, never blob files in a folder without one.
        self._create_index: Callable[[], None] | None = getattr(database, "create", None)
        if self._search_index_writes:
            try:
                self._enable_search_index()
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
        :raises ValueError: If `dedup_scope` is not the scope the index records.
        :raises SchemaError: If `index.db` exists and was written by a newer casstore or is not a casstore index
            (`IndexDamagedError` if SQLite finds it damaged).
        :raises CasStoreError: If the blob folder is a symlink or not a folder.
        """
        database = Database(root / INDEX_FILE_NAME, durable=durable, lazy=lazy)
        try:
            if dedup_scope == dedup_scopes.NAMESPACE and not database.exists:
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
        )

    @property
    def dedup_scope(self) -> str:
        """`store` (content deduplicated across namespaces) or `namespace` (only within one): docs/dedup-scope.md."""
        if not self._scope_read:
            self._read_scope()
        return self._scope.name

    def digest_key(self, namespace: str) -> bytes | None:
        """:returns: The key the digests of `namespace`'s writes are keyed with; None under `store` scope."""
        if not self._scope_read:
            self._read_scope()
        return self._scope.key_for(namespace)

    def _read_scope(self) -> None:
        # An index that recorded no scope when this object opened it may record one now (another process made it).
        with self._index_for_blobs() as connection:
            found = dedup_scopes.recorded(connection)
        if found is not None:
            self._scope = found
            self._scope_settled = True
        self._scope_read = True

    def _key_for_blob(self, namespace: str | None) -> bytes | None:
        # A blob row that names a namespace while this object knows no secret: the index was made (lazily, by another
        # process) after this object opened it; its scope is read now.
        if namespace is None:
            return None
        if self._scope.secret is None:
            with self._index_for_blobs() as connection:
                found = dedup_scopes.recorded(connection)
            if found is None or found.secret is None:
                raise CorruptBlobError(
                    f"A blob of namespace {namespace!r} has a keyed digest, but the index records no dedup secret: it "
                    "is damaged. See 'Recovery' in casstore's docs/gc.md."
                )
            self._scope = found
        return self._scope.key_for(namespace)

    def _settle_scope(self) -> None:
        # Before this object's first write to an index that recorded no scope when it was opened: record `store`, or
        # find the one another process recorded meanwhile.
        with self._database.transaction() as work:
            self._scope = dedup_scopes.settle_default(work.connection)
        self._scope_settled = True

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

    @property
    def read_only(self) -> bool:
        """Whether the index can only be read (a local store on read-only media, or that this process may not write)."""
        return bool(getattr(self._database, "read_only", False))

    def read_only_error(self, what: str) -> ReadOnlyStoreError:
        """:returns: The error that says the repository is read-only, and `what` cannot be done for that."""
        return read_only.store_error(Path(self.description), what)

    def _refuse_if_read_only(self, what: str) -> None:
        """:raises ReadOnlyStoreError: If the index can only be read; `what` says what cannot be done then."""
        if self.read_only:
            raise self.read_only_error(what)

    @property
    def searchable(self) -> bool:
        """Whether this repository's index can hold a search index (both engines' can)."""
        return self._searchable

    def _enable_search_index(self) -> None:
        with self._guard.held():
            with self._index() as connection:
                if search_index.is_enabled(connection):
                    return
            try:
                with self._database.transaction() as work:
                    search_index.enable(work, self._search_text)
            except self._database.failures as error:
                raise self._engine_failed(error) from error

    def close(self) -> None:
        """
        Close the index and the blob folder, after waiting for operations in flight in other threads.

        Later calls raise `StoreClosedError`; closing twice is harmless.
        """
        if self._guard.close():
            self._database.close()
            self._blobs.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()


def not_found_error(namespace: str, reference: str) -> ReferenceNotFoundError:
    return ReferenceNotFoundError(
        f"No result {reference} in namespace {namespace!r}. References are only readable in the namespace that "
        f"wrote them."
    )


def damaged_index_error(digest: str, error: Exception) -> CorruptBlobError:
    return CorruptBlobError(
        f"Cannot look up blob {digest}: the index is damaged ({error}). See 'Recovery' in casstore's docs/gc.md.",
        digest=digest,
    )


def local_scope(database: Database, requested: str | None) -> DedupScope | None:
    """
    :returns: The dedup scope of a local index, recorded now if asked for and it records none; None if it records
        none and none was asked for (its first write records `store`).
    :raises ValueError: If `requested` is not the recorded scope.
    """
    dedup_scopes.check_dedup_scope(requested)
    if requested is None or not database.exists:
        return None  # read when a write is first hashed (`RepositoryCore.digest_key`)
    where = str(database.path)
    try:
        with database.reading() as connection:
            found = dedup_scopes.recorded(connection)
        if found is not None:
            dedup_scopes.check_same(found.name, requested, index=where)
            return found
        if database.read_only:
            dedup_scopes.check_same(dedup_scopes.STORE, requested, index=where)
            return None
        with database.transaction() as work:
            return dedup_scopes.settle(work.connection, requested, index=where)
    except database.damage as error:
        raise IndexDamagedError(
            f"{where} is not a usable casstore index ({error}). If it is damaged, move it aside: see 'Recovery' in "
            "casstore's docs/gc.md."
        ) from error
