"""
The blob layer: content stored once, by BLAKE3 digest, as verified zstd frames.

`put`, `get`, `has` and `delete` work by digest. A blob whose frame is at most `inline_max` bytes lives inside
`index.db` (table `blob_frames`: one SQLite row costs far less than creating a file, and a small file would waste most
of a disk block); a larger one is a file under `blobs/`. Both kinds are deduplicated, verified and deleted the same
way, and nothing above this layer knows which kind a blob is.

Methods that take a `connection` run inside the caller's transaction, so a blob and the index row that references it
commit together. The expensive parts of storing new content (compressing, writing a file) happen in `stage`, outside
any transaction, so a writer holds SQLite's write lock only for a few row operations.

A blob store remembers which blobs it put or refreshed lately, in transactions that committed (`seen`,
`needs_refresh`; the caller says when with `keep_checked`), so that a writer can skip a look-up that would change
nothing; what it remembers is a hint, never proof that a blob is still stored.
"""

import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import blake3
import zstandard

from casstore.blob_files import BlobDirectory, BlobFile, UnsafeBlobPathError
from casstore.database import NOW_SQL, SHIFTED_NOW_SQL, ago
from casstore.errors import CorruptBlobError, UnsafeBlobError

# Above this size, BLAKE3 hashes with several threads.
_PARALLEL_HASH_BYTES = 4 * 1024 * 1024

_STORED_IN_INDEX = "index"
_STORED_IN_FILE = "file"

# How stale `last_seen` may get: a write refreshes it only when it is older than this.
LAST_SEEN_RESOLUTION = timedelta(seconds=1)
_REFRESH_SQL = f"SELECT stored_in, last_seen < {SHIFTED_NOW_SQL} FROM blobs WHERE digest = ?"
_REFRESH_AGO = ago(LAST_SEEN_RESOLUTION)
_RESOLUTION_SECONDS = LAST_SEEN_RESOLUTION.total_seconds()
# How many digests a blob store remembers having stored or found (see `seen` and `needs_refresh`).
_REMEMBERED = 65_536


@dataclass(frozen=True, slots=True)
class StagedBlob:
    """Compressed content ready for `put`; a blob bound for a file has already been written there."""

    digest: str
    size: int
    frame: bytes
    in_index: bool


@dataclass(frozen=True, slots=True)
class StoredBlob:
    """A blob's row, enough to load it: `frame` is set for blobs kept in the index."""

    digest: str
    size: int
    frame: bytes | None


def content_digest(data: bytes) -> str:
    """
    :param data: The content bytes.
    :returns: The 64-hex BLAKE3 digest of `data`.
    """
    if len(data) >= _PARALLEL_HASH_BYTES:
        return blake3.blake3(data, max_threads=blake3.blake3.AUTO).hexdigest()
    return blake3.blake3(data).hexdigest()


