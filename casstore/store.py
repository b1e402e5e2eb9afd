"""
`ContentAddressedToolResultStore`: the Haystack `ToolResultStore` that joins the blob layer and the index.

It turns Haystack's `write(key=..., content=...)` into a content-addressed blob plus a row in the offload history,
hands back a hash path as the reference, and resolves references only within its namespace.
"""

import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from haystack.core.serialization import default_from_dict, default_to_dict
from haystack.hooks.tool_result_offloading.types import ToolResultStore

from casstore import index
from casstore.blobs import BlobStore, StagedBlob, content_digest
from casstore.database import Database
from casstore.errors import (
    CasStoreError,
    CorruptBlobError,
    InvalidContentError,
    ReferenceNotFoundError,
    StorageError,
)
from casstore.guard import OpenGuard
from casstore.index import OffloadRecord
from casstore.namespaces import DEFAULT_NAMESPACE, check_namespace
from casstore.references import extension_of, format_reference, split_reference

INDEX_FILE_NAME = "index.db"
BLOB_DIRECTORY_NAME = "blobs"
# Measured with `python -m benchmarks --inline-sweep`: see the README's Performance section.
DEFAULT_INLINE_MAX = 64 * 1024


@dataclass(frozen=True, slots=True)
class PreparedWrite:
    """A write whose reference is known but which has not been stored yet: see `prepare_write`."""

    reference: str
    key: str
    digest: str
    is_text: bool
    data: bytes


