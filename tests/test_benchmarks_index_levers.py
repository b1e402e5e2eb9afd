"""
`python -m benchmarks.index_levers`: its copies keep what they rearrange, it never changes the store it measures, and
its figures are the differences of the pages it counted.
"""

import hashlib
import json
import random
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.index_levers import LEVERS, chunk_bytes, frame_stream, main, measure_levers
from casstore import ContentAddressedToolResultStore


def _write_store(root: Path, results: int) -> Path:
    generator = random.Random(7)
    words = [f"word{i}" for i in range(400)]
    with ContentAddressedToolResultStore(root, namespace="levers") as store:
        for number in range(results):
            text = " ".join(generator.choice(words) for _ in range(generator.randrange(50, 3000)))
            store.write(key=f"{number}_read_file_call_{number}.txt", content=text)
            store.write(key=f"{number}_read_file_call_{number}_again.txt", content=text)  # a repeat
    return root / "index.db"


@pytest.mark.parametrize("page_size", [1024, 4096, 8192])
def test_a_chunk_fills_a_leaf_page_and_one_byte_more_spills(page_size: int) -> None:
    size = chunk_bytes(page_size)
    for data, overflow in ((b"x" * size, 0), (b"x" * (size + 1), 1)):
        with closing(sqlite3.connect(":memory:")) as connection:
            connection.execute(f"PRAGMA page_size = {page_size}")
            connection.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, data BLOB NOT NULL)")
            connection.execute("INSERT INTO t VALUES (1, ?)", (data,))
            rows = "SELECT count(*) FROM dbstat WHERE name = 't' AND pagetype = 'overflow'"
            assert connection.execute(rows).fetchone() == (overflow,)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.binary(min_size=1, max_size=9000), min_size=1, max_size=40))
def test_the_frame_stream_keeps_every_frame(frames: list[bytes]) -> None:
    with closing(sqlite3.connect(":memory:", isolation_level=None)) as connection:
        connection.execute("CREATE TABLE blob_frames (blob_id INTEGER PRIMARY KEY, frame BLOB NOT NULL, size INTEGER)")
        connection.executemany(
            "INSERT INTO blob_frames VALUES (?, ?, ?)", [(i, frame, 3 * i) for i, frame in enumerate(frames, 1)]
        )
        frame_stream(connection)
        stream = b"".join(row[0] for row in connection.execute("SELECT data FROM frame_chunks ORDER BY id"))
        size = chunk_bytes(4096)
        chunks = connection.execute("SELECT length(data) FROM frame_chunks ORDER BY id").fetchall()
        assert all(length == size for (length,) in chunks[:-1]) and 0 < chunks[-1][0] <= size
        slots = connection.execute("SELECT blob_id, size, start, length FROM frame_slots ORDER BY blob_id").fetchall()
    assert [stream[start : start + length] for _, _, start, length in slots] == frames
    assert [(blob_id, size) for blob_id, size, _, _ in slots] == [(i, 3 * i) for i in range(1, len(frames) + 1)]


def test_the_levers_are_measured_on_copies_and_add_up(tmp_path: Path) -> None:
    index = _write_store(tmp_path / "root", results=300)
    before = hashlib.sha256(index.read_bytes()).hexdigest()
    figures = measure_levers(index, tmp_path)
    assert hashlib.sha256(index.read_bytes()).hexdigest() == before  # the store itself is only read
    assert not list(tmp_path.glob("*.db"))  # the copies are gone
    total = figures["index_bytes"]
    assert isinstance(total, int) and total > 0
    for name in LEVERS:
        entry = figures[name]
        assert isinstance(entry, dict)
        assert entry["saved_bytes"] == total - entry["index_bytes"], name
    # Binary digests take bytes off the rows and the index that held hex text. A store written now keeps its frames
    # in chunks (0013), its references without their digest or an index of their text (0018), and its blobs' times
    # as milliseconds (0019) already: those levers change nothing.
    saved = {name: figures[name]["saved_bytes"] for name in LEVERS}  # type: ignore[index]
    assert saved["blobs_binary"] > 0
    assert saved["frame_stream"] == saved["blobs_integer_times"] == saved["references_without_text_index"] == 0
    assert saved["all"] >= saved["blobs_binary"]


def test_the_command_measures_an_index_given(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    index = _write_store(tmp_path / "root", results=20)
    main(["--index", str(index)])
    figures = json.loads(capsys.readouterr().out)
    assert set(LEVERS) <= set(figures) and figures["index_bytes"] > 0
    with pytest.raises(SystemExit, match="is not a file"):
        main(["--index", str(tmp_path / "missing.db")])
