"""
`BlobStore`: the blob layer as the repository sees it, content stored once by BLAKE3 digest as verified zstd frames.

It answers "the content of this digest" whatever the blob's encoding and wherever it lives: a blob whose frame is at
most `inline_max` bytes lives inside `index.db` (table `blob_frames`: one SQLite row costs far less than creating a
file, and a small file would waste most of a disk block); a larger one is in a `BlobBackend` (a file under `blobs/`,
or an object). The `blobs` table is this layer's catalog of both. Nothing above this layer knows which kind a blob is:
a read gets an opaque `BlobLocation` from `locate` and hands it back to `load`.

`BlobStore` only wires the layer's parts together and hands out their verbs; each part is a module of its own:

- `encoder.BlobEncoder`: `stage`, the choice of frame (plain, dictionary, delta) and the backend write, outside any
  transaction, so a writer holds SQLite's write lock only for a few row operations;
- `catalog.BlobCatalog`: `put`, `confirm` and the dictionaries' rows, inside the caller's write transaction;
- `lookup.BlobLookup` and `decoder.BlobDecoder`: `locate`, then `load`, which resolves a learned frame's chain and
  verifies every link;
- `collection.BlobCollection`: what gc and verify ask and delete;
- `memory.VerifiedContent` and `hints.BlobHints`: what this process keeps in memory between writes and reads.
"""

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager

from casstore.blobs.backend import BlobBackend
from casstore.blobs.catalog import BlobCatalog
from casstore.blobs.collection import BlobCollection
from casstore.blobs.decoder import BlobDecoder
from casstore.blobs.encoder import BlobEncoder
from casstore.blobs.files import BlobFile
from casstore.blobs.frames import FrameCodec
from casstore.blobs.hints import BlobHints
from casstore.blobs.learning import Learner
from casstore.blobs.lookup import BlobLookup
from casstore.blobs.memory import VerifiedContent


class BlobStore:
    """Blobs by digest: the `blobs` and `blob_frames` tables, and the backend for larger blobs."""

    def __init__(
        self,
        *,
        files: BlobBackend,
        codec: FrameCodec,
        inline_max: int,
        file_access: AbstractContextManager[object],
        reading: Callable[[], AbstractContextManager[sqlite3.Connection]] | None = None,
        learner: Learner | None = None,
        digest_key: Callable[[str | None], bytes | None] | None = None,
    ) -> None:
        """
        :param files: Where blobs too large for the index are kept.
        :param codec: How frames are made and checked.
        :param inline_max: Frames of at most this many bytes are stored in the index; `0` sends every blob to a file.
        :param file_access: Held while a blob file is read (the repository's guard, so that the directory is not
            closed meanwhile); a blob kept in the index needs no file and does not take it.
        :param reading: Opens the index for a question outside any transaction, for `load` to find the blob a learned
            frame needs; without it only plain frames can be read.
        :param learner: Store new content with learned encodings, from what it has seen (None: plain frames only).
        :param digest_key: The key a blob's digest is keyed with, from the namespace its row records (the store's
            `DedupScope.key_for`); without it every digest is a plain BLAKE3 digest.
        """
        self._files = files
        self._hints = BlobHints()
        self.learner = learner
        verified = VerifiedContent()
        lookup = BlobLookup(verified.cache)
        decoder = BlobDecoder(
            files=files,
            codec=codec,
            file_access=file_access,
            reading=reading,
            verified=verified,
            lookup=lookup,
            digest_key=digest_key,
        )
        encoder = BlobEncoder(
            files=files, codec=codec, inline_max=inline_max, learner=learner, decoder=decoder, cache=verified.cache
        )
        catalog = BlobCatalog(files=files, hints=self._hints, verified=verified)
        collection = BlobCollection(files=files, verified=verified)
        # The parts' verbs, bound once: a call costs what it cost when they were one class (writes and reads ask
        # several of them each).
        # Storing: `stage` outside any transaction, then `put` (or `confirm`, for content stored already) inside one.
        self.known = self._hints.known
        self.needs_confirmation = self._hints.needs_confirmation
        self.forget = self._hints.forget
        self.stage = encoder.stage
        self.put = catalog.put
        self.confirm = catalog.confirm
        self.is_stored = catalog.is_stored
        self.exists = catalog.exists
        self.needs_storing = catalog.needs_storing
        self.mark_lost = catalog.mark_lost
        self.record_dictionary = catalog.record_dictionary
        self.active_dictionary = catalog.active_dictionary
        # Reading: `locate` while holding the connection, then `load` without it.
        self.locate_readable = lookup.locate_readable
        self.locate = lookup.locate
        self.locate_many = lookup.locate_many
        self.load = decoder.load
        self.dictionary = decoder.dictionary
        self.check_dictionary = decoder.check_dictionary
        # Maintenance: gc's and verify's questions and deletions.
        self.digests = collection.digests
        self.dictionary_digests = collection.dictionary_digests
        self.seen_times = collection.seen_times
        self.namespaces = collection.namespaces
        self.collectable = collection.collectable
        self.waiting = collection.waiting
        self.delete_rows = collection.delete_rows
        self.delete_if_collectable = collection.delete_if_collectable
        self.unneeded_dictionaries = collection.unneeded_dictionaries
        self.kept_for_others = collection.kept_for_others
        self.dependencies = collection.dependencies
        self.encodings = collection.encodings
        self.is_stray = collection.is_stray

    @property
    def rows_imply_presence(self) -> bool:
        """Whether a blob's row is proof that it is stored (true of blobs in the index and of objects)."""
        return self._files.rows_imply_presence

    def files(self) -> Iterator[BlobFile]:
        """Yield every file in the backend; `is_stray` tells, with the index, which have no row."""
        return self._files.files()

    def remove_stray(self, blob_file: BlobFile) -> None:
        """Remove a file `is_stray` reported, while the caller's transaction still holds the write lock."""
        self._files.remove_stray(blob_file)

    def close(self) -> None:
        """Release the backend."""
        self._files.close()