class BlobStore:
    """Blobs by digest, in the `blobs` table and the blob directory."""

    def __init__(self, *, directory: Path, compression_level: int, inline_max: int, durable: bool) -> None:
        """
        :param directory: The `blobs` folder for blobs too large for the index.
        :param compression_level: The zstd level (1 to 22).
        :param inline_max: Frames of at most this many bytes are stored in the index; `0` sends every blob to a file.
        :param durable: Fsync blob files and their folder.
        """
        self.files = BlobDirectory(directory, durable=durable)
        self.compression_level = compression_level
        self.inline_max = inline_max
        # zstd contexts are not thread-safe, and making one costs more than compressing a small result.
        self._contexts = threading.local()
        # Digest -> (the `time.monotonic()` by which its `last_seen` was current, whether it lives in the index), for
        # blobs this store put or refreshed in transactions that committed, least recently first.
        self._checked: dict[str, tuple[float, bool]] = {}
        self._checked_lock = threading.Lock()
        # What `put` and `refresh` learned in the current thread's transaction, until `keep_checked` or
        # `discard_checked`: a refresh that is rolled back must not be trusted.
        self._uncommitted = threading.local()

    def close(self) -> None:
        """Release the blob directory."""
        self.files.close()

    def stage(self, digest: str, data: bytes) -> StagedBlob:
        """
        Compress `data` and, if its frame is too large for the index, write it to its blob file.

        Runs outside any transaction. Writing a file that is already there replaces it with identical bytes.

        :param digest: `content_digest(data)`.
        :param data: The content bytes.
        :returns: The staged blob, for `put`.
        """
        frame = self._compressor().compress(data)
        in_index = len(frame) <= self.inline_max
        if not in_index:
            self.files.write(digest, frame)
        return StagedBlob(digest=digest, size=len(data), frame=frame, in_index=in_index)

    def put(self, connection: sqlite3.Connection, staged: StagedBlob) -> None:
        """
        Record a staged blob, inside the caller's write transaction.

        A file blob is checked to be in place first (and written again if a concurrent `gc` removed it), so the
        committed row never points at nothing. If the digest already has a row, the row is replaced by this one:
        either layout holds the same content, and this one was just checked to exist.
        """
        if not staged.in_index and not self.files.exists(staged.digest):
            self.files.write(staged.digest, staged.frame)
        checked_at = time.monotonic()
        (blob_id,) = connection.execute(
            f"""
            INSERT INTO blobs (digest, size, stored_size, stored_in, first_seen, last_seen)
            VALUES (?, ?, ?, ?, {NOW_SQL}, {NOW_SQL})
            ON CONFLICT (digest) DO UPDATE SET
                last_seen = excluded.last_seen, stored_size = excluded.stored_size, stored_in = excluded.stored_in
            RETURNING id
            """,
            (staged.digest, staged.size, len(staged.frame), _STORED_IN_INDEX if staged.in_index else _STORED_IN_FILE),
        ).fetchone()
        if staged.in_index:
            connection.execute(
                "INSERT OR REPLACE INTO blob_frames (blob_id, size, frame) VALUES (?, ?, ?)",
                (blob_id, staged.size, staged.frame),
            )
        else:
            connection.execute("DELETE FROM blob_frames WHERE blob_id = ?", (blob_id,))
        self._note(staged.digest, current_at=checked_at, in_index=staged.in_index)

    def refresh(self, connection: sqlite3.Connection, digest: str) -> bool:
        """
        Mark a blob as just seen, inside the caller's write transaction, so `gc` leaves it alone.

        `last_seen` is rewritten only when it is more than `LAST_SEEN_RESOLUTION` old, so a burst of repeated writes
        costs one row update, not one each; `gc` adds that resolution to its grace period.

        :returns: True if the blob is stored; False if it is not (or its file has gone), and the caller must `stage`
            and `put` it.
        """
        checked_at = time.monotonic()
        row = connection.execute(_REFRESH_SQL, (_REFRESH_AGO, digest)).fetchone()
        if row is None:
            return False
        stored_in, stale = row
        in_index = stored_in == _STORED_IN_INDEX
        if not in_index and not self.files.exists(digest):
            return False
        if stale:
            connection.execute(f"UPDATE blobs SET last_seen = {NOW_SQL} WHERE digest = ?", (digest,))
        # Left alone, `last_seen` may already be up to a resolution old.
        self._note(digest, current_at=checked_at if stale else checked_at - _RESOLUTION_SECONDS, in_index=in_index)
        return True

    def seen(self, digest: str) -> bool:
        """
        :returns: Whether this blob store put or refreshed the blob lately: a hint that it is stored, to skip work
            that a write transaction would notice was needed, never a proof.
        """
        return digest in self._checked

    def needs_refresh(self, digest: str) -> bool:
        """
        Whether a write of a blob known to be stored should still `refresh` it.

        :returns: False only if this blob store put or refreshed the blob less than `LAST_SEEN_RESOLUTION` ago (so
            its `last_seen` is current) and it lives in the index. A blob file could have been removed since, and only
            `refresh` notices (so the writer stores it again).
        """
        checked = self._checked.get(digest)
        return checked is None or not checked[1] or checked[0] <= time.monotonic() - _RESOLUTION_SECONDS

    def keep_checked(self) -> None:
        """
        Remember what `put` and `refresh` learned in this thread's transaction, now that it has committed.

        Until then, `seen` and `needs_refresh` do not count it. Call `discard_checked` instead if it rolled back.
        """
        learned: dict[str, tuple[float, bool]] | None = getattr(self._uncommitted, "learned", None)
        if not learned:
            return
        self._uncommitted.learned = {}
        with self._checked_lock:
            checked = self._checked
            for digest, fact in learned.items():
                checked.pop(digest, None)
                checked[digest] = fact
            while len(checked) > _REMEMBERED:
                del checked[next(iter(checked))]

    def discard_checked(self) -> None:
        """Forget what `put` and `refresh` learned in this thread's transaction: it rolled back, or never ran."""
        self._uncommitted.learned = {}

    def _note(self, digest: str, *, current_at: float, in_index: bool) -> None:
        learned: dict[str, tuple[float, bool]] | None = getattr(self._uncommitted, "learned", None)
        if learned is None:
            learned = self._uncommitted.learned = {}
        learned[digest] = (current_at, in_index)

    def has(self, connection: sqlite3.Connection, digest: str) -> bool:
        """:returns: Whether a blob row exists for `digest` (its content is not checked; see `get`)."""
        return connection.execute("SELECT 1 FROM blobs WHERE digest = ?", (digest,)).fetchone() is not None

    def fetch(self, connection: sqlite3.Connection, digest: str) -> StoredBlob:
        """
        Look up a blob's row: the quick part of `get`, to run while holding the connection.

        :raises CorruptBlobError: If the index has no row for `digest`, or a blob stored in the index has no frame.
        """
        # The same rule as the view `readable_blobs`, so that `verify` checks what `read` reads: a frame, when the
        # index has one, is what is read, even for a blob whose row says it is kept in a file (a damaged index).
        row = connection.execute(
            "SELECT coalesce(blob_frames.size, blobs.size), "
            "CASE WHEN blob_frames.frame IS NOT NULL THEN 'index' ELSE blobs.stored_in END, blob_frames.frame "
            "FROM blobs LEFT JOIN blob_frames ON blob_frames.blob_id = blobs.id WHERE blobs.digest = ?",
            (digest,),
        ).fetchone()
        if row is None:
            raise CorruptBlobError(f"Blob {digest} is missing from the index.", digest=digest, missing=True)
        return self.stored(digest, size=row[0], stored_in=row[1], frame=row[2])

    def stored(self, digest: str, *, size: int | None, stored_in: str | None, frame: bytes | None) -> StoredBlob:
        """
        Make a `StoredBlob` from the columns of its row, as a query joining the blob tables returned them.

        :raises CorruptBlobError: If the row is gone (`size` is None), or a blob stored in the index has no frame.
        """
        if size is None:
            raise CorruptBlobError(f"Blob {digest} is missing from the index.", digest=digest, missing=True)
        if stored_in == _STORED_IN_INDEX and frame is None:
            raise CorruptBlobError(
                f"Blob {digest} is missing: its frame is gone from the index.", digest=digest, missing=True
            )
        return StoredBlob(digest=digest, size=size, frame=frame if stored_in == _STORED_IN_INDEX else None)

    def load(self, blob: StoredBlob) -> bytes:
        """
        Read, decompress and verify a blob: the slow part of `get`, to run without holding the connection.

        :returns: The content bytes, whose BLAKE3 digest was checked to be `blob.digest`.
        :raises CorruptBlobError: If the blob file is missing or unsafe, or the frame is truncated, undecodable, of the
            wrong size, or decodes to content with another digest.
        """
        frame = blob.frame if blob.frame is not None else self._read_file(blob.digest)
        return self._decode(blob.digest, blob.size, frame)

    def load_columns(
        self,
        digest: str,
        *,
        size: int | None,
        stored_in: str | None,
        frame: bytes | None,
        file_access: AbstractContextManager[object],
    ) -> bytes:
        """
        `stored` and `load` in one call, for the read path: the verified content of a blob from its row's columns.

        :param file_access: Held while a blob file is read (the store's guard, so that it is not closed meanwhile);
            a blob kept in the index needs no file and does not take it.
        :raises CorruptBlobError: As `stored` and `load`.
        """
        if stored_in == _STORED_IN_INDEX and frame is not None and size is not None:
            return self._decode(digest, size, frame)
        with file_access:
            return self.load(self.stored(digest, size=size, stored_in=stored_in, frame=frame))

    def _decode(self, digest: str, size: int, frame: bytes) -> bytes:
        try:
            declared = zstandard.frame_content_size(frame)
        except zstandard.ZstdError as error:
            raise CorruptBlobError(f"Blob {digest} is not a zstd frame ({error}).", digest=digest) from error
        if declared != size:
            raise CorruptBlobError(
                f"Blob {digest} declares {declared} bytes of content, but {size} were stored.", digest=digest
            )
        try:
            data = self._decompressor().decompress(frame)
        except zstandard.ZstdError as error:
            raise CorruptBlobError(f"Blob {digest} does not decompress ({error}).", digest=digest) from error
        if len(data) != size or content_digest(data) != digest:
            raise CorruptBlobError(f"Blob {digest} decompresses to content with another digest.", digest=digest)
        return data

    def get(self, connection: sqlite3.Connection, digest: str) -> bytes:
        """:returns: The verified content of the blob `digest`. :raises CorruptBlobError: As `fetch` and `load`."""
        return self.load(self.fetch(connection, digest))

    def delete(self, connection: sqlite3.Connection, digest: str) -> bool:
        """
        Delete a blob, inside the caller's write transaction.

        The file goes before the transaction commits, so a writer that reuses the digest after the commit always
        writes a new file; a crash before the commit leaves a row without a file, which `refresh` treats as absent.

        :returns: Whether a row was deleted.
        """
        row = connection.execute("DELETE FROM blobs WHERE digest = ? RETURNING id, stored_in", (digest,)).fetchone()
        if row is None:
            return False
        blob_id, stored_in = row
        connection.execute("DELETE FROM blob_frames WHERE blob_id = ?", (blob_id,))
        if stored_in == _STORED_IN_FILE:
            self.files.remove(digest)
        return True

    def digests(self, connection: sqlite3.Connection) -> list[str]:
        """:returns: Every digest with a row, in order."""
        return [row[0] for row in connection.execute("SELECT digest FROM blobs ORDER BY digest")]

    def stray_files(self) -> Iterator[BlobFile]:
        """Yield every file in the blob directory; `is_stray` tells, under a transaction, which have no row."""
        return self.files.files()

    def is_stray(self, connection: sqlite3.Connection, blob_file: BlobFile) -> bool:
        """:returns: Whether `blob_file` is a temporary file or a blob file that no row points at."""
        if blob_file.digest is None:
            return True
        row = connection.execute("SELECT stored_in FROM blobs WHERE digest = ?", (blob_file.digest,)).fetchone()
        return row is None or row[0] != _STORED_IN_FILE

    def remove_stray(self, blob_file: BlobFile) -> None:
        """Remove a file `is_stray` reported, while the caller's transaction still holds the write lock."""
        self.files.remove(None, fanout=blob_file.fanout, name=blob_file.name)

    def _read_file(self, digest: str) -> bytes:
        try:
            return self.files.read(digest)
        except FileNotFoundError as error:
            raise CorruptBlobError(
                f"Blob {digest} is missing: its file is gone.", digest=digest, missing=True
            ) from error
        except UnsafeBlobPathError as error:
            raise UnsafeBlobError(
                f"Blob {digest} is not a regular file inside the store (a symlink?); refusing to read it. Nothing "
                f"casstore wrote is there: remove the link (the file blobs/{digest[:2]}/{digest[2:]}.zst or the folder "
                f"blobs/{digest[:2]} itself), and the next write of that content stores it again.",
                digest=digest,
            ) from error
        except OSError as error:
            raise CorruptBlobError(f"Blob {digest} cannot be read: {error}.", digest=digest) from error

    def _compressor(self) -> zstandard.ZstdCompressor:
        compressor: zstandard.ZstdCompressor | None = getattr(self._contexts, "compressor", None)
        if compressor is None:
            compressor = zstandard.ZstdCompressor(
                level=self.compression_level, write_checksum=True, write_content_size=True
            )
            self._contexts.compressor = compressor
        return compressor

    def _decompressor(self) -> zstandard.ZstdDecompressor:
        decompressor: zstandard.ZstdDecompressor | None = getattr(self._contexts, "decompressor", None)
        if decompressor is None:
            decompressor = zstandard.ZstdDecompressor()
            self._contexts.decompressor = decompressor
        return decompressor
