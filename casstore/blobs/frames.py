"""
The encoding of a blob: one zstd frame that carries its content size, and the content's BLAKE3 digest.

`FrameCodec.encode` compresses; `FrameCodec.decode` decompresses and verifies, so nothing that decodes here can return
bytes other than the ones whose digest was asked for. Every read of every blob, whatever layer or backend it comes
from, ends in `decode`.

A frame is one of three encodings (docs/compression.md):

- `plain`: a zstd frame that needs nothing else;
- `dictionary`: a zstd frame compressed with a trained zstd dictionary (`FrameDictionary.trained`); the dictionary is
  itself a blob, which the index names (the frame header leaves its id out: 4 bytes a frame);
- `delta`: a zstd frame compressed with an earlier blob's content as a raw-content dictionary
  (`FrameDictionary.base`), the way `zstd --patch-from` does it. It is decoded as the second frame of a
  content-dictionary chain whose first frame holds the base's content in raw blocks (`_raw_frame`), on a zstd context
  the thread keeps: making a context bound to the base would cost ten times as much as decoding a small delta.

Whichever it is, `decode` checks the content's BLAKE3 digest at the end: a wrong or damaged dictionary or base can make
a frame fail to decode, never decode to other bytes unnoticed.
"""

import struct
import threading
from collections import OrderedDict
from dataclasses import dataclass, field

import zstandard

from casstore.errors import CorruptBlobError
from casstore.references import content_digest

# Compressors bound to a base, kept per thread: one holds tables sized for its base, and the next version of its
# result is compressed against it again (loading a base into a new one costs several times as much as compressing a
# version with it): on the medium trace, 16 of them find it for 53% of the deltas tried, 4 38%.
_BOUND_DELTA_COMPRESSORS = 16
_BOUND_DELTA_BYTES = 4 * 1024 * 1024
# What a trained dictionary's tables are sized for by default: the largest result compressed with one
# (`casstore.blobs.learning.DICTIONARY_MAX_SIZE`).
TRAINED_SOURCE_SIZE = 16 * 1024
# Deltas are compressed at level 1 unless a level above the default (3) was asked for: a delta's matches are long, which
# level 1 finds as well (on the medium trace its deltas took 0.5% fewer bytes than at 3), and loading a base into its
# tables costs less.
_DELTA_LEVEL = 1
_DEFAULT_LEVEL = 3

# A trained dictionary's tables (hash and chain, 4 bytes an entry) at levels up to the default: every small result of
# its tool searches them, mostly out of the CPU's caches between two writes (a store keeps one set per tool: 12 on the
# medium trace). At 2^12 entries each (32 KiB in all, against the 384 KiB level 3 sizes them at), a dictionary frame
# took 15.6 us against 18.2 us at 2^14 to compress, with the caches flushed between frames, for 1.3% more bytes of
# dictionary frames; in four medium runs each, taking turns, the new-content write p50 went from 1.230x-1.272x of
# `learn=False` to 1.217x-1.249x, for 0.04 MB more `du` (docs/compression.md, "Smaller tables again").
_TRAINED_TABLE_LOG = 12

# New frames carry no checksum of zstd's own (XXH64, 4 bytes a frame: 41 KB of the medium trace's 10,232 frames):
# every decoded frame is checked against the content's BLAKE3 digest, which a checksum of zstd's could only repeat.
# Frames written with one, as casstore wrote them until then, decode as before (zstd checks theirs).
_NO_CHECKSUM = False

PLAIN = "plain"
DICTIONARY = "dictionary"
DELTA = "delta"
ENCODINGS = (PLAIN, DICTIONARY, DELTA)


