"""
The blob layer: content stored once, by BLAKE3 digest, as verified zstd frames.

It answers "the content of this digest" whatever the blob's encoding and wherever it lives: a blob whose frame is at
most `inline_max` bytes lives inside `index.db` (table `blob_frames`: one SQLite row costs far less than creating a
file, and a small file would waste most of a disk block); a larger one is a file under `blobs/`. The `blobs` table
is this layer's catalog of both. Nothing above this layer knows which kind a blob is: a read gets an opaque
`BlobLocation` from `locate` and hands it back to `load`.

A blob's frame is plain zstd (`encoding` 'plain'), or learned from the store (docs/compression.md): compressed with its
tool's trained dictionary (`dictionary`, a row of `dictionaries` named by `dictionary_id`), or against an earlier
blob's content (`delta`, on the blob `base_id`). The blob's own row says which, so gc keeps what it needs and verify
checks it, and `load` reads that first and verifies it like any blob. Learned frames are kept in the index only, never
in a file or object: the frame and the row that says how to decode it then change together, in one transaction,
whatever concurrent writers of the same content do. The content cache (`_ContentCache`) keeps recently stored or read
dictionaries and bases, verified.

Methods that take a `UnitOfWork` run inside the caller's write transaction, so a blob and the history row that
references it commit together; what they learn (that a blob is stored) is published by the transaction once it
commits. The expensive parts of storing new content (compressing, writing a file) happen in `stage`, outside any
transaction, so a writer holds SQLite's write lock only for a few row operations.
"""

import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import Protocol

from casstore import forks
from casstore.blobs.files import BlobFile, UnsafeBlobPathError
from casstore.blobs.frames import DELTA, DICTIONARY, PLAIN, FrameCodec, FrameDictionary
from casstore.blobs.hints import LAST_SEEN_RESOLUTION, BlobHints
from casstore.blobs.learning import DELTA_KEEP_BELOW, DICTIONARY_MAX_SIZE, Learner, scoped_group, tool_of
from casstore.errors import CorruptBlobError, ObjectSizeMismatchError, StorageError, UnsafeBlobError
from casstore.index.database import NOW_SQL, SHIFTED_NOW_SQL, UnitOfWork, ago
from casstore.references import content_digest, reference_kind

_STORED_IN_INDEX = "index"
# `blobs.encoding` is PLAIN, DICTIONARY or DELTA; above this layer a plain frame's encoding is None.

# Where a blob is and how to decode it: its row, its frame if kept in the index, and the digest of what a learned
# frame needs (its dictionary's, or its base's).
_LOCATION = (
    "b.size, b.stored_in, f.frame, NULLIF(b.encoding, 'plain'), coalesce(k.digest, n.digest) FROM blobs b "
    "LEFT JOIN blob_frames f ON f.blob_id = b.id LEFT JOIN dictionaries k ON k.id = b.dictionary_id "
    "LEFT JOIN blobs n ON n.id = b.base_id"
)
# The same with the blob's own `namespace` last: under `namespace` dedup scope, whose key its digest is keyed with.
_LOCATION_WITH_NAMESPACE = _LOCATION.replace(" FROM blobs b", ", b.namespace FROM blobs b")
# A read: whether the reference is visible in its namespace (a `writes` row names it) and where its blob is, in one
# statement, so a read sees both in one state of the index.
_READABLE_SQL = (
    f"SELECT {_LOCATION_WITH_NAMESPACE} WHERE b.digest = ? "
    "AND EXISTS (SELECT 1 FROM writes w WHERE w.digest = b.digest AND w.namespace = ? AND w.kind = ? "
    "AND w.extension = ?)"
)
# Asked only when a read found nothing: whether the reference is visible all the same, its blob row missing (a damaged
# index).
_VISIBLE_SQL = "SELECT 1 FROM writes WHERE digest = ? AND namespace = ? AND kind = ? AND extension = ? LIMIT 1"
_LOCATE_SQL = f"SELECT {_LOCATION_WITH_NAMESPACE} WHERE b.digest = ?"
_ACTIVE_DICTIONARY_SQL = "SELECT digest, samples FROM dictionaries WHERE tool = ? AND active = 1"
_CONFIRM_AGO = ago(LAST_SEEN_RESOLUTION)
_RESOLUTION_SECONDS = LAST_SEEN_RESOLUTION.total_seconds()
# A blob is referenced while a write names it.
_REFERENCED = "SELECT 1 FROM writes w WHERE w.digest = blobs.digest"
# A blob gc may delete: no write names it, no kept blob is a delta on it, and it was not seen within the grace period
# (the parameter is the grace's `ago`).
_COLLECTABLE = (
    f"last_seen <= {SHIFTED_NOW_SQL} AND NOT EXISTS ({_REFERENCED}) "
    "AND NOT EXISTS (SELECT 1 FROM blobs d WHERE d.base_id = blobs.id)"
)
_COLUMNS = "digest, size, stored_size, stored_in, encoding, dictionary_id, base_id, first_seen, last_seen, namespace"
# A plain frame's row; a row already there is replaced (either layout holds the same content), keeping its id (a
# delta may be on it) and its first_seen.
_PUT_SQL = (
    f"INSERT INTO blobs ({_COLUMNS}) VALUES (?, ?, ?, ?, '{PLAIN}', NULL, NULL, {NOW_SQL}, {NOW_SQL}, ?) "
    "ON CONFLICT (digest) DO UPDATE SET last_seen = excluded.last_seen, stored_size = excluded.stored_size, "
    "stored_in = excluded.stored_in, encoding = excluded.encoding, dictionary_id = NULL, base_id = NULL RETURNING id"
)
# The same for a blob copied from another store, which keeps its times; a row already there keeps its own.
_IMPORT_SQL = (
    f"INSERT INTO blobs ({_COLUMNS}) VALUES (?, ?, ?, ?, '{PLAIN}', NULL, NULL, ?, ?, ?) "
    "ON CONFLICT (digest) DO UPDATE SET stored_size = excluded.stored_size, stored_in = excluded.stored_in, "
    "encoding = excluded.encoding, dictionary_id = NULL, base_id = NULL RETURNING id"
)
# A learned frame's row, only for content that has none yet (see `_needed_id`).
_PUT_LEARNED_SQL = (
    f"INSERT INTO blobs ({_COLUMNS}) VALUES (?, ?, ?, '{_STORED_IN_INDEX}', ?, ?, ?, {NOW_SQL}, {NOW_SQL}, ?) "
    "ON CONFLICT (digest) DO NOTHING RETURNING id"
)
_PUT_FRAME_SQL = (
    "INSERT INTO blob_frames (blob_id, frame) VALUES (?, ?) ON CONFLICT (blob_id) DO UPDATE SET frame = excluded.frame"
)
# Digests per statement when a question names many (SQLite allows 32,766 parameters; PostgreSQL 65,535).
_CHUNK = 500


