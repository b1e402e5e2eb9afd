"""The `Repository`'s reader: a visible reference's verified content, final even beside gc."""

from casstore.blobs.lookup import BlobLocation
from casstore.errors import CorruptBlobError, StorageError
from casstore.index import writes as index
from casstore.repository.core import RepositoryCore, damaged_index_error, lost_blobs, not_found_error


class Reader:
    """Reading a result back in the namespace that wrote it."""

    def __init__(self, core: RepositoryCore) -> None:
        self._core = core
        self._database = core.database
        self._blobs = core.blobs
        self._guard = core.guard

    def read(self, *, namespace: str, digest: str, reference: str) -> bytes:
        """
        :returns: The verified content behind `reference`, if it is visible in `namespace`.
        :raises ReferenceNotFoundError: If it was not written in `namespace` (or was forgotten).
        :raises CorruptBlobError: If its blob is missing or damaged (`UnsafeBlobError` for a planted link).
        """
        try:
            return self._read_once(namespace, digest, reference)
        except _Lost as lost:
            if not lost.error.missing:
                self._core.mark_lost(lost_blobs(lost.error))
                raise lost.error from lost.error.__cause__
        # The blob vanished after the look-up: a concurrent `gc` may have collected it after its reference was
        # forgotten, and a writer may have stored the same content again since. Looked at once more under the
        # index's write lock, the only lock under which blobs are deleted, what is found is final. What is found lost
        # then is recorded, after that transaction, for the next write of the content to store it again.
        try:
            return self._read_locked(namespace, digest, reference)
        except _Lost as lost:
            self._core.mark_lost(lost_blobs(lost.error))
            raise lost.error from lost.error.__cause__

    def _read_once(self, namespace: str, digest: str, reference: str) -> bytes:
        try:
            with self._database.reading() as connection:
                location = self._blobs.locate_readable(connection, digest, namespace, reference)
            if location is None:
                raise not_found_error(namespace, reference)
        except self._database.damage as error:
            raise damaged_index_error(digest, error) from error
        except self._database.failures as error:
            raise self._read_failed(digest, error) from error
        return self._load(location, guarded=True)

    def _load(self, location: BlobLocation, *, guarded: bool) -> bytes:
        try:
            return self._blobs.load(location, guarded=guarded)
        except CorruptBlobError as error:
            raise _Lost(error) from None

    def _read_locked(self, namespace: str, digest: str, reference: str) -> bytes:
        try:
            with self._guard.held(), self._database.rolled_back() as work:
                if not index.is_visible(work.connection, namespace=namespace, digest=digest, reference=reference):
                    raise not_found_error(namespace, reference)
                return self._load(self._blobs.locate(work.connection, digest), guarded=False)
        except self._database.damage as error:
            raise damaged_index_error(digest, error) from error
        except self._database.failures as error:
            raise self._read_failed(digest, error) from error

    def _read_failed(self, digest: str, error: Exception) -> StorageError:
        database = self._database
        return StorageError(
            f"Could not look up blob {digest}: the {database.kind} at {database.description} failed: {error}"
        )


class _Lost(Exception):
    """A blob's stored bytes, found missing or damaged by `load`: raised as its `CorruptBlobError` once recorded."""

    def __init__(self, error: CorruptBlobError) -> None:
        super().__init__(error)
        self.error = error
