"""
Storing new content, the expensive part: `BlobEncoder.stage` chooses a blob's frame (plain zstd, zstd with its tool's
trained dictionary, or a delta on an earlier blob, as `learning` suggests and the sizes decide) and writes a frame too
large for the index to the backend, outside any transaction. The `StagedBlob` it returns is recorded by
`catalog.BlobCatalog.put` inside the write's transaction.

Learned frames are kept in the index only, never in a file or object: the frame and the row that says how to decode
it then change together, in one transaction, whatever concurrent writers of the same content do.
"""

from dataclasses import dataclass

from casstore.blobs.backend import BlobBackend
from casstore.blobs.decoder import BlobDecoder
from casstore.blobs.frames import DELTA, DICTIONARY, PLAIN, FrameCodec, FrameDictionary
from casstore.blobs.groups import scoped_group, tool_of
from casstore.blobs.learning import DELTA_KEEP_BELOW, DICTIONARY_MAX_SIZE, Learner
from casstore.blobs.memory import ContentCache
from casstore.errors import CorruptBlobError, ObjectSizeMismatchError

ACTIVE_DICTIONARY_SQL = "SELECT digest, samples FROM dictionaries WHERE tool = ? AND active = 1"
# A delta of at most this share of its content's size is kept without comparing it with a plain frame (which would
# have to compress the content more than 20-fold to be smaller than the delta by DELTA_KEEP_BELOW).
_SURELY_SMALLER = 0.035
# A delta under this share of the plain frame estimated from its base is kept without making the plain frame: half of
# DELTA_KEEP_BELOW, so the estimate may be off by a factor of two (on the medium trace, 99% of estimates were within
# 1.8x, and no delta kept this way was above DELTA_KEEP_BELOW of its real plain frame).
_CLEARLY_BELOW = DELTA_KEEP_BELOW / 2


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


class BlobEncoder:
    """New content into frames: the choice of encoding, and the backend write of a frame too large for the index."""

    def __init__(
        self,
        *,
        files: BlobBackend,
        codec: FrameCodec,
        inline_max: int,
        learner: Learner | None,
        decoder: BlobDecoder,
        cache: ContentCache,
    ) -> None:
        """
        :param files: Where frames too large for the index are written.
        :param codec: How frames are made.
        :param inline_max: Frames of at most this many bytes are stored in the index; `0` sends every blob to a file.
        :param learner: Store new content with learned encodings, from what it has seen (None: plain frames only).
        :param decoder: Reads and verifies the dictionary or base a learned frame is made with.
        :param cache: Where a new result that may be the next version's base is kept.
        """
        self._files = files
        self._codec = codec
        self._inline_max = inline_max
        self.learner = learner
        self._decoder = decoder
        self._cache = cache

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
            base = self._decoder.needed(candidate.digest, DELTA, chain=1, quiet=True, guarded=False)
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
            with self._decoder.index() as connection:
                row = connection.execute(ACTIVE_DICTIONARY_SQL, (tool,)).fetchone()
            learner.adopt(tool, row[0] if row else None, samples=row[1] if row else 0)
        digest = learner.dictionary_of(tool)
        if digest is None:
            return None
        dictionary = self._decoder.needed(digest, DICTIONARY, chain=1, quiet=True, guarded=False)
        if dictionary is None:
            learner.adopt(tool, None)  # gone or damaged: plain frames until the next training
        return dictionary

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
            self._codec.decode(digest, size, found, key=self._decoder.digest_key(namespace))
        except (FileNotFoundError, CorruptBlobError):
            self._files.replace(digest, frame)
            return frame
        return found
