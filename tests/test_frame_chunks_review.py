"""
A review of migration 0013 (frames end to end in `frame_chunks`): damage to the chunks or the slots is reported as
damage of the blobs it touches (a read raises `CorruptBlobError`, never returns other bytes, and `verify` lists the
blob as corrupt, not as a lost file); gc's compaction neither fails nor spreads damage to healthy blobs; a frame a
person writes through the view `blob_frames` as text does not shift where the next frame is found.
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
from casstore.frame_chunks import CHUNK_BYTES
from casstore.maintenance import collect_garbage, verify
from tests.helpers import create_store
from tests.test_frame_chunks import _as_of_0012

LONG_AGO = "2020-01-01 00:00:00.000"


def _connect(root: Path) -> sqlite3.Connection:
    return sqlite3.connect(root / "index.db", isolation_level=None)


def _text(rng: random.Random, words: int) -> str:
    return " ".join(f"w{rng.randrange(10**6)}" for _ in range(words))


def _write_many(root: Path, contents: list[str]) -> list[str]:
    with ContentAddressedToolResultStore(root, learn=False) as store:
        return [store.write(key=f"{i}_cat_call.txt", content=content) for i, content in enumerate(contents)]


def _digest_of(reference: str) -> str:
    """The digest a reference names (`blake3/ab/cdef....txt` names `abcdef...`)."""
    *_, head, tail = reference.split("/")
    return head + tail.split(".", maxsplit=1)[0]


def _blob_of(connection: sqlite3.Connection, reference: str) -> tuple[int, str]:
    digest = _digest_of(reference)
    (blob_id,) = connection.execute("SELECT id FROM blobs WHERE digest = ?", (digest,)).fetchone()
    return int(blob_id), digest


def _assert_damaged(
    root: Path, references: list[str], contents: list[str], damaged: set[str], *, namespace: str = "default"
) -> None:
    """Every blob of `damaged` raises a corruption (not a lost file) and verify lists it so; the others read."""
    with ContentAddressedToolResultStore(root, namespace=namespace) as store:
        for reference, content in zip(references, contents, strict=True):
            if _digest_of(reference) in damaged:
                with pytest.raises(CorruptBlobError) as raised:
                    store.read(reference)
                assert not raised.value.missing, raised.value
                assert "file" not in str(raised.value), raised.value  # the frame is in the index, not a file
            else:
                assert store.read(reference) == content
        report = verify(store)
        assert not report.ok
        assert {digest for digest, _ in report.corrupt} == damaged, report
        assert not report.missing, report


def test_a_slot_at_a_chunk_that_is_gone_is_damage_of_its_blob(store_root: Path) -> None:
    rng = random.Random(1)
    contents = [_text(rng, 500) for _ in range(10)]
    references = _write_many(store_root, contents)
    with contextlib.closing(_connect(store_root)) as connection:
        blob_id, digest = _blob_of(connection, references[0])
        (chunk,) = connection.execute("SELECT chunk FROM frame_slots WHERE blob_id = ?", (blob_id,)).fetchone()
        damaged = {
            row[0]
            for row in connection.execute(
                "SELECT b.digest FROM frame_slots s JOIN blobs b ON b.id = s.blob_id "
                "WHERE ? BETWEEN s.chunk AND s.last_chunk",
                (chunk,),
            )
        }
        connection.execute("DELETE FROM frame_chunks WHERE id = ?", (chunk,))
    assert digest in damaged
    _assert_damaged(store_root, references, contents, damaged)


def test_a_slot_past_its_chunks_end_is_damage_of_its_blob(store_root: Path) -> None:
    rng = random.Random(2)
    contents = [_text(rng, 500) for _ in range(10)]
    references = _write_many(store_root, contents)
    with contextlib.closing(_connect(store_root)) as connection:
        blob_id, digest = _blob_of(connection, references[3])
        connection.execute("UPDATE frame_slots SET start = start + ? WHERE blob_id = ?", (2 * CHUNK_BYTES, blob_id))
    _assert_damaged(store_root, references, contents, {digest})


def test_a_frame_across_chunks_missing_its_middle_chunk_is_damage(store_root: Path) -> None:
    rng = random.Random(3)
    # Random hex compresses to about half: a frame of some 12 KB, across four chunks.
    contents = [_text(rng, 300), rng.randbytes(12_000).hex() * 1, _text(rng, 300)]
    references = _write_many(store_root, contents)
    with contextlib.closing(_connect(store_root)) as connection:
        blob_id, digest = _blob_of(connection, references[1])
        chunk, last = connection.execute(
            "SELECT chunk, last_chunk FROM frame_slots WHERE blob_id = ?", (blob_id,)
        ).fetchone()
        assert last - chunk >= 2
        connection.execute("DELETE FROM frame_chunks WHERE id = ?", (chunk + 1,))
    _assert_damaged(store_root, references, contents, {digest})


def test_gc_compaction_over_a_damaged_slot_keeps_every_healthy_blob(store_root: Path) -> None:
    rng = random.Random(4)
    kept: dict[str, str] = {}
    alice = ContentAddressedToolResultStore(store_root, namespace="alice", learn=False)
    with alice, ContentAddressedToolResultStore(store_root, namespace="bob", learn=False) as bob:
        for number in range(120):
            content = _text(rng, rng.randrange(100, 900))
            if number % 3 == 0:
                kept[bob.write(key=f"{number}_cat_call.txt", content=content)] = content
            else:
                alice.write(key=f"{number}_cat_call.txt", content=content)
    references = list(kept)
    with contextlib.closing(_connect(store_root)) as connection:
        connection.execute("UPDATE blobs SET last_seen = ?", (LONG_AGO,))
        blob_id, digest = _blob_of(connection, references[0])
        # The frame now starts past the end of what its chunks hold.
        connection.execute("UPDATE frame_slots SET start = start + ? WHERE blob_id = ?", (2 * CHUNK_BYTES, blob_id))
    with ContentAddressedToolResultStore(store_root, namespace="bob") as bob:
        collect_garbage(bob, namespace="alice", grace=timedelta(0))
    _assert_damaged(store_root, references, [kept[reference] for reference in references], {digest}, namespace="bob")


def test_a_text_frame_written_through_the_view_does_not_shift_the_next_frame(store_root: Path) -> None:
    rng = random.Random(5)
    first = _write_many(store_root, [_text(rng, 50)])
    with contextlib.closing(_connect(store_root)) as connection:
        (blob_id,) = connection.execute("SELECT max(id) FROM blobs").fetchone()
        # A person (or a test) forges a frame as text holding characters of more than one byte: that blob is damaged,
        # and only that one.
        connection.execute(
            "INSERT INTO blob_frames (blob_id, frame, size) VALUES (?, ?, 10)", (blob_id + 1000, "\u00e9" * 200)
        )
    contents = [_text(rng, 200) for _ in range(5)]
    with ContentAddressedToolResultStore(store_root, learn=False) as store:
        references = [store.write(key=f"n{i}_cat_call.txt", content=content) for i, content in enumerate(contents)]
        for reference, content in zip(references, contents, strict=True):
            assert store.read(reference) == content
        assert store.read(first[0])


def test_a_frame_across_chunks_reads_back_in_a_session_that_reverses_unordered_selects(store_root: Path) -> None:
    rng = random.Random(6)
    contents = [_text(rng, 300), rng.randbytes(12_000).hex(), _text(rng, 300)]
    _write_many(store_root, contents)
    with contextlib.closing(_connect(store_root)) as connection:
        spanning = connection.execute("SELECT count(*) FROM frame_slots WHERE last_chunk > chunk").fetchone()[0]
        assert spanning >= 1
        frames = dict(connection.execute("SELECT blob_id, frame FROM blob_frames"))
        # A person's session may ask SQLite to read what has no ORDER BY in reverse (to find queries that depend on
        # an order they never asked for): the view must still give every frame as it was written.
        connection.execute("PRAGMA reverse_unordered_selects = ON")
        assert dict(connection.execute("SELECT blob_id, frame FROM blob_frames")) == frames


_STEP = st.one_of(
    st.tuples(st.just("append"), st.integers(min_value=0, max_value=5 * CHUNK_BYTES)),
    st.tuples(st.just("view-insert"), st.integers(min_value=0, max_value=2 * CHUNK_BYTES)),
    st.tuples(st.just("view-update"), st.integers(min_value=0, max_value=10**6)),
    st.tuples(st.just("view-delete"), st.integers(min_value=0, max_value=10**6)),
    st.tuples(st.just("replace"), st.integers(min_value=0, max_value=10**6)),
    st.tuples(st.just("release"), st.integers(min_value=0, max_value=10**6)),
    st.tuples(st.just("compact"), st.integers(min_value=1, max_value=4 * CHUNK_BYTES)),
)


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(_STEP, min_size=1, max_size=50), seed=st.integers(min_value=0, max_value=2**16))
def test_frames_written_every_way_read_back_and_compaction_deletes_only_untouched_chunks(
    tmp_path_factory: pytest.TempPathFactory, steps: list[tuple[str, int]], seed: int
) -> None:
    """
    Appends (empty frames and frames over several chunks too), frames written, rewritten and deleted through the
    view `blob_frames` as a person would, a blob's frame replaced by a new append, releases and compactions, in any
    order: every frame reads back as last written, and compaction deletes no chunk a slot touches.
    """
    root = tmp_path_factory.mktemp("chunks")
    create_store(root)
    rng = random.Random(seed)
    kept: dict[int, bytes] = {}
    next_id = 1
    with contextlib.closing(_connect(root)) as connection:
        for action, number in steps:
            connection.execute("BEGIN IMMEDIATE")
            chosen = sorted(kept)[number % len(kept)] if kept else None
            if action == "append":
                kept[next_id] = rng.randbytes(number)
                frame_chunks.append(connection, blob_id=next_id, size=number, frame=kept[next_id])
                next_id += 1
            elif action == "view-insert":
                kept[next_id] = rng.randbytes(number)
                connection.execute(
                    "INSERT INTO blob_frames (blob_id, frame, size) VALUES (?, ?, ?)", (next_id, kept[next_id], number)
                )
                next_id += 1
            elif action == "view-update" and chosen is not None:
                kept[chosen] = rng.randbytes(number % (2 * CHUNK_BYTES))
                connection.execute(
                    "UPDATE blob_frames SET frame = ?, size = ? WHERE blob_id = ?",
                    (kept[chosen], len(kept[chosen]), chosen),
                )
            elif action == "view-delete" and chosen is not None:
                connection.execute("DELETE FROM blob_frames WHERE blob_id = ?", (chosen,))
                del kept[chosen]
            elif action == "replace" and chosen is not None:
                kept[chosen] = rng.randbytes(number % (3 * CHUNK_BYTES))
                frame_chunks.append(connection, blob_id=chosen, size=len(kept[chosen]), frame=kept[chosen])
            elif action == "release" and chosen is not None:
                frame_chunks.release(connection, chosen)
                del kept[chosen]
            elif action == "compact":
                frame_chunks.compact(connection, max_bytes=number)
                remaining = {row[0] for row in connection.execute("SELECT id FROM frame_chunks")}
                assert _touched(connection) <= remaining  # no chunk a slot touches was deleted
            connection.execute("COMMIT")
            assert _frames(connection) == kept
            sizes = dict(connection.execute("SELECT blob_id, size FROM blob_frames").fetchall())
            assert sizes == {blob_id: len(frame) for blob_id, frame in kept.items()}
        for _ in range(100):
            connection.execute("BEGIN IMMEDIATE")
            more = frame_chunks.compact(connection, max_bytes=10**9).more
            connection.execute("COMMIT")
            if not more:
                break
        else:
            raise AssertionError("compaction did not settle in 100 transactions")
        assert _frames(connection) == kept


def _frames(connection: sqlite3.Connection) -> dict[int, bytes]:
    return {row[0]: bytes(row[1]) for row in connection.execute("SELECT blob_id, frame FROM blob_frames")}


def _touched(connection: sqlite3.Connection) -> set[int]:
    return {
        number
        for chunk, last in connection.execute("SELECT chunk, last_chunk FROM frame_slots")
        for number in range(chunk, last + 1)
    }


def test_gc_moves_an_empty_frame_written_through_the_view(store_root: Path) -> None:
    rng = random.Random(7)
    contents = [_text(rng, 200) for _ in range(3)]
    references = _write_many(store_root, contents)
    with contextlib.closing(_connect(store_root)) as connection:
        (top,) = connection.execute("SELECT max(id) FROM blobs").fetchone()
        # Two frames a person writes through the view, the first empty: it gets an empty chunk, not the last one.
        connection.execute("INSERT INTO blob_frames (blob_id, frame, size) VALUES (?, x'', 0)", (top + 1,))
        connection.execute("INSERT INTO blob_frames (blob_id, frame, size) VALUES (?, x'00', 1)", (top + 2,))
        assert connection.execute("SELECT frame FROM blob_frames WHERE blob_id = ?", (top + 1,)).fetchone() == (b"",)
    with ContentAddressedToolResultStore(store_root) as store:
        collect_garbage(store, grace=timedelta(0))
        assert [store.read(reference) for reference in references] == contents
    with contextlib.closing(_connect(store_root)) as connection:
        assert _frames(connection)[top + 1] == b""


@pytest.mark.parametrize("how", ["append", "view"])
def test_compaction_settles_with_empty_frames(how: str, store_root: Path) -> None:
    create_store(store_root)
    with contextlib.closing(_connect(store_root)) as connection:
        connection.execute("BEGIN IMMEDIATE")
        for blob_id in (1, 2, 3):
            if how == "append":
                frame_chunks.append(connection, blob_id=blob_id, size=0, frame=b"")
            else:
                connection.execute("INSERT INTO blob_frames (blob_id, frame, size) VALUES (?, x'', 0)", (blob_id,))
        connection.execute("COMMIT")
        transactions, more = 0, True
        while more and transactions < 10:
            connection.execute("BEGIN IMMEDIATE")
            more = frame_chunks.compact(connection, max_bytes=CHUNK_BYTES).more
            connection.execute("COMMIT")
            transactions += 1
        # Each call moves what it can: two transactions settle it (a frame moved may leave a chunk to delete).
        assert not more and transactions <= 2, transactions
        assert _frames(connection) == {1: b"", 2: b"", 3: b""}
        assert connection.execute("SELECT count(*) FROM frame_chunks").fetchone() == (1,)


def test_an_upgrade_to_0013_gives_back_the_pages_of_the_old_table(store_root: Path) -> None:
    rng = random.Random(8)
    with ContentAddressedToolResultStore(store_root, learn=False) as store:
        references = {
            store.write(key=f"{number}_cat_call.txt", content=_text(rng, rng.randrange(200, 2000))): number
            for number in range(150)
        }
    _as_of_0012(store_root)
    with contextlib.closing(_connect(store_root)) as connection:
        connection.executescript("PRAGMA incremental_vacuum; PRAGMA wal_checkpoint(TRUNCATE);")
        assert connection.execute("PRAGMA freelist_count").fetchone() == (0,)
    before = (store_root / "index.db").stat().st_size
    with ContentAddressedToolResultStore(store_root) as store:
        assert len({store.read(reference) for reference in references}) == len(references)
    after = (store_root / "index.db").stat().st_size
    # The frames are copied into chunks and the table dropped: its pages must not stay in the file as free pages
    # (a person upgrading would see `du` of the index nearly double until the next gc).
    assert after <= before * 1.1, (before, after)
