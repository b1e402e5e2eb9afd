"""
The floors: the least a recorded write, a new write and a verified read can cost, measured in the same run as the
stores, on the same items, so that a target beyond what the machine allows can be shown to be.
"""

import sqlite3
from pathlib import Path

import blake3
import zstandard


class Floor:
    """The least a recorded write can cost: BLAKE3 of the content plus one committed SQLite row (and zstd if new)."""

    def __init__(self, path: Path) -> None:
        """:param path: A new SQLite file."""
        path.parent.mkdir(parents=True, exist_ok=True)
        self._connection = sqlite3.connect(path, isolation_level=None)
        self._connection.execute("PRAGMA journal_mode=WAL")
        self._connection.execute("PRAGMA synchronous=NORMAL")
        self._connection.execute(
            "CREATE TABLE writes (id INTEGER PRIMARY KEY, key TEXT NOT NULL, digest TEXT NOT NULL, size INTEGER, "
            "frame BLOB)"
        )
        self._compressor = zstandard.ZstdCompressor(level=3, write_checksum=True, write_content_size=True)
        self._decompressor = zstandard.ZstdDecompressor()
        # The compressed bytes of each distinct content once: what the blobs alone take, without index or history.
        self.frame_bytes = 0

    def write(self, *, key: str, content: str | bytes) -> str:
        """Hash `content` and commit one row; the same work as a store's duplicate write, and nothing else."""
        data = content.encode("utf-8") if isinstance(content, str) else content
        digest = blake3.blake3(data).hexdigest()
        self._connection.execute("BEGIN")
        self._connection.execute("INSERT INTO writes (key, digest, size) VALUES (?, ?, ?)", (key, digest, len(data)))
        self._connection.execute("COMMIT")
        return digest

    def write_new(self, *, key: str, content: str | bytes) -> str:
        """Hash and compress `content`, then commit one row holding the frame: the least new content can cost."""
        data = content.encode("utf-8") if isinstance(content, str) else content
        digest = blake3.blake3(data).hexdigest()
        frame = self._compressor.compress(data)
        self.frame_bytes += len(frame)
        self._connection.execute("BEGIN")
        self._connection.execute(
            "INSERT INTO writes (key, digest, size, frame) VALUES (?, ?, ?, ?)", (key, digest, len(data), frame)
        )
        self._connection.execute("COMMIT")
        return digest

    def frame(self, content: str | bytes) -> bytes:
        """:returns: The zstd frame of `content`, as a store would keep it, for `read`."""
        return self._compressor.compress(content.encode("utf-8") if isinstance(content, str) else content)

    def read(self, frame: bytes, *, digest: str, is_text: bool) -> str | bytes:
        """
        Decompress a frame held in memory, check its BLAKE3 digest and decode it: the least a verifying, compressing
        store's read can cost, with no file, no index and no lock.
        """
        data = self._decompressor.decompress(frame)
        if blake3.blake3(data).hexdigest() != digest:
            raise AssertionError("the read floor decompressed other bytes")
        return data.decode("utf-8") if is_text else data

    def close(self) -> None:
        """Close the database."""
        self._connection.close()
