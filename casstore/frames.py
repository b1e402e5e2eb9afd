"""
The encoding of a blob: one zstd frame that carries its content size and a checksum, and the content's BLAKE3 digest.

`FrameCodec.encode` compresses; `FrameCodec.decode` decompresses and verifies, so nothing that decodes here can return
bytes other than the ones whose digest was asked for. Every read of every blob, whatever layer or backend it comes
from, ends in `decode`.

A frame is one of three encodings (docs/compression.md):

- `plain`: a zstd frame that needs nothing else;
- `dictionary`: a zstd frame compressed with a trained zstd dictionary (`FrameDictionary.trained`), whose frame header
  carries the dictionary's id; the dictionary is itself a blob;
- `delta`: a zstd frame compressed with an earlier blob's content as a raw-content dictionary
  (`FrameDictionary.base`), the way `zstd --patch-from` does it.

Whichever it is, `decode` checks the content's BLAKE3 digest at the end: a wrong or damaged dictionary or base can make
a frame fail to decode, never decode to other bytes unnoticed.
"""

import threading
from collections import OrderedDict
from dataclasses import dataclass, field

import blake3
import zstandard

from casstore.errors import CorruptBlobError

# Above this size, BLAKE3 hashes with several threads.
_PARALLEL_HASH_BYTES = 4 * 1024 * 1024
# Compressors and decompressors bound to a trained dictionary, kept per thread: making one loads the dictionary.
_BOUND_CONTEXTS = 16
# Those bound to a base: a decompressor takes about 96 KB, and making one costs more than decoding a small delta with
# it; a base's compressor holds tables sized for the base. A base's compressor is kept longer, as the next version of
# its result is compressed against it again (loading a base into a new one costs several times as much as compressing
# a version with it): on the medium trace, 16 of them find it for 53% of the deltas tried, 4 38%.
_BOUND_DELTA_CONTEXTS = 16
_BOUND_DELTA_COMPRESSORS = 16
_BOUND_DELTA_BYTES = 4 * 1024 * 1024
# What a trained dictionary's tables are sized for by default: the largest result compressed with one
# (`casstore.learning.DICTIONARY_MAX_SIZE`).
TRAINED_SOURCE_SIZE = 16 * 1024
# Deltas are compressed at level 1 unless a level above the default (3) was asked for: a delta's matches are long, which
# level 1 finds as well (on the medium trace its deltas took 0.5% fewer bytes than at 3), and loading a base into its
# tables costs less.
_DELTA_LEVEL = 1
_DEFAULT_LEVEL = 3

PLAIN = "plain"
DICTIONARY = "dictionary"
DELTA = "delta"
ENCODINGS = (PLAIN, DICTIONARY, DELTA)


@dataclass(frozen=True, slots=True, eq=False)
class FrameDictionary:
    """
    What a `dictionary` or `delta` frame is compressed with: the verified content of the blob `digest`, as zstd
    takes it (a trained dictionary, or raw content).
    """

    digest: str
    encoding: str
    zstd: zstandard.ZstdCompressionDict
    parameters: zstandard.ZstdCompressionParameters | None = None
    """A trained dictionary's compression parameters, as its tables were computed for them."""
    # A trained dictionary's zstd contexts, per thread, made once: they live as long as the dictionary object.
    contexts: threading.local = field(default_factory=threading.local, init=False)

    @classmethod
    def trained(
        cls, digest: str, content: bytes, *, level: int = 3, source_size: int = TRAINED_SOURCE_SIZE
    ) -> "FrameDictionary":
        """
        :param digest: The dictionary blob's digest (`content_digest(content)`).
        :param content: A zstd dictionary as `zstandard.train_dictionary` makes it.
        :param level: The level frames are compressed at with it: its tables are computed once, for that level
            (without them, zstd would load the dictionary again for every frame).
        :param source_size: The largest content compressed with it: its tables are sized for that much (and the
            dictionary) rather than for the level's window of megabytes, which a small frame pays for in cache misses.
        :raises CorruptBlobError: If `content` is not a zstd dictionary.
        """
        try:
            dictionary = zstandard.ZstdCompressionDict(content, dict_type=zstandard.DICT_TYPE_FULLDICT)
            parameters = zstandard.ZstdCompressionParameters.from_level(
                level, source_size=source_size, dict_size=len(content), write_checksum=1, write_content_size=1
            )
            dictionary.precompute_compress(compression_params=parameters)
        except zstandard.ZstdError as error:  # pragma: no cover - content whose digest matched is what was trained
            raise CorruptBlobError(f"Blob {digest} is not a zstd dictionary ({error}).", digest=digest) from error
        return cls(digest, DICTIONARY, dictionary, parameters)

    @classmethod
    def base(cls, digest: str, content: bytes) -> "FrameDictionary":
        """:param content: The base blob's content (checked to have `digest`), used as a raw-content dictionary."""
        raw = zstandard.ZstdCompressionDict(content, dict_type=zstandard.DICT_TYPE_RAWCONTENT)
        return cls(digest, DELTA, raw)