@dataclass(frozen=True, slots=True, eq=False)
class FrameDictionary:
    """
    What a `dictionary` or `delta` frame is compressed with: the verified content of the blob `digest` (a trained
    dictionary, or a base's content).
    """

    digest: str
    encoding: str
    content: bytes | memoryview
    """The blob's content, checked to have `digest` (a base's is a view of `framed`, where it has one)."""
    zstd: zstandard.ZstdCompressionDict | None = None
    """A trained dictionary as zstd takes it, with its tables (None for a base)."""
    parameters: zstandard.ZstdCompressionParameters | None = None
    """A trained dictionary's compression parameters, as its tables were computed for them."""
    framed: bytes | None = None
    """A base of at most one raw block (128 KiB): its content as the frame a delta's chain decodes first, made once."""
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
                level, source_size=source_size, dict_size=len(content), write_checksum=0, write_content_size=1
            )
            if level <= _DEFAULT_LEVEL:
                parameters = _with_tables_at_most(parameters, _TRAINED_TABLE_LOG)
            dictionary.precompute_compress(compression_params=parameters)
        except zstandard.ZstdError as error:  # pragma: no cover - content whose digest matched is what was trained
            raise CorruptBlobError(f"Blob {digest} is not a zstd dictionary ({error}).", digest=digest) from error
        return cls(digest, DICTIONARY, content, dictionary, parameters)

    @classmethod
    def base(cls, digest: str, content: bytes, *, frame: bool = True) -> "FrameDictionary":
        """
        :param content: The base blob's content (checked to have `digest`), used as a raw-content dictionary. Up to
            one raw block, it is copied once into the frame every read of a delta against it decodes first, and kept
            only there: a cached base read again costs no copy of its content, and no more memory than its content.
            (Only where deltas are decoded as chains: python-zstandard's other backend takes dictionaries as bytes.)
        :param frame: False to keep `content` as it is, when something else holds it too (a copy would double it);
            each decode then frames it anew.
        """
        if not frame or len(content) > _RAW_BLOCK_MAX or not _CHAINS_LOAD_CONTENT:
            return cls(digest, DELTA, content)
        framed = _raw_frame(content)
        return cls(digest, DELTA, memoryview(framed)[len(framed) - len(content) :], framed=framed)


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
        :returns: One zstd frame holding `data`, with its content size (no checksum of zstd's: see `_NO_CHECKSUM`).
        """
        if dictionary is not None:
            if dictionary.encoding == DICTIONARY:
                bound = getattr(dictionary.contexts, "compressor", None)
                if bound is None:
                    bound = dictionary.contexts.compressor = self._compressor_for(dictionary)
                return bound.compress(data)
            return self._delta_compressor(dictionary).compress(data)
        compressor: zstandard.ZstdCompressor | None = getattr(self._contexts, "compressor", None)
        if compressor is None:
            compressor = zstandard.ZstdCompressor(
                level=self.compression_level, write_checksum=_NO_CHECKSUM, write_content_size=True
            )
            self._contexts.compressor = compressor
        return compressor.compress(data)

    def _delta_compressor(self, base: FrameDictionary) -> zstandard.ZstdCompressor:
        # Kept per thread, the most recently used: making one costs far more than compressing a small result with it
        # (allocating and filling zstd's tables), and a base is used again by each later version of its result.
        bound: OrderedDict[str, zstandard.ZstdCompressor] | None = getattr(self._contexts, "delta_compressors", None)
        if bound is None:
            bound = self._contexts.delta_compressors = OrderedDict()
        compressor = bound.get(base.digest)
        if compressor is not None:
            bound.move_to_end(base.digest)
            return compressor
        compressor = bound[base.digest] = self._compressor_for(base)
        # Bounded by the memory their tables take too (about 17 bytes per byte of base, plus 100 KB).
        while len(bound) > _BOUND_DELTA_COMPRESSORS or (
            len(bound) > 1 and sum(kept.memory_size() for kept in bound.values()) > _BOUND_DELTA_BYTES
        ):
            bound.popitem(last=False)
        return compressor

    def _compressor_for(self, dictionary: FrameDictionary) -> zstandard.ZstdCompressor:
        if dictionary.encoding != DELTA:
            if dictionary.parameters is not None:
                return zstandard.ZstdCompressor(dict_data=dictionary.zstd, compression_params=dictionary.parameters)
            return zstandard.ZstdCompressor(
                level=self.compression_level,
                dict_data=dictionary.zstd,
                write_checksum=_NO_CHECKSUM,
                write_content_size=True,
            )
        # The level's parameters, with zstd's tables sized for what the base holds rather than for the level's
        # window: a delta's matches are long, and tables sized for megabytes cost more to set up than a delta saves.
        size = len(dictionary.content)
        parameters = zstandard.ZstdCompressionParameters.from_level(
            _DELTA_LEVEL if self.compression_level <= _DEFAULT_LEVEL else self.compression_level,
            source_size=2 * size + 1,
            dict_size=size,
        )
        window_log = min(max(parameters.window_log, (2 * size).bit_length()), 27)
        return zstandard.ZstdCompressor(
            compression_params=_with_tables_at_most(parameters, window_log, window_log=window_log),
            dict_data=zstandard.ZstdCompressionDict(dictionary.content, dict_type=zstandard.DICT_TYPE_RAWCONTENT),
        )

    def decode(
        self,
        digest: str,
        size: int,
        frame: bytes,
        *,
        dictionary: FrameDictionary | None = None,
        key: bytes | None = None,
    ) -> bytes:
        """
        Decompress a frame and check that it holds exactly the content `digest` names.

        :param digest: The 64-hex BLAKE3 digest the content must have.
        :param size: The content's size as the index recorded it.
        :param frame: The stored frame.
        :param dictionary: The trained dictionary or base the frame was compressed with (its blob verified already).
        :param key: The key `digest` is keyed with (a namespace's, under `namespace` dedup scope); None: plain BLAKE3.
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
        try:
            if dictionary is not None and dictionary.encoding == DELTA:
                data = self._delta_decoded(frame, dictionary)
            else:
                # Bytes after the frame are damage too, though the frame alone would decode right.
                data = self._decompressor(dictionary).decompress(frame, allow_extra_data=False)
        except (zstandard.ZstdError, ValueError) as error:  # ValueError: a frame the chain's checks refuse
            raise CorruptBlobError(f"Blob {digest} does not decompress ({error}).", digest=digest) from error
        if len(data) != size or content_digest(data, key) != digest:
            raise CorruptBlobError(f"Blob {digest} decompresses to content with another digest.", digest=digest)
        return data

    def _decompressor(self, dictionary: FrameDictionary | None) -> zstandard.ZstdDecompressor:
        if dictionary is not None:
            decompressor: zstandard.ZstdDecompressor | None = getattr(dictionary.contexts, "decompressor", None)
            if decompressor is None:
                decompressor = dictionary.contexts.decompressor = zstandard.ZstdDecompressor(dict_data=dictionary.zstd)
            return decompressor
        decompressor = getattr(self._contexts, "decompressor", None)
        if decompressor is None:
            decompressor = self._contexts.decompressor = zstandard.ZstdDecompressor()
        return decompressor

    def _delta_decoded(self, frame: bytes, base: FrameDictionary) -> bytes:
        # A content-dictionary chain loads its first frame's output as the raw-content dictionary of the next, on one
        # context: no context is made for the base. Only the C backend's chain does (python-zstandard's CFFI one
        # decodes each frame on its own), so another backend binds a context to the base, as raw content.
        if _frame_length(frame) != len(frame):  # a chain decodes the frame and ignores what follows it
            raise ValueError("bytes follow the frame")
        if _CHAINS_LOAD_CONTENT:
            chains: zstandard.ZstdDecompressor | None = getattr(self._contexts, "chains", None)
            if chains is None:
                chains = self._contexts.chains = zstandard.ZstdDecompressor()
            framed = base.framed if base.framed is not None else _raw_frame(base.content)
            return chains.decompress_content_dict_chain([framed, frame])
        raw = zstandard.ZstdCompressionDict(base.content, dict_type=zstandard.DICT_TYPE_RAWCONTENT)
        return zstandard.ZstdDecompressor(dict_data=raw).decompress(frame)


# A zstd frame of raw blocks (RFC 8878, 3.1.1): the magic number; a header descriptor saying "single segment, an
# 8-byte content size, no checksum, no dictionary"; the content size; then blocks of at most 128 KiB, each a 3-byte
# header (last-block flag, type 0 = raw, size) and the bytes as they are.
_FRAME_MAGIC = b"\x28\xb5\x2f\xfd"
_SINGLE_SEGMENT_WITH_8_BYTE_SIZE = b"\xe0"
_RAW_BLOCK_MAX = 128 * 1024
_CHAINS_LOAD_CONTENT = zstandard.backend == "cext"


def _frame_length(frame: bytes) -> int:
    """:returns: The bytes of the zstd frame `frame` begins with (RFC 8878, 3.1.1): header, blocks, checksum."""
    position = zstandard.frame_header_size(frame)
    while True:
        if position + 3 > len(frame):
            raise ValueError("the frame is cut short")
        header = int.from_bytes(frame[position : position + 3], "little")
        position += 3 + (1 if (header >> 1) & 3 == 1 else header >> 3)  # an RLE block holds one byte
        if header & 1:  # the last block
            return position + (4 if frame[4] & 4 else 0)  # the content checksum, if the descriptor says so


def _raw_frame(content: bytes | memoryview) -> bytes:
    """:returns: A zstd frame that holds `content` uncompressed, in raw blocks (decoding it is a copy)."""
    header = _FRAME_MAGIC + _SINGLE_SEGMENT_WITH_8_BYTE_SIZE + struct.pack("<Q", len(content))
    if len(content) <= _RAW_BLOCK_MAX:
        return header + ((len(content) << 3) | 1).to_bytes(3, "little") + content
    parts: list[bytes | memoryview] = [header]
    for start in range(0, len(content), _RAW_BLOCK_MAX):
        block = content[start : start + _RAW_BLOCK_MAX]
        last = 1 if start + _RAW_BLOCK_MAX >= len(content) else 0
        parts += [((len(block) << 3) | last).to_bytes(3, "little"), block]
    return b"".join(parts)


def _with_tables_at_most(
    parameters: zstandard.ZstdCompressionParameters, table_log: int, *, window_log: int | None = None
) -> zstandard.ZstdCompressionParameters:
    """
    :param window_log: The window to use instead of `parameters`' own.
    :returns: `parameters` with zstd's hash and chain tables of at most 2^`table_log` entries each, writing the content
        size, no checksum and no dictionary id.
    """
    return zstandard.ZstdCompressionParameters(
        window_log=parameters.window_log if window_log is None else window_log,
        hash_log=min(parameters.hash_log, table_log),
        chain_log=min(parameters.chain_log, table_log),
        search_log=parameters.search_log,
        min_match=parameters.min_match,
        target_length=parameters.target_length,
        strategy=parameters.strategy,
        write_checksum=int(_NO_CHECKSUM),
        write_content_size=1,
        write_dict_id=0,
    )
