"""
What each schema change still open would take off `index.db`, measured on copies of a real store's index.

    python -m benchmarks.index_levers --size medium                   # write the medium trace, then measure
    python -m benchmarks.index_levers --index ROOT/index.db            # measure an index written already

Each lever is applied to a fresh copy of the index, its rows copied in their original order (as the writes made
them, so that every index is filled as the writes filled it, not as a rebuild would pack it), and the copy's pages
(`dbstat`) are compared with the original's. The levers (docs/compression.md, "What the missed targets would take"):

- `frame_stream`: the frames kept in the index laid end to end in rows that fill one page each (`frame_chunks`),
  with a row per blob saying where its frame starts (`frame_slots`), in place of one row per frame in `blob_frames`
  (whose 1 to 4 KB frames leave parts of most leaf pages unused). Migration 0013 made this lever the schema: on an
  index of 0013 or later it changes nothing.
- `blobs_binary`: `blobs` with a 32-byte binary digest and integer times (milliseconds), in place of 64 hex
  characters and two 23-character texts (on an index of 0019 or later, which keeps the times as milliseconds, only the
  binary digest).
- `blobs_integer_times`: only the integer times of `blobs_binary`. Migration 0019 made this lever the schema.
- `references_binary`: `namespace_references` with a 32-byte binary digest; its text index kept (on the hex of it).
  Since migration 0018 a reference holds its digest only while its blob row is missing, and there is no text index.
- `references_without_text_index`: `namespace_references_by_text` dropped (a person's query by a reference's text
  then scans the references). Migration 0018 made this lever the schema.
- `all`: every lever above but `blobs_integer_times` (inside `blobs_binary`) in one copy, to show they add up.

Nothing here changes the store: it is the measurement a schema change (migration) starts from.
"""

import argparse
import json
import sqlite3
import sys
import tempfile
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

from benchmarks.index_bytes import measure, page_bytes
from benchmarks.trace import SIZES

# The text times of the index, as integer milliseconds since 1970 (what `write_log` keeps since migration 0011).
_MILLISECONDS = "CAST(round((julianday({}) - 2440587.5) * 86400000) AS INTEGER)"
# Views over the tables a lever replaces: dropped in the copy (the lever measures bytes, and no query runs there).
_VIEWS = ("blob_encodings", "readable_blobs", "blob_locations", "dedup_summary")
_REFERENCE_VIEWS = (
    "writes",
    "visible_references",
    "readable_blobs",
    "dedup_summary",
    "namespace_summary",
    "repeated_results",
)

Lever = Callable[[sqlite3.Connection], None]