def content_digest(data: bytes) -> str:
    """
    :param data: The content bytes.
    :returns: The 64-hex BLAKE3 digest of `data`.
    """
    if len(data) >= _PARALLEL_HASH_BYTES:
        return blake3.blake3(data, max_threads=blake3.blake3.AUTO).hexdigest()
    return blake3.blake3(data).hexdigest()


class FrameCodec:
    """zstd frames at one compression level; safe to share between threads (each gets its own zstd contexts)."""

    def __init__(self, *, compression_level: int) -> None:
        """:param compression_level: The zstd level, 1 to 22."""
        self.compression_level = compression_level
        # zstd contexts are not thread-safe, and making one costs more than compressing a small result.
        self._contexts = threading.local()

    def encode(self, data: bytes, *, dictionary: FrameDictionary | None = None) -> bytes:
        """
        :param dictionary: Compress with this trained dictionary or base (a `dictionary` or `delta` frame).
        :returns: One zstd frame holding `data`, with its content size and a checksum.
        """
        if dictionary is not None:
            if dictionary.encoding == DICTIONARY:
                bound = getattr(dictionary.contexts, "compressor", None)
                if bound is None:
                    bound = dictionary.contexts.compressor = self._compressor_for(dictionary)
                return bound.compress(data)
            return self._bound(dictionary, compressing=True).compress(data)  # type: ignore[union-attr]
        compressor: zstandard.ZstdCompressor | None = getattr(self._contexts, "compressor", None)
        if compressor is None:
            compressor = zstandard.ZstdCompressor(
                level=self.compression_level, write_checksum=True, write_content_size=True
            )
            self._contexts.compressor = compressor
        return compressor.compress(data)

    def _bound(
        self, dictionary: FrameDictionary, *, compressing: bool
    ) -> zstandard.ZstdCompressor | zstandard.ZstdDecompressor:
        # Contexts bound to a dictionary or base are kept per thread, the most recently used: making one costs far more
        # than a small frame (allocating and filling zstd's tables), and a base is used again by each later version
        # of its result, a dictionary by every small result of its tool.
        delta = dictionary.encoding == DELTA
        name = ("delta_" if delta else "") + ("compressors" if compressing else "decompressors")  # deltas only now
        bound: OrderedDict[str, zstandard.ZstdCompressor | zstandard.ZstdDecompressor] | None = getattr(
            self._contexts, name, None
        )
        if bound is None:
            bound = OrderedDict()
            setattr(self._contexts, name, bound)
        context = bound.get(dictionary.digest)
        if context is None:
            if compressing:
                context = self._compressor_for(dictionary)
            else:
                context = zstandard.ZstdDecompressor(dict_data=dictionary.zstd)
            bound[dictionary.digest] = context
            if delta and compressing:
                # Bounded by the memory their tables take too (about 17 bytes per byte of base, plus 100 KB).
                while len(bound) > _BOUND_DELTA_COMPRESSORS or (
                    len(bound) > 1 and sum(kept.memory_size() for kept in bound.values()) > _BOUND_DELTA_BYTES
                ):
                    bound.popitem(last=False)
            else:
                while len(bound) > (_BOUND_DELTA_CONTEXTS if delta else _BOUND_CONTEXTS):
                    bound.popitem(last=False)
        else:
            bound.move_to_end(dictionary.digest)
        return context

    def _compressor_for(self, dictionary: FrameDictionary) -> zstandard.ZstdCompressor:
        if dictionary.encoding != DELTA:
            if dictionary.parameters is not None:
                return zstandard.ZstdCompressor(dict_data=dictionary.zstd, compression_params=dictionary.parameters)
            return zstandard.ZstdCompressor(
                level=self.compression_level, dict_data=dictionary.zstd, write_checksum=True, write_content_size=True
            )
        # The level's parameters, with zstd's tables sized for what the base holds rather than for the level's
        # window: a delta's matches are long, and tables sized for megabytes cost more to set up than a delta saves.
        size = len(dictionary.zstd.as_bytes())
        parameters = zstandard.ZstdCompressionParameters.from_level(
            _DELTA_LEVEL if self.compression_level <= _DEFAULT_LEVEL else self.compression_level,
            source_size=2 * size + 1,
            dict_size=size,
        )
        window_log = min(max(parameters.window_log, (2 * size).bit_length()), 27)
        return zstandard.ZstdCompressor(
            compression_params=zstandard.ZstdCompressionParameters(
                window_log=window_log,
                hash_log=min(parameters.hash_log, window_log),
                chain_log=min(parameters.chain_log, window_log),
                search_log=parameters.search_log,
                min_match=parameters.min_match,
                target_length=parameters.target_length,
                strategy=parameters.strategy,
                write_checksum=1,
                write_content_size=1,
                write_dict_id=0,
            ),
            dict_data=dictionary.zstd,
        )

    def decode(
        self,
        digest: str,
        size: int,
        frame: bytes,
        *,
        dictionary: FrameDictionary | None = None,
    ) -> bytes:
        """
        Decompress a frame and check that it holds exactly the content `digest` names.

        :param digest: The 64-hex BLAKE3 digest the content must have.
        :param size: The content's size as the index recorded it.
        :param frame: The stored frame.
        :param dictionary: The trained dictionary or base the frame was compressed with (its blob verified already).
        :returns: The content bytes.
        :raises CorruptBlobError: If the frame is not zstd, declares another size, does not decompress, or decodes to
            content with another digest.
        """
        try:
            declared = zstandard.frame_content_size(frame)
        except zstandard.ZstdError as error:
            raise CorruptBlobError(f"Blob {digest} is not a zstd frame ({error}).", digest=digest) from error
        if declared != size:
            raise CorruptBlobError(
                f"Blob {digest} declares {declared} bytes of content, but {size} were stored.", digest=digest
            )
        decompressor: zstandard.ZstdDecompressor | None
        if dictionary is not None and dictionary.encoding == DICTIONARY:
            decompressor = getattr(dictionary.contexts, "decompressor", None)
            if decompressor is None:
                decompressor = dictionary.contexts.decompressor = zstandard.ZstdDecompressor(dict_data=dictionary.zstd)
        elif dictionary is not None:
            decompressor = self._bound(dictionary, compressing=False)  # type: ignore[assignment]
        else:
            decompressor = getattr(self._contexts, "decompressor", None)
            if decompressor is None:
                decompressor = self._contexts.decompressor = zstandard.ZstdDecompressor()
        assert decompressor is not None
        try:
            data = decompressor.decompress(frame)
        except zstandard.ZstdError as error:
            raise CorruptBlobError(f"Blob {digest} does not decompress ({error}).", digest=digest) from error
        if len(data) != size or content_digest(data) != digest:
            raise CorruptBlobError(f"Blob {digest} decompresses to content with another digest.", digest=digest)
        return data
