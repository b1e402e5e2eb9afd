"""
The encoding of a blob: one zstd frame that carries its content size and a checksum, and the content's BLAKE3 digest.

`FrameCodec.encode` compresses; `FrameCodec.decode` decompresses and verifies, so nothing that decodes here can return
bytes other than the ones whose digest was asked for. Every read of every blob, whatever layer or backend it comes
from, ends in `decode`.
"""

import threading

import blake3
import zstandard

from casstore.errors import CorruptBlobError

# Above this size, BLAKE3 hashes with several threads.
_PARALLEL_HASH_BYTES = 4 * 1024 * 1024


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

    def encode(self, data: bytes) -> bytes:
        """:returns: One zstd frame holding `data`, with its content size and a checksum."""
        compressor: zstandard.ZstdCompressor | None = getattr(self._contexts, "compressor", None)
        if compressor is None:
            compressor = zstandard.ZstdCompressor(
                level=self.compression_level, write_checksum=True, write_content_size=True
            )
            self._contexts.compressor = compressor
        return compressor.compress(data)

    def decode(self, digest: str, size: int, frame: bytes) -> bytes:
        """
        Decompress a frame and check that it holds exactly the content `digest` names.

        :param digest: The 64-hex BLAKE3 digest the content must have.
        :param size: The content's size as the index recorded it.
        :param frame: The stored frame.
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
        decompressor: zstandard.ZstdDecompressor | None = getattr(self._contexts, "decompressor", None)
        if decompressor is None:
            decompressor = self._contexts.decompressor = zstandard.ZstdDecompressor()
        try:
            data = decompressor.decompress(frame)
        except zstandard.ZstdError as error:
            raise CorruptBlobError(f"Blob {digest} does not decompress ({error}).", digest=digest) from error
        if len(data) != size or content_digest(data) != digest:
            raise CorruptBlobError(f"Blob {digest} decompresses to content with another digest.", digest=digest)
        return data