def chunk_bytes(page_size: int) -> int:
    """
    :returns: The most bytes a row of one BLOB column can hold in a table's leaf page without spilling to an
        overflow page, found by trying (SQLite's formula leaves a few bytes of record header to count).
    """
    with closing(sqlite3.connect(":memory:")) as connection:
        connection.execute(f"PRAGMA page_size = {page_size}")
        connection.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, data BLOB NOT NULL)")
        for size in range(page_size - 35, page_size // 2, -1):
            connection.execute("DELETE FROM t")
            connection.execute("INSERT INTO t VALUES (1, ?)", (b"x" * size,))
            (overflow,) = connection.execute(
                "SELECT count(*) FROM dbstat WHERE name = 't' AND pagetype = 'overflow'"
            ).fetchone()
            if overflow == 0:
                return size
    raise AssertionError(f"no row size fits a page of {page_size} bytes")


def _drop_views(connection: sqlite3.Connection, views: tuple[str, ...]) -> None:
    for view in views:
        connection.execute(f"DROP VIEW IF EXISTS {view}")


def frame_stream(connection: sqlite3.Connection) -> None:
    """The frames laid end to end in page-sized rows, and where each blob's frame starts (nothing since 0013 did)."""
    if connection.execute("SELECT 1 FROM sqlite_master WHERE name = 'frame_chunks'").fetchone() is not None:
        return
    (page_size,) = connection.execute("PRAGMA page_size").fetchone()
    size = chunk_bytes(int(page_size))
    connection.execute("CREATE TABLE frame_chunks (id INTEGER PRIMARY KEY, data BLOB NOT NULL)")
    connection.execute(
        "CREATE TABLE frame_slots (blob_id INTEGER PRIMARY KEY, size INTEGER NOT NULL, start INTEGER NOT NULL, "
        "length INTEGER NOT NULL)"
    )
    pending = bytearray()
    chunk = position = 0
    rows = connection.execute("SELECT blob_id, size, frame FROM blob_frames ORDER BY blob_id").fetchall()
    for blob_id, content_size, frame in rows:
        connection.execute("INSERT INTO frame_slots VALUES (?, ?, ?, ?)", (blob_id, content_size, position, len(frame)))
        position += len(frame)
        pending += frame
        while len(pending) >= size:
            chunk += 1
            connection.execute("INSERT INTO frame_chunks VALUES (?, ?)", (chunk, bytes(pending[:size])))
            del pending[:size]
    if pending:
        connection.execute("INSERT INTO frame_chunks VALUES (?, ?)", (chunk + 1, bytes(pending)))
    _drop_views(connection, ("readable_blobs", "blob_locations"))
    connection.execute("DROP TABLE blob_frames")


def _blobs(connection: sqlite3.Connection, *, binary: bool) -> None:
    # Since migration 0019 the rows are `blob_rows`', with integer times, under the view `blobs`.
    in_milliseconds = _has(connection, "blob_rows")
    if in_milliseconds and not binary:
        return
    digest = "unhex(digest)" if binary else "digest"
    times = (
        "first_seen, last_seen"
        if in_milliseconds
        else f"{_MILLISECONDS.format('first_seen')}, {_MILLISECONDS.format('last_seen')}"
    )
    connection.execute(
        f"CREATE TABLE compact_blob_rows (id INTEGER PRIMARY KEY, digest {'BLOB' if binary else 'TEXT'} NOT NULL "
        "UNIQUE, size INTEGER NOT NULL, stored_size INTEGER NOT NULL, stored_in TEXT NOT NULL, first_seen INTEGER NOT "
        "NULL, last_seen INTEGER NOT NULL)"
    )
    connection.execute(
        f"INSERT INTO compact_blob_rows SELECT id, {digest}, size, stored_size, stored_in, {times} "
        f"FROM {'blob_rows' if in_milliseconds else 'blobs'} ORDER BY id"
    )
    _drop_views(connection, (*_VIEWS, "offloaded_parts"))
    if in_milliseconds:
        connection.execute("DROP VIEW blobs")
        connection.execute("DROP TABLE blob_rows")
    else:
        connection.execute("DROP TABLE blobs")


def _has(connection: sqlite3.Connection, name: str) -> bool:
    return connection.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (name,)).fetchone() is not None


def blobs_binary(connection: sqlite3.Connection) -> None:
    """`blobs` with binary digests and integer times."""
    _blobs(connection, binary=True)


def blobs_integer_times(connection: sqlite3.Connection) -> None:
    """`blobs` with integer times, the digest left as text."""
    _blobs(connection, binary=False)


def _references(connection: sqlite3.Connection, *, text_index: bool) -> None:
    # Since migration 0016 a reference also holds its blob's id, and the unique index leads with it, not the digest.
    by_blob = "blob_id" in {row[1] for row in connection.execute("PRAGMA table_info(namespace_references)")}
    # Since migration 0018 a reference's digest is NULL while it has its blob row, and the text index is gone.
    text_index = text_index and _has(connection, "namespace_references_by_text")
    connection.execute(
        "CREATE TABLE reference_rows (id INTEGER PRIMARY KEY, namespace_id INTEGER NOT NULL, digest BLOB, "
        f"is_binary INTEGER NOT NULL, extension TEXT NOT NULL, size INTEGER NOT NULL{', blob_id INTEGER' * by_blob})"
    )
    connection.execute(
        f"CREATE UNIQUE INDEX reference_rows_by_key ON reference_rows ({'blob_id' if by_blob else 'digest'}, "
        "namespace_id, is_binary, extension)"
    )
    if text_index:
        hexadecimal = "lower(hex(digest))"
        connection.execute(
            "CREATE INDEX reference_rows_by_text ON reference_rows (('blake3/' || CASE is_binary WHEN 1 THEN 'bin/' "
            f"ELSE '' END || substr({hexadecimal}, 1, 2) || '/' || substr({hexadecimal}, 3) || extension), "
            "namespace_id)"
        )
    connection.execute(
        f"INSERT INTO reference_rows SELECT id, namespace_id, unhex(digest), is_binary, extension, size"
        f"{', blob_id' * by_blob} FROM namespace_references ORDER BY id"
    )
    _drop_views(connection, (*_REFERENCE_VIEWS, "offloaded_parts"))
    connection.execute("DROP TABLE namespace_references")