class ContentAddressedToolResultStore(ToolResultStore):
    """
    A deduplicating, compressed `ToolResultStore` with a queryable SQLite history.

    ```python
    from casstore import ContentAddressedToolResultStore

    with ContentAddressedToolResultStore(root="tool_results", namespace="alice") as store:
        reference = store.write(key="search_1.txt", content="...")  # 'blake3/9b/1c4e...e4a.txt'
        assert store.read(reference) == "..."
    ```

    Each distinct piece of content is stored once, keyed by its BLAKE3 digest and zstd-compressed: small blobs inside
    `<root>/index.db`, larger ones under `<root>/blobs/`. Every `write` is recorded in the index. A store reads only
    what was written in its own namespace, while the blobs themselves are shared between namespaces.

    A store may be shared by threads, and several processes may open the same root at once.
    """

    supports_binary_content = True

    def __init__(
        self,
        root: str | Path,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        compression_level: int = 3,
        inline_max: int = DEFAULT_INLINE_MAX,
        durable: bool = False,
    ) -> None:
        """
        Open the store at `root`, creating it and bringing its index schema up to date if needed.

        :param root: The store's folder: `index.db` and `blobs/` live in it.
        :param namespace: Whose results these are. Reads see only what was written in the same namespace; use one
            namespace per user or run to isolate them without storing shared content twice.
        :param compression_level: The zstd compression level, 1 (fastest) to 22 (smallest).
        :param inline_max: Blobs whose compressed size is at most this many bytes are kept inside `index.db` instead
            of in a file of their own. `0` stores every blob as a file.
        :param durable: Fsync blob files and use SQLite's `synchronous=FULL`, so a write survives power loss. The
            default survives a crash of the process, but not of the machine.
        :raises TypeError: If `namespace` is not a string.
        :raises ValueError: If `namespace` is empty, too long or contains control characters, or if
            `compression_level` or `inline_max` is out of range.
        :raises SchemaError: If `index.db` was written by a newer casstore or is not a casstore index;
            `IndexDamagedError` (also a `CorruptBlobError`) if SQLite finds it damaged or not a database at all.
        """
        check_namespace(namespace)
        if not 1 <= compression_level <= 22:
            raise ValueError(f"`compression_level` must be between 1 and 22, got {compression_level}.")
        if inline_max < 0:
            raise ValueError(f"`inline_max` must be at least 0, got {inline_max}.")
        self.root = Path(root)
        self.namespace = namespace
        self.compression_level = compression_level
        self.inline_max = inline_max
        self.durable = durable
        self.root.mkdir(parents=True, exist_ok=True)
        self._database = Database(self.root / INDEX_FILE_NAME, durable=durable)
        try:
            self._blobs = BlobStore(
                directory=self.root / BLOB_DIRECTORY_NAME,
                compression_level=compression_level,
                inline_max=inline_max,
                durable=durable,
            )
        except BaseException:
            self._database.close()
            raise
        self._guard = OpenGuard()

    def prepare_write(self, *, key: str, content: str | bytes) -> PreparedWrite:
        """
        Check and hash a write without storing anything, so its reference is known in advance.

        `DedupOffloadCompactor` uses this to find out whether a reference saves tokens before it stores a result.

        :param key: As for `write`.
        :param content: As for `write`.
        :returns: A prepared write, whose `reference` is what `write` would return; store it with `write_prepared`.
        :raises TypeError: If `content` is neither `str` nor `bytes`, or `key` is not a string.
        :raises InvalidContentError: If `content` is a `str` that cannot be encoded as UTF-8.
        :raises InvalidKeyError: If `key` is empty, too long, or contains NUL or a lone surrogate.
        """
        extension = extension_of(key)
        if isinstance(content, str):
            try:
                data = content.encode("utf-8")
            except UnicodeEncodeError as error:
                raise InvalidContentError(
                    f"Text content must be encodable as UTF-8, but position {error.start} holds "
                    f"{content[error.start]!r} (a lone surrogate?). Write it as bytes, or fix the text."
                ) from None
            is_text = True
        elif isinstance(content, bytes):
            data, is_text = content, False
        else:
            raise TypeError(f"Content must be str or bytes, got {type(content).__name__}.")
        digest = content_digest(data)
        reference = format_reference(digest, is_text=is_text, extension=extension)
        return PreparedWrite(reference=reference, key=key, digest=digest, is_text=is_text, data=data)

    def write_prepared(self, prepared: PreparedWrite) -> str:
        """
        Store a write made by `prepare_write` and record it in the index.

        :param prepared: What `prepare_write` returned.
        :returns: `prepared.reference`.
        :raises StorageError: If the blob or its history row could not be stored (disk full, file size limit, I/O
            error); nothing of this write is recorded then.
        """
        return self.write_prepared_many([prepared])[0]

    def write_prepared_many(self, prepared: Sequence[PreparedWrite]) -> list[str]:
        """
        Store several prepared writes (the parts of one tool result) together: all of them, or none.

        :param prepared: What `prepare_write` returned, for each part.
        :returns: Their references, in order.
        :raises StorageError: If any part could not be stored; then none of them is recorded.
        """
        try:
            with self._guard.held():
                return self._write_all(prepared)
        except CasStoreError:
            raise
        except (OSError, sqlite3.Error) as error:
            size = sum(len(write.data) for write in prepared)
            raise StorageError(
                f"Could not store {len(prepared)} result part(s) ({size} bytes) in {self.root}: {error}. Nothing of "
                f"this write was recorded; free space or fix the folder, then write again."
            ) from error

    def _write_all(self, prepared: Sequence[PreparedWrite]) -> list[str]:
        # One transaction records every part. New content is compressed (and a large blob's file written) before it,
        # so the write lock is held only for row operations. If a part's blob turns out to be missing under the lock
        # (gc took it meanwhile), the transaction is rolled back and goes again with that part staged.
        staged = self._stage_unknown(prepared)
        while True:
            # What an earlier transaction of this thread learned and did not commit must not be kept with this one.
            self._blobs.discard_checked()
            try:
                with self._database.transaction() as connection:
                    self._store_parts(connection, prepared, staged)
            except _BlobsMissing as missing:
                data = {write.digest: write.data for write in prepared}
                for digest in missing.digests:
                    staged[digest] = self._blobs.stage(digest, data[digest])
                continue
            self._blobs.keep_checked()
            return [write.reference for write in prepared]

    def _stage_unknown(self, prepared: Sequence[PreparedWrite]) -> dict[str, StagedBlob]:
        # Which parts are new is asked without the lock, and not at all for content this store stored or found
        # lately; the transaction settles it either way.
        unknown = [write for write in prepared if not self._blobs.seen(write.digest)]
        if not unknown:
            return {}
        with self._database.reading() as connection:
            new = {write.digest: write for write in unknown if not self._blobs.has(connection, write.digest)}
        return {digest: self._blobs.stage(digest, write.data) for digest, write in new.items()}

    def _store_parts(
        self, connection: sqlite3.Connection, prepared: Sequence[PreparedWrite], staged: dict[str, StagedBlob]
    ) -> None:
        # A part whose reference was visible already needs no look-up of its blob (see `index.record_write`), unless
        # its `last_seen` is due for a refresh or it lives in a file whose presence only a look-up checks.
        for blob in staged.values():
            self._blobs.put(connection, blob)
        missing = []
        for write in prepared:
            was_visible = self._record(connection, write)
            digest = write.digest
            if digest in staged or (was_visible and not self._blobs.needs_refresh(digest)):
                continue
            if not self._blobs.refresh(connection, digest):
                missing.append(digest)
        if missing:
            raise _BlobsMissing(missing)

    def write(self, *, key: str, content: str | bytes) -> str:
        """
        Store `content` once, record the write, and return its reference.

        Writing content that is already stored (in any namespace) adds a row to the history but no blob.

        :param key: A per-result name such as `3_read_file_call_1.txt`. Only its extension is used (it ends the
            reference, if it is short plain ASCII); the whole key is recorded in the index, never used as a path.
        :param content: Text (stored as its UTF-8 bytes) or bytes.
        :returns: A hash path such as `blake3/9b/1c4e...e4a.txt` (`blake3/bin/9b/...` for bytes).
        :raises TypeError: If `content` is neither `str` nor `bytes`, or `key` is not a string.
        :raises InvalidContentError: If `content` is a `str` that cannot be encoded as UTF-8.
        :raises InvalidKeyError: If `key` is empty, too long, or contains NUL or a lone surrogate.
        """
        return self.write_prepared_many((self.prepare_write(key=key, content=content),))[0]

    def read(self, reference: str) -> str | bytes:
        """
        Return exactly what was written under `reference`, after checking its BLAKE3 digest.

        :param reference: A reference returned by `write` in this store's namespace.
        :returns: `str` for content written as text, `bytes` for content written as bytes.
        :raises InvalidReferenceError: If `reference` is not a well-formed reference.
        :raises ReferenceNotFoundError: If it was not written in this namespace.
        :raises CorruptBlobError: If the stored blob is missing or damaged; `UnsafeBlobError` (also a
            `ReferenceNotFoundError`) if its path inside the store is a planted symlink or not a regular file.
        """
        digest, is_text, _ = split_reference(reference)
        data = self._read(digest, reference)
        return data.decode("utf-8") if is_text else data

    def _read(self, digest: str, reference: str) -> bytes:
        try:
            return self._read_once(digest, reference)
        except CorruptBlobError as error:
            if not error.missing:
                raise
        # The blob's file vanished after the look-up: a concurrent `gc` may have collected the blob after its reference
        # was forgotten, and a writer may have stored the same content again since. Looked at once more under the
        # index's write lock, the only lock under which blob files are deleted, what is found is final.
        return self._read_locked(digest, reference)

    def _read_once(self, digest: str, reference: str) -> bytes:
        try:
            with self._database.reading() as connection:
                row = index.readable_blob(connection, namespace=self.namespace, digest=digest, reference=reference)
        except sqlite3.DatabaseError as error:
            raise _damaged_index(digest, error) from error
        if row is None:
            raise self._not_found(reference)
        size, stored_in, frame = row
        return self._blobs.load_columns(digest, size=size, stored_in=stored_in, frame=frame, file_access=self._guard)

    def _read_locked(self, digest: str, reference: str) -> bytes:
        try:
            with self._guard.held(), self._database.rolled_back() as connection:
                row = index.readable_blob(connection, namespace=self.namespace, digest=digest, reference=reference)
                if row is None:
                    raise self._not_found(reference)
                size, stored_in, frame = row
                return self._blobs.load_columns(
                    digest, size=size, stored_in=stored_in, frame=frame, file_access=nullcontext()
                )
        except sqlite3.DatabaseError as error:
            raise _damaged_index(digest, error) from error

    def _not_found(self, reference: str) -> ReferenceNotFoundError:
        return ReferenceNotFoundError(
            f"No result {reference} in namespace {self.namespace!r}. References are only readable in the namespace "
            f"that wrote them."
        )

    def record_offloads(self, *, compaction_id: str, offloads: list[OffloadRecord]) -> None:
        """
        Append a compaction's offloads to the index's `offloads` table, in one transaction.

        :param compaction_id: An id shared by all offloads of one `compact` call.
        :param offloads: One record per tool result that was replaced by references.
        """
        with self._guard.held(), self._database.transaction() as connection:
            index.record_offloads(connection, namespace=self.namespace, compaction_id=compaction_id, offloads=offloads)

    def _record(self, connection: sqlite3.Connection, prepared: PreparedWrite) -> bool:
        return index.record_write(
            connection,
            namespace=self.namespace,
            key=prepared.key,
            digest=prepared.digest,
            is_text=prepared.is_text,
            size=len(prepared.data),
            reference=prepared.reference,
        )

    @property
    def database(self) -> Database:
        """The store's index connection, for maintenance (`casstore.maintenance`) and inspection."""
        return self._database

    @property
    def blobs(self) -> BlobStore:
        """The store's blob layer, for maintenance (`casstore.maintenance`)."""
        return self._blobs

    @contextmanager
    def keep_open(self) -> Iterator[None]:
        """
        Hold off `close()` until the block ends: for maintenance (`casstore.maintenance`) that uses the layers directly.

        :raises StoreClosedError: If the store is closed.
        """
        with self._guard.held():
            yield

    def close(self) -> None:
        """
        Close the index and the blob folder, after waiting for operations in flight in other threads.

        Later calls raise `StoreClosedError`; closing twice is harmless.
        """
        if self._guard.close():
            self._database.close()
            self._blobs.close()

    def __enter__(self) -> "ContentAddressedToolResultStore":
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"ContentAddressedToolResultStore(root={str(self.root)!r}, namespace={self.namespace!r})"

    def to_dict(self) -> dict[str, Any]:
        """
        Serialize the store's settings (not its content).

        :returns: A dictionary for Haystack's serialization.
        """
        return default_to_dict(
            self,
            root=str(self.root),
            namespace=self.namespace,
            compression_level=self.compression_level,
            inline_max=self.inline_max,
            durable=self.durable,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ContentAddressedToolResultStore":
        """
        Open a store from what `to_dict` produced.

        :param data: A dictionary representation produced by `to_dict`.
        :returns: The store, opened.
        """
        return default_from_dict(cls, data)


class _BlobsMissing(Exception):
    """Raised inside a write transaction, to roll it back: these parts' blobs must be staged (gc took them)."""

    def __init__(self, digests: list[str]) -> None:
        super().__init__(digests)
        self.digests = digests


def _damaged_index(digest: str, error: sqlite3.DatabaseError) -> CorruptBlobError:
    return CorruptBlobError(
        f"Cannot look up blob {digest}: the index is damaged ({error}). See 'Recovery' in the README.",
        digest=digest,
    )
