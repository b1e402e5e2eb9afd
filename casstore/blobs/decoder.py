"""
Reading a blob: `BlobDecoder` turns a `BlobLocation` into its verified content, whatever the frame's encoding and
wherever the frame is (inside the index, or in the backend).

A learned frame needs another blob first, its trained dictionary or its delta base; the decoder resolves that chain
(at most `MAX_CHAIN` links: more means a damaged index), verifying each link like any blob, and keeps what it verified
in `VerifiedContent` for the next read or write. Every frame ends in `FrameCodec.decode`, which checks the content's
digest: a wrong or damaged link can make a blob fail to read, never read as other bytes.
"""

import sqlite3
from collections.abc import Callable
from contextlib import AbstractContextManager

from casstore.blobs.backend import BlobBackend
from casstore.blobs.files import UnsafeBlobPathError
from casstore.blobs.frames import DELTA, DICTIONARY, FrameCodec, FrameDictionary
from casstore.blobs.learning import DICTIONARY_MAX_SIZE
from casstore.blobs.lookup import BlobLocation, BlobLookup
from casstore.blobs.memory import VerifiedContent
from casstore.errors import CorruptBlobError, StorageError, UnsafeBlobError
from casstore.references import content_digest

# How many blobs a read may go through to decode one (a delta's base, a dictionary): more means a damaged index.
MAX_CHAIN = 8