def references_binary(connection: sqlite3.Connection) -> None:
    """`namespace_references` with binary digests, its text index kept."""
    _references(connection, text_index=True)


def references_without_text_index(connection: sqlite3.Connection) -> None:
    """`namespace_references_by_text` dropped (nothing since 0018 did)."""
    connection.execute("DROP INDEX IF EXISTS namespace_references_by_text")


def every_lever(connection: sqlite3.Connection) -> None:
    """Every lever in one copy: the frame stream, binary digests and integer times, no text index."""
    frame_stream(connection)
    blobs_binary(connection)
    _references(connection, text_index=False)


LEVERS: dict[str, Lever] = {
    "frame_stream": frame_stream,
    "blobs_binary": blobs_binary,
    "blobs_integer_times": blobs_integer_times,
    "references_binary": references_binary,
    "references_without_text_index": references_without_text_index,
    "all": every_lever,
}


def _unhex(text: str | None) -> bytes | None:
    return None if text is None else bytes.fromhex(text)


def measure_levers(index: Path, scratch: Path) -> dict[str, object]:
    """
    :param index: A closed store's `index.db` (its write-ahead log folded in); only read.
    :param scratch: A folder for the copies.
    :returns: The index's pages, and for each lever the pages of a copy with it and the bytes it takes off.
    """
    before = sum(page_bytes(index).values())
    figures: dict[str, object] = {"index_bytes": before}
    for name, lever in LEVERS.items():
        copy = scratch / f"{name}.db"
        source = sqlite3.connect(f"file:{index}?mode=ro", uri=True)
        with closing(source), closing(sqlite3.connect(copy)) as target:
            source.backup(target)
        with closing(sqlite3.connect(copy, isolation_level=None)) as connection:
            connection.create_function("unhex", 1, _unhex, deterministic=True)
            connection.execute("PRAGMA journal_mode = DELETE")
            connection.execute("BEGIN")
            lever(connection)
            connection.execute("COMMIT")
        after = sum(page_bytes(copy).values())
        figures[name] = {"index_bytes": after, "saved_bytes": before - after}
        copy.unlink()
    return figures


def main(argv: list[str] | None = None) -> None:
    """Run from the command line; prints the figures as JSON."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.index_levers", description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="small")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--trace-dir", type=Path, default=None, help="where the trace's pack is kept and reused")
    parser.add_argument("--index", type=Path, default=None, help="a closed store's index.db to measure instead")
    arguments = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="casstore-index-levers-") as scratch:
        figures: dict[str, object] = {}
        index = arguments.index
        if index is None:
            trace_dir = arguments.trace_dir or Path(scratch) / "trace"
            trace_dir.mkdir(parents=True, exist_ok=True)
            root = Path(scratch) / "root"
            written = measure(root, trace_dir, size=arguments.size, seed=arguments.seed, learn=True)
            figures.update({name: written[name] for name in ("fingerprint", "writes", "blobs", "du_bytes")})
            index = root / "index.db"
        elif not index.is_file():
            sys.exit(f"{index} is not a file: give --index the index.db of a closed store.")
        figures.update(measure_levers(index, Path(scratch)))
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