# A delta of at most this share of its content's size is kept without comparing it with a plain frame (which would
# have to compress the content more than 20-fold to be smaller than the delta by DELTA_KEEP_BELOW).
_SURELY_SMALLER = 0.035
# A delta under this share of the plain frame estimated from its base is kept without making the plain frame: half of
# DELTA_KEEP_BELOW, so the estimate may be off by a factor of two (on the medium trace, 99% of estimates were within
# 1.8x, and no delta kept this way was above DELTA_KEEP_BELOW of its real plain frame).
_CLEARLY_BELOW = DELTA_KEEP_BELOW / 2
# How many blobs a read may go through to decode one (a delta's base, a dictionary): more means a damaged index.
_MAX_CHAIN = 8
# Trained dictionaries kept in memory, verified (each 16 KiB and its zstd contexts).
_TRAINED_KEPT = 64
# Bytes of verified dictionaries and bases kept in memory for the next write or read that needs them.
CONTENT_CACHE_BYTES = 8 * 1024 * 1024


class BlobBackend(Protocol):
    """
    Where blobs too large for the index are kept, by digest: a folder (`BlobDirectory`) or an object store
    (`ObjectBlobs`). Each runs the same contract tests (`tests/test_blob_backends.py`).
    """

    stored_in: str
    rows_imply_presence: bool

    def write(self, digest: str, frame: bytes) -> object: ...  # False: something was there and was left alone
    def replace(self, digest: str, frame: bytes) -> None: ...
    def read(self, digest: str) -> bytes: ...
    def exists(self, digest: str) -> bool: ...
    def remove(self, digest: str) -> None: ...
    def files(self) -> Iterator[BlobFile]: ...
    def remove_stray(self, blob_file: BlobFile) -> None: ...
    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class WaitingBlobs:
    """
    Blobs no reference is visible for that the grace period keeps: how many, their stored bytes, and the earliest
    time (UTC, as the index writes times) one of them becomes collectable, None when there are none.
    """

    count: int = 0
    stored_bytes: int = 0
    collectable_from: str | None = None


@dataclass(slots=True)
class StagedBlob:
    """
    Compressed content ready for `put`; a blob bound for a file has already been written there. Not frozen: one is
    made for every new result, and a frozen dataclass takes several times as long to make.
    """

    digest: str
    size: int
    frame: bytes
    in_index: bool
    encoding: str = PLAIN
    needs: str | None = None
    """The digest of the blob a `dictionary` or `delta` frame needs."""
    namespace: str | None = None
    """Under `namespace` dedup scope, the namespace whose key `digest` is keyed with."""


class LearnedFrameRefused(Exception):
    """
    Raised by `put`, inside the write transaction, for a learned frame it cannot record: the blob it needs is gone
    (a concurrent gc took it), or the content has a row already (a learned frame never replaces one, so a blob never
    comes to need itself). The caller rolls back and stages the content plain.
    """

    def __init__(self, digest: str) -> None:
        super().__init__(digest)
        self.digest = digest


@dataclass(slots=True)
class BlobLocation:
    """Where a blob is, as `locate` found it: opaque above this layer, which only hands it back to `load`."""

    digest: str
    size: int
    frame: bytes | None
    encoding: str | None = None
    needs: str | None = None
    needed: "BlobLocation | None" = None
    """Where the blob it needs is, when the read's look-up found that too (a delta's base not in memory)."""
    namespace: str | None = None
    """Under `namespace` dedup scope, the namespace whose key `digest` is keyed with (None: a plain digest)."""