class BlobDecoder:
    """Blobs' content from their frames, verified, with the dictionaries and bases learned frames need."""

    def __init__(
        self,
        *,
        files: BlobBackend,
        codec: FrameCodec,
        file_access: AbstractContextManager[object],
        reading: Callable[[], AbstractContextManager[sqlite3.Connection]] | None,
        verified: VerifiedContent,
        lookup: BlobLookup,
        digest_key: Callable[[str | None], bytes | None] | None = None,
    ) -> None:
        """
        :param files: Where blobs too large for the index are kept.
        :param codec: How frames are checked and decoded.
        :param file_access: Held while a blob file is read (see `BlobStore`).
        :param reading: Opens the index for a question outside any transaction, to find what a learned frame needs;
            without it only plain frames can be read.
        :param verified: Where verified dictionaries and bases are kept.
        :param lookup: Finds the blob a learned frame needs.
        :param digest_key: The key a blob's digest is keyed with, from the namespace its row records (the store's
            dedup scope, `casstore.index.scope`); without it every digest is a plain BLAKE3 digest.
        """
        self.digest_key = digest_key or _plain_digests
        self._files = files
        self._codec = codec
        self._file_access = file_access
        self._reading = reading
        self._verified = verified
        self._trained = verified.trained
        self._cache = verified.cache
        self._lookup = lookup

    def index(self) -> AbstractContextManager[sqlite3.Connection]:
        """:returns: The index, for a question outside any transaction."""
        if self._reading is None:
            raise CorruptBlobError("This blob layer cannot read learned frames: it was given no index to read.")
        return self._reading()

    def load(self, location: BlobLocation, *, guarded: bool = True, fresh: bool = False) -> bytes:
        """
        Read, decompress and verify a blob: the slow part of a read, to run without holding the connection.

        :param location: What `locate` returned.
        :param guarded: Take the file guard to read a blob file; False when the caller holds it already.
        :param fresh: Read the dictionary or base a learned frame needs from where it is stored, not from the cache of
            verified ones (as `verify` does, so that a damaged one is reported as damage of every blob that needs it).
        :returns: The content bytes, whose BLAKE3 digest was checked to be `location.digest`.
        :raises CorruptBlobError: If the blob file is missing (`missing`) or unsafe (`UnsafeBlobError`), or the frame
            is truncated, undecodable, of the wrong size, or decodes to content with another digest; for a learned
            frame, also if the dictionary or base it needs is missing or damaged (`missing` if it is gone).
        """
        return self._load(location, guarded=guarded, chain=0, fresh=fresh)

    def _load(self, location: BlobLocation, *, guarded: bool, chain: int, fresh: bool = False) -> bytes:
        if location.damage is not None:
            raise CorruptBlobError(location.damage, digest=location.digest)
        # A delta's base not in memory that `locate_readable` found on the read's connection is read from there,
        # verified like any blob (hashing it costs a fraction of decoding it) and kept, so that the next read or write
        # through the same base decodes one frame, not two.
        needed = None
        if location.encoding is not None:
            # Most learned frames need a trained dictionary or a base already in memory: found here without the calls
            # and checks of `_dependency` (0.6 us of a 23 us read on the medium trace, a fifth of what a dictionary
            # read cost over a plain one).
            if not fresh and location.needs is not None:
                if location.encoding == DICTIONARY:
                    needed = self._trained.get(location.needs)
                else:
                    cached = self._cache.get(DELTA, location.needs)
                    needed = cached if isinstance(cached, FrameDictionary) else None
            if needed is None:
                needed = self._dependency(location, chain=chain, fresh=fresh, guarded=guarded)
        frame = self._frame(location, guarded=guarded)
        key = None if location.namespace is None else self.digest_key(location.namespace)
        return self._codec.decode(location.digest, location.size, frame, dictionary=needed, key=key)

    def _frame(self, location: BlobLocation, *, guarded: bool) -> bytes:
        if location.frame is not None:
            return location.frame
        if guarded:
            with self._file_access:
                return self._read_file(location.digest)
        return self._read_file(location.digest)

    def _dependency(self, location: BlobLocation, *, chain: int, fresh: bool, guarded: bool) -> FrameDictionary:
        digest, encoding, needs = location.digest, location.encoding, location.needs
        what = "dictionary" if encoding == DICTIONARY else "base"
        if encoding not in (DICTIONARY, DELTA) or needs is None:
            raise CorruptBlobError(
                f"Blob {digest} is a {encoding} frame whose {what} has no row in the index: it cannot be decoded "
                "(the index is damaged).",
                digest=digest,
            )
        try:
            needed = self.needed(
                needs, encoding, chain=chain + 1, fresh=fresh, guarded=guarded, location=location.needed
            )
        except CorruptBlobError as error:
            raise _needs_damaged(location, error) from error
        assert needed is not None
        return needed

    def _read_file(self, digest: str) -> bytes:
        try:
            return self._files.read(digest)
        except FileNotFoundError as error:
            raise CorruptBlobError(
                f"Blob {digest} is missing: its {self._files.stored_in} is gone.", digest=digest, missing=True
            ) from error
        except StorageError:
            raise  # the object store failed: not the blob
        except ValueError as error:  # its digest, damaged by hand in the index, names no file or object
            raise CorruptBlobError(
                f"Blob {digest!r} cannot be read: {error} The index is damaged.", digest=digest
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

    def needed(
        self,
        digest: str,
        encoding: str,
        *,
        chain: int,
        quiet: bool = False,
        fresh: bool = False,
        guarded: bool = True,
        location: BlobLocation | None = None,
    ) -> FrameDictionary | None:
        """
        :param encoding: `dictionary` for a trained dictionary, `delta` for a base.
        :param chain: How many links of a chain lead here (more than `MAX_CHAIN`: the index is damaged).
        :param location: Where it is, if the caller's statement found that already (else it is looked up).
        :returns: The dictionary or base `digest` as a `FrameDictionary`, from the cache (unless `fresh`) or read and
            verified.
        :raises CorruptBlobError: If it cannot be read (unless `quiet`: then None).
        """
        if encoding == DICTIONARY and not fresh:
            trained = self._trained.get(digest)
            if trained is not None:
                return trained
        cached = None if fresh else self._cache.get(encoding, digest)
        if isinstance(cached, FrameDictionary):
            return cached
        level = self._codec.compression_level
        try:
            if isinstance(cached, bytes):
                content = cached
            else:
                if chain > MAX_CHAIN:
                    raise CorruptBlobError(
                        f"Blob {digest} is reached through more than {MAX_CHAIN} bases or dictionaries: the index's "
                        "rows are damaged (a cycle of bases?).",
                        digest=digest,
                    )
                if encoding == DICTIONARY:
                    content = self.dictionary_bytes(digest)
                else:
                    if location is None:
                        with self.index() as connection:
                            location = self._lookup.locate(connection, digest)
                    content = self._load(location, guarded=guarded, chain=chain, fresh=fresh)
            if encoding == DICTIONARY:
                needed = FrameDictionary.trained(digest, content, level=level, source_size=DICTIONARY_MAX_SIZE)
            else:
                # Content a write left in the cache is shared with what the learner keeps of it (a sample): framing
                # it would hold it twice (10 MB more at the peak of the scale trace). Content decoded here is not.
                needed = FrameDictionary.base(digest, content, frame=not isinstance(cached, bytes))
        except (CorruptBlobError, StorageError):
            if quiet:
                return None
            raise
        if encoding == DICTIONARY:
            self._verified.keep_trained(needed)
            return needed
        # Kept, so that the next read or write through it does not load it again: a base is its content once, in the
        # frame its deltas' chains decode first (zstd copies it only into a compressor, which `FrameCodec` bounds).
        self._cache.replace(encoding, digest, needed, len(content))
        return needed

    def dictionary_bytes(self, digest: str) -> bytes:
        """
        :returns: The trained dictionary `digest`'s bytes, checked against its digest.
        :raises CorruptBlobError: If it is damaged, or gone (`missing`).
        """
        with self.index() as connection:
            row = connection.execute("SELECT data FROM dictionaries WHERE digest = ?", (digest,)).fetchone()
        if row is None:
            raise CorruptBlobError(f"Dictionary {digest} is missing from the index.", digest=digest, missing=True)
        data = row[0]
        if not isinstance(data, bytes):
            # Damaged by hand (`UPDATE dictionaries SET data = 'text'`): SQLite stores any type a column is given.
            raise CorruptBlobError(
                f"Dictionary {digest} is damaged: its data in the table dictionaries is {type(data).__name__}, "
                "not bytes.",
                digest=digest,
            )
        if content_digest(data) != digest:
            raise CorruptBlobError(
                f"Dictionary {digest} is damaged: its bytes in the table dictionaries do not have its digest.",
                digest=digest,
            )
        return data

    def check_dictionary(self, digest: str) -> None:
        """
        Read a trained dictionary from the index and check its digest.

        :raises CorruptBlobError: If it is damaged, or gone (`missing`).
        """
        self.dictionary_bytes(digest)

    def dictionary(self, digest: str) -> FrameDictionary | None:
        """:returns: The trained dictionary `digest`, read and verified (or cached); None if it cannot be read."""
        return self.needed(digest, DICTIONARY, chain=1, quiet=True, guarded=False)


def _needs_damaged(location: BlobLocation, error: CorruptBlobError) -> CorruptBlobError:
    what = "dictionary" if location.encoding == DICTIONARY else "base"
    return CorruptBlobError(
        f"Blob {location.digest} needs its {what} {location.needs}, which cannot be read: {error}",
        digest=location.digest,
        missing=error.missing,
    )


def _plain_digests(_namespace: str | None) -> bytes | None:
    return None
