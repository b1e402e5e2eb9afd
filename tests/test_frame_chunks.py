"""
Frames kept end to end in page-sized chunks (migration 0013, `casstore.frame_chunks`): every frame reads back as it
was written through any sequence of writes, deletions and compactions; damage to a chunk is reported, never read as
content; gc gives the chunks' bytes back; an index of migration 0012 upgrades in place; a kill during gc's compaction
loses nothing reported.
"""

import contextlib
import random
import sqlite3
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from casstore import ContentAddressedToolResultStore, CorruptBlobError, frame_chunks
from casstore.frame_chunks import CHUNK_BYTES, COMPACT_BELOW
from casstore.maintenance import collect_garbage, verify
from casstore.schema import MIGRATION_NAMES
from tests.helpers import as_before_0017, as_before_0018, create_store, undo_references_by_blob_id
from tests.test_learned_encodings import _run_until_stalled

LONG_AGO = "2020-01-01 00:00:00.000"


def _connect(root: Path) -> sqlite3.Connection:
    return sqlite3.connect(root / "index.db", isolation_level=None)


def _frames(connection: sqlite3.Connection) -> dict[int, bytes]:
    return {row[0]: bytes(row[1]) for row in connection.execute("SELECT blob_id, frame FROM blob_frames")}


def _chunk_use(connection: sqlite3.Connection) -> tuple[dict[int, int], set[int]]:
    """
    :returns: The bytes of each chunk some slot uses (chunks no slot uses: 0), and the chunks compaction may leave
        sparse: the last, and those of a frame that reaches into it.
    """
    lengths = dict(connection.execute("SELECT id, length(data) FROM frame_chunks").fetchall())
    used = dict.fromkeys(lengths, 0)
    tail = max(lengths) if lengths else None
    exempt = {tail} if tail is not None else set()
    for chunk, start, length, last in connection.execute("SELECT chunk, start, length, last_chunk FROM frame_slots"):
        if last == tail:
            exempt.update(range(chunk, last + 1))
        position = 0
        for number in range(chunk, last + 1):
            begins = start if number == chunk else 0
            take = min(lengths[number] - begins, length - position)
            used[number] += take
            position += take
        assert position == length  # the slot's chunks hold its whole frame
    return used, exempt


def chunk_bytes(page_size: int) -> int:
    """
    :returns: The most bytes a row of one BLOB column can hold in a table's leaf page without spilling to an
        overflow page, found by trying (SQLite's formula leaves a few bytes of record header to count).
    """
    with contextlib.closing(sqlite3.connect(":memory:")) as connection:
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


@pytest.mark.parametrize("page_size", [1024, 4096, 8192])
def test_a_chunk_fills_a_leaf_page_and_one_byte_more_spills(page_size: int) -> None:
    size = chunk_bytes(page_size)
    for data, overflow in ((b"x" * size, 0), (b"x" * (size + 1), 1)):
        with contextlib.closing(sqlite3.connect(":memory:")) as connection:
            connection.execute(f"PRAGMA page_size = {page_size}")
            connection.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, data BLOB NOT NULL)")
            connection.execute("INSERT INTO t VALUES (1, ?)", (data,))
            rows = "SELECT count(*) FROM dbstat WHERE name = 't' AND pagetype = 'overflow'"
            assert connection.execute(rows).fetchone() == (overflow,)


def test_a_chunk_is_the_most_a_row_keeps_in_a_page() -> None:
    assert chunk_bytes(4096) == CHUNK_BYTES