class _ContentCache:
    """Verified content of dictionaries and bases by digest, least recently used dropped past `CONTENT_CACHE_BYTES`."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._bytes = 0
        self._items: OrderedDict[tuple[str, str], tuple[int, object]] = OrderedDict()
        self._lock = threading.Lock()
        self._generation = forks.generation

    def _after_fork(self) -> None:
        # The lock may have been held by a thread the child does not have; what the cache holds stays true.
        self._lock = threading.Lock()
        self._generation = forks.generation

    def get(self, kind: str, digest: str) -> object | None:
        if self._generation != forks.generation:
            self._after_fork()
        with self._lock:
            item = self._items.get((kind, digest))
            if item is None:
                return None
            self._items.move_to_end((kind, digest))
            return item[1]

    def put(self, kind: str, digest: str, value: object, size: int) -> None:
        if self._generation != forks.generation:
            self._after_fork()
        with self._lock:
            if (kind, digest) not in self._items:
                self._store(kind, digest, value, size)

    def discard(self, digest: str) -> None:
        """Forget `digest` under every kind (a blob gc deleted: it must be looked up, and found gone, again)."""
        if self._generation != forks.generation:
            self._after_fork()
        with self._lock:
            for kind in (DICTIONARY, DELTA):
                old = self._items.pop((kind, digest), None)
                if old is not None:
                    self._bytes -= old[0]

    def replace(self, kind: str, digest: str, value: object, size: int) -> None:
        if self._generation != forks.generation:
            self._after_fork()
        with self._lock:
            old = self._items.pop((kind, digest), None)
            if old is not None:
                self._bytes -= old[0]
            self._store(kind, digest, value, size)

    def _store(self, kind: str, digest: str, value: object, size: int) -> None:
        if size > self._limit // 4:
            return
        self._items[(kind, digest)] = (size, value)
        self._bytes += size
        while self._bytes > self._limit:
            _, (dropped, _) = self._items.popitem(last=False)
            self._bytes -= dropped


class BlobStore:
    """Blobs by digest: the `blobs` and `blob_frames` tables, and the blob directory."""

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
        self._digest_key = digest_key or _plain_digests
        self._files = files
        self._reading = reading
        self.learner = learner
        self._cache = _ContentCache(CONTENT_CACHE_BYTES)
        # Trained dictionaries by digest, verified: few, small, and asked on every read or write that uses one, so a
        # plain dict (no lock: a look-up and an assignment are atomic) in front of the cache.
        self._trained: dict[str, FrameDictionary] = {}
        self._codec = codec
        self._inline_max = inline_max
        self._file_access = file_access
        self._hints = BlobHints()
        # The hints' own methods, bound once: asked on every write.
        self.known = self._hints.known
        self.needs_confirmation = self._hints.needs_confirmation
        self._stored_elsewhere = files.stored_in
        # Whether a blob kept by `files` can vanish while its row stays: then only a look-up notices.
        self._can_vanish = not files.rows_imply_presence

    @property
    def rows_imply_presence(self) -> bool:
        """Whether a blob's row is proof that it is stored (true of blobs in the index and of objects)."""
        return not self._can_vanish

    def close(self) -> None:
        """Release the blob directory."""
        self._files.close()

    # Storing.

    def stage(
        self, digest: str, data: bytes, *, key: str | None = None, plain: bool = False, namespace: str | None = None
    ) -> StagedBlob:
        """
        Compress `data` and, if its frame is too large for the index, write it to its blob file.

        Runs outside any transaction. Writing a file that is already there replaces it with identical bytes.

        :param digest: `content_digest(data)`.
        :param data: The content bytes.
        :param key: The write's key, whose tool name picks the dictionary; with a learner and a key, the frame is the
            smallest of plain, `delta` against an earlier version, and `dictionary`, as `learning` decides.
        :param plain: Make a plain frame whatever the learner knows (`put` refused a learned one).
        :param namespace: Under `namespace` dedup scope, the namespace whose key `digest` is keyed with: the learned
            encodings then use only what that namespace stored (docs/dedup-scope.md).
        :returns: The staged blob, for `put`.
        """
        if self.learner is not None and key is not None and not plain:
            learned, frame = self._learned(digest, data, key, namespace)
            if learned is not None:
                return learned
        else:
            frame = self._codec.encode(data)
        in_index = len(frame) <= self._inline_max
        if not in_index:
            frame = self._keep_elsewhere(digest, len(data), frame, namespace)
        return StagedBlob(digest=digest, size=len(data), frame=frame, in_index=in_index, namespace=namespace)

    def _learned(self, digest: str, data: bytes, key: str, namespace: str | None) -> tuple[StagedBlob | None, bytes]:
        # The learned encodings' choice: a delta if a base is found and the delta is clearly smaller than the plain
        # frame, else the tool's dictionary if the result is small (a trained dictionary is not worse than none on the
        # kind of result it was trained on, so the plain frame is not made to compare); a learned frame must fit in
        # the index. Returns the learned blob, if any, else None and the plain frame.
        # Under `namespace` dedup scope a namespace's dictionaries (its tool groups) and bases (its anchors) are its
        # own: neither the size nor the time of a write depends on what another namespace stored.
        learner = self.learner
        assert learner is not None
        tool = scoped_group(namespace, tool_of(key))
        chosen: StagedBlob | None = None
        plain = b""
        depth = 0
        anchors = learner.anchors(data, namespace)
        candidate = learner.base_for(anchors)
        if candidate is not None and candidate.digest != digest and candidate.namespace == namespace:
            base = self._needed(candidate.digest, DELTA, chain=1, quiet=True, guarded=False)
            if base is not None:
                delta = self._codec.encode(data, dictionary=base)
                # A delta far below the estimated plain frame (the base's own frame, scaled to this content's size:
                # a near-copy compresses as its base does) is kept without making the plain frame to compare, as is
                # one this small against any plain frame of ordinary content; otherwise the plain frame is made.
                if len(delta) > _SURELY_SMALLER * len(data) and len(delta) >= _CLEARLY_BELOW * (
                    candidate.stored_size * len(data) / max(candidate.size, 1)
                ):
                    plain = self._codec.encode(data)
                if len(delta) <= self._inline_max and (not plain or len(delta) < DELTA_KEEP_BELOW * len(plain)):
                    chosen = StagedBlob(digest, len(data), delta, True, DELTA, candidate.digest, namespace)
                    depth = candidate.depth + 1
        if chosen is None and len(data) <= DICTIONARY_MAX_SIZE:
            dictionary = self._dictionary_for(tool)
            if dictionary is not None:
                frame = self._codec.encode(data, dictionary=dictionary)
                if len(frame) <= self._inline_max and (not plain or len(frame) < len(plain)):
                    chosen = StagedBlob(digest, len(data), frame, True, DICTIONARY, dictionary.digest, namespace)
        if chosen is None and not plain:
            plain = self._codec.encode(data)
        stored_size = len(plain) if chosen is None else len(chosen.frame)
        learner.stored(
            tool=tool,
            digest=digest,
            data=data,
            depth=depth,
            anchors=anchors,
            stored_size=stored_size,
            namespace=namespace,
        )
        if depth == 0 and anchors is not None:
            self._cache.put(DELTA, digest, data, len(data))  # the likeliest base of the next version
        return chosen, plain

    def _dictionary_for(self, tool: str) -> FrameDictionary | None:
        learner = self.learner
        assert learner is not None
        if not learner.knows(tool):
            # The first write of a tool in this repository object asks the index for the dictionary in use (another
            # process may have trained one).
            with self._index() as connection:
                row = connection.execute(_ACTIVE_DICTIONARY_SQL, (tool,)).fetchone()
            learner.adopt(tool, row[0] if row else None, samples=row[1] if row else 0)
        digest = learner.dictionary_of(tool)
        if digest is None:
            return None
        dictionary = self._needed(digest, DICTIONARY, chain=1, quiet=True, guarded=False)
        if dictionary is None:
            learner.adopt(tool, None)  # gone or damaged: plain frames until the next training
        return dictionary

    def _index(self) -> AbstractContextManager[sqlite3.Connection]:
        if self._reading is None:
            raise CorruptBlobError("This blob layer cannot read learned frames: it was given no index to read.")
        return self._reading()

    def _needed(
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
                if chain > _MAX_CHAIN:
                    raise CorruptBlobError(
                        f"Blob {digest} is reached through more than {_MAX_CHAIN} bases or dictionaries: the index's "
                        "rows are damaged (a cycle of bases?).",
                        digest=digest,
                    )
                if encoding == DICTIONARY:
                    content = self._dictionary_bytes(digest)
                else:
                    if location is None:
                        with self._index() as connection:
                            location = self.locate(connection, digest)
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
            if len(self._trained) >= _TRAINED_KEPT:
                self._trained.clear()
            self._trained[digest] = needed
            return needed
        # Kept, so that the next read or write through it does not load it again: a base is its content once, in the
        # frame its deltas' chains decode first (zstd copies it only into a compressor, which `FrameCodec` bounds).
        self._cache.replace(encoding, digest, needed, len(content))
        return needed

    def _dictionary_bytes(self, digest: str) -> bytes:
        """:returns: The trained dictionary `digest`'s bytes, checked against its digest."""
        with self._index() as connection:
            row = connection.execute("SELECT data FROM dictionaries WHERE digest = ?", (digest,)).fetchone()
        if row is None:
            raise CorruptBlobError(f"Dictionary {digest} is missing from the index.", digest=digest, missing=True)
        data = bytes(row[0])
        if content_digest(data) != digest:
            raise CorruptBlobError(
                f"Dictionary {digest} is damaged: its bytes in the table dictionaries do not have its digest.",
                digest=digest,
            )
        return data

    def record_dictionary(
        self,
        work: UnitOfWork,
        data: bytes,
        *,
        tool: str,
        samples: int,
        sample_bytes: int,
        trained_on: Sequence[str],
    ) -> str:
        """
        Store a trained dictionary and make it the one `tool`'s new writes use, inside the caller's write transaction;
        the one it replaces stays as long as a blob needs it (gc).

        :param samples: How many results the training covered (those held out to judge it included), and
            `sample_bytes` their bytes.
        :param trained_on: The digests of the results its bytes were trained on.
        :returns: Its digest.
        """
        digest = content_digest(data)
        connection = work.connection
        connection.execute("UPDATE dictionaries SET active = 0 WHERE tool = ? AND active = 1", (tool,))
        (dictionary_id,) = connection.execute(
            "INSERT INTO dictionaries (tool, digest, data, samples, sample_bytes, trained_at, active) "
            f"VALUES (?, ?, ?, ?, ?, {NOW_SQL}, 1) "
            "ON CONFLICT (digest) DO UPDATE SET active = 1, tool = excluded.tool RETURNING id",
            (tool, digest, data, samples, sample_bytes),
        ).fetchone()
        connection.executemany(
            "INSERT INTO dictionary_samples (dictionary_id, digest) VALUES (?, ?) ON CONFLICT DO NOTHING",
            [(dictionary_id, sample) for sample in sorted(set(trained_on))],
        )
        return digest

    def active_dictionary(self, connection: sqlite3.Connection, tool: str) -> tuple[str, int] | None:
        """:returns: The digest of the dictionary `tool`'s writes use, and how many results it was trained on."""
        row = connection.execute(_ACTIVE_DICTIONARY_SQL, (tool,)).fetchone()
        return None if row is None else (row[0], row[1])

    def dictionary(self, digest: str) -> FrameDictionary | None:
        """:returns: The trained dictionary `digest`, read and verified (or cached); None if it cannot be read."""
        return self._needed(digest, DICTIONARY, chain=1, quiet=True, guarded=False)

    def _keep_elsewhere(self, digest: str, size: int, frame: bytes, namespace: str | None) -> bytes:
        # A backend that writes only if absent may hold a leftover no row points at (a write that failed before its
        # commit, or another replica's in flight, perhaps at another compression level): it is used if it holds this
        # content, and replaced if it does not, so neither a damaged leftover nor another frame size stops a write.
        try:
            if self._files.write(digest, frame) is not False:
                return frame
        except ObjectSizeMismatchError:
            pass
        try:
            found = self._files.read(digest)
            self._codec.decode(digest, size, found, key=self._digest_key(namespace))
        except (FileNotFoundError, CorruptBlobError):
            self._files.replace(digest, frame)
            return frame
        return found

    def put(
        self,
        work: UnitOfWork,
        staged: StagedBlob,
        *,
        seen: tuple[str, str] | None = None,
        stored_under_lock: bool = False,
    ) -> None:
        """
        Record a staged blob, inside the caller's write transaction.

        :param seen: `(first_seen, last_seen)` to record instead of now, for a blob copied from another store; a row
            already there keeps its own.

        A file blob is checked to be in place first (and written again if a concurrent `gc` removed it), so the
        committed row never points at nothing. If the digest already has a row, the row is replaced by this one:
        either layout holds the same content, and this one was just checked to exist.

        :param stored_under_lock: The blob was staged inside this transaction, after its write lock was taken, to a
            backend whose rows imply presence (objects, removed only under gc's exclusive lock): it cannot have been
            removed since, and is not looked at again.
        """
        trusted = stored_under_lock and not self._can_vanish
        if not staged.in_index and not trusted and not self._files.exists(staged.digest):
            self._files.write(staged.digest, staged.frame)
        checked_at = self._hints.now()
        connection = work.connection
        stored_in = _STORED_IN_INDEX if staged.in_index else self._stored_elsewhere
        if staged.needs is not None and seen is None:
            if not staged.in_index:
                raise LearnedFrameRefused(staged.digest)  # never made: `stage` keeps learned frames in the index
            dictionary_id, base_id = self._needed_id(work, staged)
            row = connection.execute(
                _PUT_LEARNED_SQL,
                (
                    staged.digest,
                    staged.size,
                    len(staged.frame),
                    staged.encoding,
                    dictionary_id,
                    base_id,
                    staged.namespace,
                ),
            ).fetchone()
            if row is None:
                raise LearnedFrameRefused(staged.digest)
        else:
            row = connection.execute(
                _PUT_SQL if seen is None else _IMPORT_SQL,
                (staged.digest, staged.size, len(staged.frame), stored_in, *(seen or ()), staged.namespace),
            ).fetchone()
        (blob_id,) = row
        if staged.in_index:
            connection.execute(_PUT_FRAME_SQL, (blob_id, staged.frame))
        else:
            connection.execute("DELETE FROM blob_frames WHERE blob_id = ?", (blob_id,))
        stays = staged.in_index or not self._can_vanish
        work.on_commit(partial(self._hints.remember, staged.digest, current_at=checked_at, in_index=stays))

    def _needed_id(self, work: UnitOfWork, staged: StagedBlob) -> tuple[int | None, int | None]:
        """
        Check that what a learned frame needs is there, under the write lock.

        :returns: `(dictionary_id, base_id)` for the frame's row, one of them set.
        :raises LearnedFrameRefused: If it is gone (gc took it meanwhile): the write is then stored plain.
        """
        # Under the write lock: what is needed is there (gc deletes only under it, and never a needed blob), and
        # (`_PUT_LEARNED_SQL`, after) the content has no row yet. Every base thus points from a newer row to an older
        # one: no cycle can form.
        connection = work.connection
        needs = staged.needs or ""
        if staged.encoding == DICTIONARY:
            row = connection.execute("SELECT id FROM dictionaries WHERE digest = ?", (needs,)).fetchone()
            if row is None:
                self._forget_needed(needs)
                raise LearnedFrameRefused(staged.digest)
            return int(row[0]), None
        row = connection.execute("SELECT id, stored_in FROM blobs WHERE digest = ?", (needs,)).fetchone()
        if row is None:
            self._forget_needed(needs)
            raise LearnedFrameRefused(staged.digest)
        if row[1] != _STORED_IN_INDEX and self._can_vanish and not self._files.exists(needs):
            raise LearnedFrameRefused(staged.digest)
        return None, int(row[0])

    def _forget_needed(self, digest: str) -> None:
        # gc deleted it (a dictionary or base nothing needed): the next write looks it up and trains or finds anew.
        self._trained.pop(digest, None)
        self._cache.discard(digest)

    def confirm(self, work: UnitOfWork, digest: str) -> bool:
        """
        Make sure a blob is stored and mark it as just seen, inside the caller's write transaction, so `gc` leaves
        it alone.

        `last_seen` is rewritten only when it is more than `LAST_SEEN_RESOLUTION` old, so a burst of repeated writes
        costs one row update, not one each: it is kept to that resolution.

        :returns: True if the blob is stored; False if it is not (or its file has gone), and the caller must `stage`
            and `put` it.
        """
        checked_at = self._hints.now()
        connection = work.connection
        row = connection.execute(
            f"SELECT stored_in, last_seen < {SHIFTED_NOW_SQL} FROM blobs WHERE digest = ?", (_CONFIRM_AGO, digest)
        ).fetchone()
        if row is None:
            return False
        stored_in, stale = row
        in_index = stored_in == _STORED_IN_INDEX
        if not in_index and self._can_vanish and not self._files.exists(digest):
            return False
        if stale:
            connection.execute(f"UPDATE blobs SET last_seen = {NOW_SQL} WHERE digest = ?", (digest,))
        # Left alone, `last_seen` may already be up to a resolution old.
        current_at = checked_at if stale else checked_at - _RESOLUTION_SECONDS
        stays = in_index or not self._can_vanish
        work.on_commit(partial(self._hints.remember, digest, current_at=current_at, in_index=stays))
        return True

    def is_stored(self, work: UnitOfWork, digest: str) -> bool:
        """:returns: Whether the blob is stored (its row, and its file where one can vanish), changing nothing."""
        row = work.connection.execute("SELECT stored_in FROM blobs WHERE digest = ?", (digest,)).fetchone()
        if row is None:
            return False
        return row[0] == _STORED_IN_INDEX or not self._can_vanish or self._files.exists(digest)

    def exists(self, connection: sqlite3.Connection, digest: str) -> bool:
        """:returns: Whether a blob row exists for `digest` (its content is not checked; see `load`)."""
        return connection.execute("SELECT 1 FROM blobs WHERE digest = ?", (digest,)).fetchone() is not None

    # Reading.

    def locate_readable(
        self, connection: sqlite3.Connection, digest: str, namespace: str, reference: str
    ) -> BlobLocation | None:
        """
        `locate`, for a read of `reference` in `namespace`, in one statement that also asks whether a `writes` row of
        the namespace names it, so a read sees both in one consistent state of the index. This is the one place the
        blob layer asks about visibility (besides gc's question of what nothing references). Only when it finds
        nothing is a second question asked: whether the reference is visible without its blob row.

        :returns: None if the reference is not visible in `namespace`.
        :raises CorruptBlobError: If it is visible but the index has no row for its blob (`missing`).
        """
        kind = reference_kind(reference)
        row = connection.execute(_READABLE_SQL, (digest, namespace, *kind)).fetchone()
        if row is None:
            if connection.execute(_VISIBLE_SQL, (digest, namespace, *kind)).fetchone() is None:
                return None
            raise CorruptBlobError(f"Blob {digest} is missing from the index.", digest=digest, missing=True)
        size, stored_in, frame, encoding, needs, namespace = row
        if size is None:
            raise CorruptBlobError(f"Blob {digest} is missing from the index.", digest=digest, missing=True)
        needed = None
        if encoding == DELTA and needs is not None and self._cache.get(DELTA, needs) is None:
            # A delta's base not in memory is looked up on the same connection, in the same state of the index: a
            # dictionary is nearly always in memory once read, a base far less often.
            row = connection.execute(_LOCATE_SQL, (needs,)).fetchone()
            if row is not None:
                needed = BlobLocation(needs, row[0], _kept_frame(row[1], row[2]), row[3], row[4], namespace=row[5])
        return BlobLocation(digest, size, _kept_frame(stored_in, frame), encoding, needs, needed, namespace)

    def locate(self, connection: sqlite3.Connection, digest: str) -> BlobLocation:
        """
        Find where a blob is: the quick part of a read, to run while holding the connection.

        :raises CorruptBlobError: If the index has no row for `digest` (`missing`).
        """
        row = connection.execute(_LOCATE_SQL, (digest,)).fetchone()
        if row is None:
            raise CorruptBlobError(f"Blob {digest} is missing from the index.", digest=digest, missing=True)
        size, stored_in, frame, encoding, needs, namespace = row
        return BlobLocation(digest, size, _kept_frame(stored_in, frame), encoding, needs, namespace=namespace)

    def locate_many(self, connection: sqlite3.Connection, digests: Sequence[str]) -> dict[str, BlobLocation]:
        """
        `locate` for several blobs in one statement per 500 (a search's candidates).

        :returns: Where each of `digests` that has a row in the index is; a digest without one is left out (its read
            would be `missing`).
        """
        found: dict[str, BlobLocation] = {}
        listed = list(dict.fromkeys(digests))
        for start in range(0, len(listed), 500):
            chunk = listed[start : start + 500]
            marks = ", ".join("?" for _ in chunk)
            for digest, size, stored_in, frame, encoding, needs, namespace in connection.execute(
                f"SELECT b.digest, {_LOCATION_WITH_NAMESPACE} WHERE b.digest IN ({marks})", chunk
            ):
                found[digest] = BlobLocation(
                    digest, size, _kept_frame(stored_in, frame), encoding, needs, namespace=namespace
                )
        return found

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
        key = None if location.namespace is None else self._digest_key(location.namespace)
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
            needed = self._needed(
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
                f"Blob {digest} is missing: its {self._stored_elsewhere} is gone.", digest=digest, missing=True
            ) from error
        except StorageError:
            raise  # the object store failed: not the blob
        except UnsafeBlobPathError as error:
            raise UnsafeBlobError(
                f"Blob {digest} is not a regular file inside the store (a symlink?); refusing to read it. Nothing "
                f"casstore wrote is there: remove the link (the file blobs/{digest[:2]}/{digest[2:]}.zst or the folder "
                f"blobs/{digest[:2]} itself), and the next write of that content stores it again.",
                digest=digest,
            ) from error
        except OSError as error:
            raise CorruptBlobError(f"Blob {digest} cannot be read: {error}.", digest=digest) from error

    # Maintenance.

    def digests(self, connection: sqlite3.Connection) -> list[str]:
        """:returns: Every digest with a row, in order."""
        return [row[0] for row in connection.execute("SELECT digest FROM blobs ORDER BY digest")]

    def namespaces(self, connection: sqlite3.Connection) -> dict[str, str]:
        """:returns: The namespace of every blob whose row records one (its digest keyed with that namespace's key)."""
        rows = connection.execute("SELECT digest, namespace FROM blobs WHERE namespace IS NOT NULL")
        return {str(digest): str(namespace) for digest, namespace in rows}

    def dictionary_digests(self, connection: sqlite3.Connection) -> list[str]:
        """:returns: Every trained dictionary's digest, in order."""
        return [row[0] for row in connection.execute("SELECT digest FROM dictionaries ORDER BY digest")]

    def check_dictionary(self, digest: str) -> None:
        """
        Read a trained dictionary from the index and check its digest.

        :raises CorruptBlobError: If it is damaged, or gone (`missing`).
        """
        self._dictionary_bytes(digest)

    def seen_times(self, connection: sqlite3.Connection) -> dict[str, tuple[str, str]]:
        """:returns: Every blob's digest with its `(first_seen, last_seen)`."""
        rows = connection.execute("SELECT digest, first_seen, last_seen FROM blobs")
        return {row[0]: (row[1], row[2]) for row in rows}

    def collectable(self, connection: sqlite3.Connection, *, grace: timedelta) -> list[tuple[str, int]]:
        """:returns: `(digest, stored_size)` of every blob no reference is visible for and not seen within `grace`."""
        rows = connection.execute(
            f"SELECT digest, stored_size FROM blobs WHERE {_COLLECTABLE}", (_grace_parameter(grace),)
        )
        return [(row[0], row[1]) for row in rows]

    def waiting(
        self, connection: sqlite3.Connection, *, grace: timedelta, among: frozenset[str] | None = None
    ) -> WaitingBlobs:
        """
        :param among: Only these digests (None: every blob).
        :returns: The blobs no reference is visible for that `grace` keeps (seen within it): how many, their stored
            bytes, and when the first of them becomes collectable.
        """
        where = f"last_seen > {SHIFTED_NOW_SQL} AND NOT EXISTS ({_REFERENCED})"
        count = stored = 0
        earliest: str | None = None
        chunks = [None] if among is None else [sorted(among)[i : i + _CHUNK] for i in range(0, len(among), _CHUNK)]
        for chunk in chunks:
            condition, parameters = where, [_grace_parameter(grace)]
            if chunk is not None:
                condition += f" AND digest IN ({', '.join('?' * len(chunk))})"
                parameters.extend(chunk)
            row = connection.execute(
                f"SELECT count(*), CAST(coalesce(sum(stored_size), 0) AS BIGINT), min(last_seen) FROM blobs "
                f"WHERE {condition}",
                parameters,
            ).fetchone()
            count, stored = count + int(row[0]), stored + int(row[1])
            if row[2] is not None and (earliest is None or row[2] < earliest):
                earliest = row[2]
        return WaitingBlobs(
            count=count,
            stored_bytes=stored,
            collectable_from=None if earliest is None else _collectable_from(earliest, grace),
        )

    def delete_rows(self, work: UnitOfWork, digests: list[str]) -> int:
        """
        Delete these blobs' rows and frames, never their files or objects, inside the caller's transaction: for a
        dry run, which rolls it back, to see what the index would take after a collection.

        :returns: The stored bytes of those kept outside the index (what their files or objects take).
        """
        outside = 0
        for digest in digests:
            row = work.connection.execute(
                "DELETE FROM blobs WHERE digest = ? RETURNING id, stored_in, stored_size", (digest,)
            ).fetchone()
            if row is None:
                continue
            work.connection.execute("DELETE FROM blob_frames WHERE blob_id = ?", (row[0],))
            if row[1] == self._stored_elsewhere:
                outside += int(row[2])
        return outside

    def delete_if_collectable(self, work: UnitOfWork, digest: str, *, grace: timedelta) -> bool:
        """
        Delete a blob, inside the caller's exclusive write transaction, if it is still collectable under that lock.

        A blob file goes before the transaction commits, so a writer that reuses the digest after the commit always
        writes a new file; a crash before the commit leaves a row without a file, which `confirm` treats as absent.
        An object (whose row a writer trusts without looking) goes only after the commit, while the transaction's
        exclusive lock is still held: a crash in between leaves an object no row points at, which gc removes later,
        never a row without its object.

        :returns: Whether the blob was deleted.
        """
        connection = work.connection
        row = connection.execute(
            f"DELETE FROM blobs WHERE digest = ? AND {_COLLECTABLE} RETURNING id, stored_in",
            (digest, _grace_parameter(grace)),
        ).fetchone()
        if row is None:
            return False
        blob_id, stored_in = row
        connection.execute("DELETE FROM blob_frames WHERE blob_id = ?", (blob_id,))
        if stored_in == self._stored_elsewhere:
            if self._can_vanish:
                self._files.remove(digest)
            else:
                work.on_commit(partial(self._files.remove, digest))
        return True

    def unneeded_dictionaries(self, work: UnitOfWork) -> int:
        """
        Delete the dictionaries no blob uses that are retired, or whose samples are all deleted (their bytes hold
        fragments of those results), inside the caller's exclusive write transaction.

        :returns: How many were deleted.
        """
        rows = work.connection.execute(
            "DELETE FROM dictionaries WHERE NOT EXISTS (SELECT 1 FROM blobs b WHERE b.dictionary_id = dictionaries.id) "
            "AND (active = 0 OR NOT EXISTS (SELECT 1 FROM dictionary_samples s JOIN blobs b ON b.digest = s.digest "
            "WHERE s.dictionary_id = dictionaries.id)) RETURNING id, digest"
        ).fetchall()
        for dictionary_id, digest in rows:
            work.connection.execute("DELETE FROM dictionary_samples WHERE dictionary_id = ?", (dictionary_id,))
            work.on_commit(partial(self._forget_needed, digest))
        return len(rows)

    def kept_for_others(self, connection: sqlite3.Connection) -> tuple[int, int]:
        """
        :returns: How many blobs no write names are kept as the delta base of a kept blob, and how many dictionaries
            trained on results that are deleted are kept because a kept blob uses them: bytes of deleted results that
            stay while needed.
        """
        (bases,) = connection.execute(
            f"SELECT count(*) FROM blobs WHERE NOT EXISTS ({_REFERENCED}) "
            "AND EXISTS (SELECT 1 FROM blobs d WHERE d.base_id = blobs.id)"
        ).fetchone()
        (dictionaries,) = connection.execute(
            "SELECT count(*) FROM dictionaries k WHERE EXISTS (SELECT 1 FROM blobs b WHERE b.dictionary_id = k.id) "
            "AND EXISTS (SELECT 1 FROM dictionary_samples s WHERE s.dictionary_id = k.id "
            "AND NOT EXISTS (SELECT 1 FROM writes w WHERE w.digest = s.digest))"
        ).fetchone()
        return int(bases), int(dictionaries)

    def dependencies(self, connection: sqlite3.Connection, digests: Iterable[str]) -> set[str]:
        """
        :returns: The digests of every blob that a blob of `digests` needs to be read (its dictionary or base, what
            those need in turn, and so on), excluding `digests` themselves unless one of them needs another.
        """
        found: set[str] = set()
        frontier = sorted(set(digests))
        for _ in range(_MAX_CHAIN + 1):
            if not frontier:
                break
            needed: set[str] = set()
            for start in range(0, len(frontier), 500):
                part = frontier[start : start + 500]
                marks = ", ".join("?" * len(part))
                rows = connection.execute(
                    f"SELECT n.digest FROM blobs b JOIN blobs n ON n.id = b.base_id WHERE b.digest IN ({marks})", part
                )
                needed.update(row[0] for row in rows)
            frontier = sorted(needed - found)
            found |= needed
        return found

    def encodings(self, connection: sqlite3.Connection) -> dict[str, int]:
        """:returns: How many blobs have each encoding (`plain`, `dictionary`, `delta`), and `dictionaries` kept."""
        counts = {PLAIN: 0, DICTIONARY: 0, DELTA: 0}
        for encoding, count in connection.execute("SELECT encoding, count(*) FROM blobs GROUP BY encoding"):
            counts[encoding] = int(count)
        (dictionaries,) = connection.execute("SELECT count(*) FROM dictionaries").fetchone()
        counts["dictionaries"] = int(dictionaries)
        return counts

    def files(self) -> Iterator[BlobFile]:
        """Yield every file in the blob directory; `is_stray` tells, with the index, which have no row."""
        return self._files.files()

    def is_stray(self, connection: sqlite3.Connection, blob_file: BlobFile) -> bool:
        """:returns: Whether `blob_file` is a temporary file or a blob file that no row points at."""
        if blob_file.digest is None:
            return True
        row = connection.execute("SELECT stored_in FROM blobs WHERE digest = ?", (blob_file.digest,)).fetchone()
        return row is None or row[0] != self._stored_elsewhere

    def remove_stray(self, blob_file: BlobFile) -> None:
        """Remove a file `is_stray` reported, while the caller's transaction still holds the write lock."""
        self._files.remove_stray(blob_file)


def _kept_frame(stored_in: str, frame: bytes | None) -> bytes | None:
    # A blob kept in the index without its frame row is damage of that blob in the index: an empty frame fails to
    # decode as such (`CorruptBlobError`, not `missing`), where None would send the read looking for a file that
    # never was.
    if stored_in != _STORED_IN_INDEX:
        return None
    return b"" if frame is None else frame


def _needs_damaged(location: BlobLocation, error: CorruptBlobError) -> CorruptBlobError:
    what = "dictionary" if location.encoding == DICTIONARY else "base"
    return CorruptBlobError(
        f"Blob {location.digest} needs its {what} {location.needs}, which cannot be read: {error}",
        digest=location.digest,
        missing=error.missing,
    )


def _collectable_from(last_seen: str, grace: timedelta) -> str:
    # What the catalog's `collectable` asks, turned around: collectable once `last_seen` is `grace` old.
    when = datetime.fromisoformat(last_seen) + grace
    return when.isoformat(sep=" ", timespec="milliseconds")


def _grace_parameter(grace: timedelta) -> str:
    # Nothing is added to the grace period: no writer relies on it. A write proves its blob's row inside its own
    # transaction (the statement that appends a repeated write finds the reference through that row; any other write
    # confirms or stores the blob), and gc deletes only inside a transaction too, so with no grace period at all a
    # blob goes the moment nothing references it, and a writer that comes after stores it again.
    return ago(grace)


def _plain_digests(_namespace: str | None) -> bytes | None:
    return None
