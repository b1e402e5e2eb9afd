"""Small helpers the tests share: looking into a store's folder and index the way a person would."""

import hashlib
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

import blake3

from casstore.repository import Repository
from casstore.stores.local import DEFAULT_INLINE_MAX


def blake3_hex(data: bytes) -> str:
    return blake3.blake3(data).hexdigest()


def create_store(root: Path) -> None:
    """
    Create an empty store on disk (`root`, `index.db` with the schema, `blobs/`), as a first write would, but with
    nothing in it: for tests that look into the index, or whose child processes must find the schema in place.
    """
    Repository.local(root, compression_level=3, inline_max=DEFAULT_INLINE_MAX, durable=False, lazy=False).close()


@contextmanager
def open_index(root: Path) -> Iterator[sqlite3.Connection]:
    """
    A connection to the store's `index.db`, committed and closed when the block ends.

    `with sqlite3.connect(...)` only commits: the connection lives on until the cyclic garbage collector frees it,
    whenever that runs, and while it is open the write-ahead log stays on disk (its last close removes it). A test
    that measures the store's files would then measure the collector's timing too.
    """
    with closing(sqlite3.connect(root / "index.db")) as connection, connection:
        yield connection


def count_rows(root: Path, table: str) -> int:
    with open_index(root) as connection:
        return int(connection.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


def blob_files(root: Path) -> list[Path]:
    """Every file under `blobs/`, temporary ones included."""
    blobs = root / "blobs"
    return sorted(path for path in blobs.rglob("*") if path.is_file()) if blobs.exists() else []


def tree_fingerprint(root: Path) -> dict[str, str]:
    """Path -> sha256 of every file in the store, to show that an operation changed nothing."""
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file() and not path.name.endswith(("-wal", "-shm"))
    }


def snapshot(root: Path) -> tuple[int, int, list[Path]]:
    """(write rows, blob rows, blob files): what a failed write must leave unchanged."""
    return count_rows(root, "writes"), count_rows(root, "blobs"), blob_files(root)


def inline_frame(root: Path, digest: str) -> bytes:
    """The zstd frame of a blob stored in the index."""
    with open_index(root) as connection:
        row = connection.execute(
            "SELECT frame FROM blob_frames JOIN blobs ON blobs.id = blob_frames.blob_id WHERE digest = ?", (digest,)
        ).fetchone()
    return bytes(row[0])


def replace_inline_frame(root: Path, digest: str, frame: bytes) -> None:
    with open_index(root) as connection:
        connection.execute(
            "UPDATE blob_frames SET frame = ? WHERE blob_id = (SELECT id FROM blobs WHERE digest = ?)", (frame, digest)
        )