_STEP = st.one_of(
    st.tuples(st.just("append"), st.integers(min_value=1, max_value=3 * CHUNK_BYTES)),
    st.tuples(st.just("release"), st.integers(min_value=0, max_value=10**6)),
    st.tuples(st.just("compact"), st.integers(min_value=1, max_value=4 * CHUNK_BYTES)),
)


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(_STEP, min_size=1, max_size=60), seed=st.integers(min_value=0, max_value=2**16))
def test_every_frame_reads_back_through_appends_releases_and_compactions(
    tmp_path_factory: pytest.TempPathFactory, steps: list[tuple[str, int]], seed: int
) -> None:
    root = tmp_path_factory.mktemp("chunks")
    create_store(root)
    rng = random.Random(seed)
    kept: dict[int, bytes] = {}
    next_id = 1
    with contextlib.closing(_connect(root)) as connection:
        for action, number in steps:
            connection.execute("BEGIN")
            if action == "append":
                frame = rng.randbytes(number)
                frame_chunks.append(connection, blob_id=next_id, size=number * 3, frame=frame)
                kept[next_id] = frame
                next_id += 1
            elif action == "release" and kept:
                blob_id = sorted(kept)[number % len(kept)]
                frame_chunks.release(connection, blob_id)
                del kept[blob_id]
            elif action == "compact":
                frame_chunks.compact(connection, max_bytes=number)
            connection.execute("COMMIT")
            assert _frames(connection) == kept
            sizes = dict(connection.execute("SELECT blob_id, size FROM blob_frames").fetchall())
            assert sizes == {blob_id: 3 * len(frame) for blob_id, frame in kept.items()}
        # Compacted to the end, every chunk but the last is used, and used mostly.
        for _ in range(100):
            connection.execute("BEGIN")
            more = frame_chunks.compact(connection, max_bytes=10**9).more
            connection.execute("COMMIT")
            if not more:
                break
        assert _frames(connection) == kept
        used, exempt = _chunk_use(connection)
        for chunk, count in used.items():
            if chunk not in exempt:
                assert count >= COMPACT_BELOW * CHUNK_BYTES, (chunk, count, used)
        lengths = [row[0] for row in connection.execute("SELECT length(data) FROM frame_chunks")]
        assert all(length <= CHUNK_BYTES for length in lengths)


def test_a_damaged_chunk_is_reported_never_read_as_content(store_root: Path) -> None:
    rng = random.Random(3)
    contents = [" ".join(f"w{rng.randrange(5000)}" for _ in range(600)) for _ in range(12)]
    with ContentAddressedToolResultStore(store_root, learn=False) as store:
        references = [store.write(key=f"{i}_cat_call.txt", content=content) for i, content in enumerate(contents)]
    with contextlib.closing(_connect(store_root)) as connection:
        (chunks,) = connection.execute("SELECT count(*) FROM frame_chunks").fetchone()
        assert chunks < len(contents)  # frames share chunks
        connection.execute(
            "UPDATE frame_chunks SET data = CAST(substr(data, 1, 100) || x'ff' || substr(data, 102) AS BLOB) "
            "WHERE id = 1"
        )
        damaged = {row[0] for row in connection.execute("SELECT blob_id FROM frame_slots WHERE chunk <= 1")}
    with ContentAddressedToolResultStore(store_root) as store:
        failed = 0
        for reference, content in zip(references, contents, strict=True):
            try:
                assert store.read(reference) == content
            except CorruptBlobError:
                failed += 1
        assert failed >= 1 and failed <= len(damaged)
        assert not verify(store).ok


def test_gc_gives_the_bytes_of_deleted_frames_back(store_root: Path) -> None:
    rng = random.Random(5)
    kept: dict[str, str] = {}
    alice = ContentAddressedToolResultStore(store_root, namespace="alice", learn=False)
    with alice, ContentAddressedToolResultStore(store_root, namespace="bob", learn=False) as bob:
        for number in range(300):
            content = " ".join(f"w{rng.randrange(9000)}" for _ in range(rng.randrange(100, 900)))
            if number % 3 == 0:
                kept[bob.write(key=f"{number}_cat_call.txt", content=content)] = content
            else:
                alice.write(key=f"{number}_cat_call.txt", content=content)
    with contextlib.closing(_connect(store_root)) as connection:
        connection.execute("UPDATE blobs SET last_seen = ?", (LONG_AGO,))
        before = connection.execute("SELECT sum(length(data)) FROM frame_chunks").fetchone()[0]
    with ContentAddressedToolResultStore(store_root, namespace="bob") as bob:
        collect_garbage(bob, namespace="alice", grace=timedelta(0))
        for reference, content in kept.items():
            assert bob.read(reference) == content
        assert verify(bob).clean
    with contextlib.closing(_connect(store_root)) as connection:
        after = connection.execute("SELECT sum(length(data)) FROM frame_chunks").fetchone()[0]
        (frames,) = connection.execute("SELECT sum(length) FROM frame_slots").fetchone()
        used, exempt = _chunk_use(connection)
    assert after < before / 2  # two thirds of the frames went
    assert all(count >= COMPACT_BELOW * CHUNK_BYTES for chunk, count in used.items() if chunk not in exempt)
    assert after <= frames / COMPACT_BELOW + CHUNK_BYTES


