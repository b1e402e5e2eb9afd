"""
The repository's core: the index and the blob layer it owns, opened and closed; the connection every question uses.

Every collaborator of the `Repository` (its writer, reader, history, search, retention, copies) receives this one
object in its constructor and works on what it holds; none of them opens or closes anything.
"""

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, Protocol

from casstore import search as search_index
from casstore.blobs.backend import BlobBackend
from casstore.blobs.frames import FrameCodec
from casstore.blobs.learning import learner_for
from casstore.blobs.store import BlobStore
from casstore.errors import (
    CorruptBlobError,
    IndexDamagedError,
    ReadOnlyStoreError,
    ReferenceNotFoundError,
    StorageError,
    UnsafeBlobError,
)
from casstore.index import read_only
from casstore.index import scope as dedup_scopes
from casstore.index.database import Database
from casstore.index.scope import DedupScope
from casstore.index.work import UnitOfWork
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
    failure_causes: str
    description: str

    def reading(self) -> AbstractContextManager[Any]: ...
    def snapshot(self) -> AbstractContextManager[Any]: ...
    def transaction(self, *, exclusive: bool = False) -> AbstractContextManager[UnitOfWork]: ...
    def rolled_back(self) -> AbstractContextManager[UnitOfWork]: ...
    def close(self) -> None: ...

    # Giving the space of deleted rows back (see each engine).
    rebuilds_to_delete: bool

    def space_policy(self, *, rebuilt: bool) -> str: ...
    def yield_to_writers(self, held: float) -> None: ...
    def estimated_bytes(self, work: UnitOfWork, *, rebuilt: bool) -> int | None: ...
    def return_free_space(self) -> bool: ...
    def rebuild(self) -> bool: ...


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
    """
    A store's index and its blobs, opened: the state every collaborator of the `Repository` shares.

    Its attributes are the package's own (the collaborators read them); nothing outside `casstore.repository` sees
    this object.
    """

    def __init__(
        self,
        *,
        database: IndexDatabase,
        blob_backend: BlobBackend,
        compression_level: int,
        inline_max: int,
        footprint: Callable[[], tuple[int, int]],
        description: str,
        learn: bool,
        searchable: bool,
        search_index_writes: bool,
        search_text: "search_index.SearchText | None",
        dedup_scope: DedupScope | None = None,
        requested_scope: str | None = None,
    ) -> None:
        """Join an opened index and blob backend (the parameters are `Repository`'s); this object closes them."""
        self.database = database
        self.scope = dedup_scope or DedupScope()
        # The scope the store was opened with, checked against (or recorded as) the index's once it has one.
        self.requested_scope = requested_scope
        # Whether the index records the scope: if not, the first write records `store` (or finds what another
        # process recorded meanwhile) before anything is hashed into the index.
        self.scope_settled = dedup_scope is not None
        # Whether the recorded scope was looked for since the repository opened without one (asked once, when a write
        # is first hashed: opening a store asks nothing of its index).
        self.scope_read = self.scope_settled
        self.searchable = searchable
        self.search_index_writes = searchable and search_index_writes
        self.search_text: search_index.SearchText = search_text or search_index.FTS5_TEXT
        # Texts this process wrote with the index on, waiting (each with its `search_pending` row) to be indexed after
        # their commit, in batches.
        self.written_texts = search_index.WrittenTexts()
        self.guard = OpenGuard()
        self.footprint = footprint
        self.description = description
        self.failures: tuple[type[Exception], ...] = (OSError, *database.failures)
        self.blobs = BlobStore(
            files=blob_backend,
            codec=FrameCodec(compression_level=compression_level),
            inline_max=inline_max,
            file_access=self.guard,
            reading=self.index_for_blobs,
            learner=learner_for(description) if learn else None,
            digest_key=self.key_for_blob,
        )

    def dedup_scope(self) -> DedupScope:
        """:returns: The scope in force: the one the index records, else `store` (docs/dedup-scope.md)."""
        if not self.scope_read:
            # An index that recorded no scope when this object opened it may record one now (another process made it).
            with self.index_for_blobs() as connection:
                found = dedup_scopes.recorded(connection)
            if found is not None:
                dedup_scopes.check_same(found.name, self.requested_scope, index=self.description)
                self.scope = found
                self.scope_settled = True
            self.scope_read = True
        return self.scope

    def key_for_blob(self, namespace: str | None) -> bytes | None:
        """:returns: The key the digest of a blob whose row names `namespace` is keyed with (None: a plain digest)."""
        if namespace is None:
            return None
        if self.scope.secret is None:
            # The index was made (lazily, by another process) after this object opened it: its scope is read now.
            with self.index_for_blobs() as connection:
                found = dedup_scopes.recorded(connection)
            if found is None or found.secret is None:
                raise CorruptBlobError(
                    f"A blob of namespace {namespace!r} has a keyed digest, but the index records no dedup secret: it "
                    "is damaged. See 'Recovery' in casstore's docs/gc.md."
                )
            self.scope = found
        return self.scope.key_for(namespace)

    def settle_scope(self) -> None:
        """
        Before this object's first write to an index that recorded no scope: record the scope asked for (`store` if
        none was), or find the one another process recorded meanwhile.

        :raises ValueError: If another process recorded a scope other than the one this store was opened with.
        """
        with self.database.transaction() as work:
            if self.requested_scope is None:
                self.scope = dedup_scopes.settle_default(work.connection)
            else:
                found = dedup_scopes.settle(work.connection, self.requested_scope, index=self.description)
                assert found is not None  # a scope was asked for, so one is recorded
                self.scope = found
        self.scope_settled = self.scope_read = True

    @contextmanager
    def index(self) -> Iterator[Any]:
        """The connection for one question, a failure of the engine reported as `StorageError` naming it."""
        try:
            with self.database.reading() as connection:
                yield connection
        except self.database.failures as error:
            if isinstance(error, self.database.damage):
                raise
            raise self.engine_failed(error) from error

    @contextmanager
    def index_for_blobs(self) -> Iterator[Any]:
        """
        The connection for the blob layer's own questions (the blob a learned frame needs), the engine's failures as
        `StorageError` and a damaged index as `CorruptBlobError`, which is what they are to a read.
        """
        try:
            with self.database.reading() as connection:
                yield connection
        except self.database.failures as error:
            if isinstance(error, self.database.damage):
                # The driver's message may quote the damaged value itself: shown on one line, printable, cut short.
                shown = "".join(character if character.isprintable() else "?" for character in str(error))
                raise CorruptBlobError(
                    f"Cannot look up a blob: the index is damaged ({shown[:200]}). See 'Recovery' in the README."
                ) from error
            raise self.engine_failed(error) from error

    def engine_failed(self, error: Exception) -> StorageError:
        """:returns: The error that says the index's engine failed with `error`, naming the engine and where it is."""
        return StorageError(f"The {self.database.kind} at {self.database.description} failed: {error}")

    @property
    def read_only(self) -> bool:
        """Whether the index can only be read (a local store on read-only media, or that this process may not write)."""
        return bool(getattr(self.database, "read_only", False))

    def read_only_error(self, what: str) -> ReadOnlyStoreError:
        """:returns: The error that says the repository is read-only, and `what` cannot be done for that."""
        return read_only.store_error(Path(self.description), what)

    def refuse_if_read_only(self, what: str) -> None:
        """:raises ReadOnlyStoreError: If the index can only be read; `what` says what cannot be done then."""
        if self.read_only:
            raise self.read_only_error(what)

    def mark_lost(self, digests: Sequence[str]) -> None:
        """
        Record, best effort, that a read or `verify` found these blobs' stored bytes missing or damaged, so that the
        next write of each content stores it again (`BlobStore.mark_lost`). Nothing else is written, nothing at all in
        a read-only index, and a failure to record is passed over: the caller raises what it found whatever happens.
        """
        for digest in digests:
            self.blobs.forget(digest)  # so this process's next write of it confirms it, and finds it lost
        if not digests or self.read_only:
            return
        try:
            with self.guard.held(), self.database.transaction() as work:
                self.blobs.mark_lost(work, digests)
        except Exception:
            pass

    def close(self) -> None:
        """Close the index and the blob backend once operations in flight end; later ones raise `StoreClosedError`."""
        if self.guard.close():
            self.database.close()
            self.blobs.close()


def lost_blobs(error: CorruptBlobError) -> list[str]:
    """
    :param error: What `BlobStore.load` raised.
    :returns: The digests of the blobs it found missing or damaged: the one read, and each link of its chain that
        failed (a delta's base). A delta whose base is lost is itself stored again (plain) by a write of its content,
        so either write heals the read. Nothing for a planted link: a write cannot replace it (docs/gc.md).
    """
    found: list[str] = []
    cause: BaseException | None = error
    while isinstance(cause, CorruptBlobError):
        if isinstance(cause, UnsafeBlobError):
            return []
        if cause.digest:
            found.append(cause.digest)
        cause = cause.__cause__
    return found


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
    :returns: The dedup scope of a local index, recorded now if asked for and it records none; None if none was asked
        for (read when a write is first hashed, and recorded by the first write if the index records none).
    :raises ValueError: If `requested` is unknown or not the recorded scope.
    :raises IndexDamagedError: If SQLite finds the index damaged.
    """
    dedup_scopes.check_dedup_scope(requested)
    if requested is None or not database.exists:
        return None
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