def _as_of_0012(root: Path) -> None:
    """
    Turn a store's index back into migration 0012's: one `blob_frames` row per frame. 0017, then 0016, are undone first
    (they redefine `readable_blobs` and the triggers of `blob_frames`, which 0013 defines again): all apply again on
    opening, in order.
    """
    with contextlib.closing(_connect(root)) as connection:
        as_before_0018(connection)
        as_before_0017(connection)
        undo_references_by_blob_id(connection)
        frames = connection.execute("SELECT blob_id, frame, size FROM blob_frames").fetchall()
        for name in ("blob_frames_insert", "blob_frames_update", "blob_frames_delete"):
            connection.execute(f"DROP TRIGGER {name}")
        connection.execute("DROP VIEW blob_frames")
        connection.execute("DROP TABLE frame_chunks")
        connection.execute("DROP TABLE frame_slots")
        connection.execute("CREATE TABLE blob_frames (blob_id INTEGER PRIMARY KEY, frame BLOB NOT NULL, size INTEGER)")
        connection.executemany("INSERT INTO blob_frames VALUES (?, ?, ?)", frames)
        connection.execute("DELETE FROM _sqlite_migrations WHERE name = '0013_frames_in_chunks'")
        connection.execute(f"PRAGMA user_version = {MIGRATION_NAMES.index('0013_frames_in_chunks')}")


def test_an_index_of_migration_0012_upgrades_in_place_and_gc_packs_its_frames(store_root: Path) -> None:
    rng = random.Random(9)
    written: dict[str, str] = {}
    with ContentAddressedToolResultStore(store_root) as store:
        for number in range(120):
            content = " ".join(f"w{rng.randrange(9000)}" for _ in range(rng.randrange(100, 2500)))
            written[store.write(key=f"{number}_read_file_call.txt", content=content)] = content
    _as_of_0012(store_root)
    with contextlib.closing(_connect(store_root)) as connection:
        old = _frames(connection)
        assert connection.execute("SELECT type FROM sqlite_master WHERE name = 'blob_frames'").fetchone() == ("table",)
    with ContentAddressedToolResultStore(store_root) as store:
        for reference, content in written.items():
            assert store.read(reference) == content
        with contextlib.closing(_connect(store_root)) as connection:
            assert _frames(connection) == old  # the same frames, one chunk each
            assert connection.execute("SELECT count(*) FROM frame_chunks").fetchone() == (len(old),)
        more = store.write(key="999_read_file_call.txt", content="written after the upgrade " * 40)
        collect_garbage(store, grace=timedelta(days=1))  # nothing to collect; the frames are packed
        for reference, content in written.items():
            assert store.read(reference) == content
        assert store.read(more) == "written after the upgrade " * 40
        assert verify(store).clean
    with contextlib.closing(_connect(store_root)) as connection:
        (chunks,) = connection.execute("SELECT count(*) FROM frame_chunks").fetchone()
        (frames,) = connection.execute("SELECT sum(length) FROM frame_slots").fetchone()
        used, exempt = _chunk_use(connection)
    assert chunks <= frames / (COMPACT_BELOW * CHUNK_BYTES) + 2
    assert all(count >= COMPACT_BELOW * CHUNK_BYTES for chunk, count in used.items() if chunk not in exempt)


@pytest.mark.parametrize("at", [1, 25])
def test_a_kill_during_gcs_compaction_loses_nothing_reported(at: int, store_root: Path, tmp_path: Path) -> None:
    rng = random.Random(at)
    kept: dict[str, str] = {}
    alice = ContentAddressedToolResultStore(store_root, namespace="alice", learn=False)
    with alice, ContentAddressedToolResultStore(store_root, namespace="bob", learn=False) as bob:
        for number in range(200):
            content = " ".join(f"w{rng.randrange(9000)}" for _ in range(rng.randrange(100, 900)))
            if number % 2 == 0:
                kept[bob.write(key=f"{number}_cat_call.txt", content=content)] = content
            else:
                alice.write(key=f"{number}_cat_call.txt", content=content)
    with contextlib.closing(_connect(store_root)) as connection:
        connection.execute("UPDATE blobs SET last_seen = ?", (LONG_AGO,))
    _run_until_stalled(store_root, "compacting", at, tmp_path)
    with ContentAddressedToolResultStore(store_root, namespace="bob") as bob:
        for reference, content in kept.items():
            assert bob.read(reference) == content
        assert verify(bob).ok
        collect_garbage(bob, namespace="alice", grace=timedelta(0))
        for reference, content in kept.items():
            assert bob.read(reference) == content
        assert verify(bob).clean
