"""
A learned frame's dependency kept in its `frame_slots` row (migration 0017, SQLite): a learned write records it there
and nowhere else; gc's compaction moves a frame and keeps what it needs; `blob_dependencies`, now a view, still takes a
person's writes with the table's constraints; `blob_frames`' triggers keep a slot's dependency; an index made before
0017 upgrades in place, and one with a dependency that has no frame in the index is refused, naming it, with nothing
changed.
"""

import contextlib
import os
import random
import sqlite3
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from casstore import ContentAddressedToolResultStore, SchemaError, frame_chunks
from casstore import learning as learning_module
from casstore.maintenance import collect_garbage, verify
from casstore.schema import MIGRATION_NAMES
from tests.helpers import as_before_0017, as_before_0018, create_store
from tests.test_frame_chunks import _as_of_0012
from tests.test_learned_encodings import TRAIN_AFTER, digest_of, listing, train_a_dictionary

LONG_AGO = "2020-01-01 00:00:00.000"
_SLOTTED = "0017_dependencies_in_slots"
# A slot's encoding as `blob_dependencies` names it.
_ENCODING = "CASE is_delta WHEN 1 THEN 'delta' WHEN 0 THEN 'dictionary' END"


@pytest.fixture(autouse=True)
def _train_early(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(learning_module, "TRAIN_AFTER", TRAIN_AFTER)


@contextlib.contextmanager
def _index(root: Path) -> Iterator[sqlite3.Connection]:
    with contextlib.closing(sqlite3.connect(root / "index.db", isolation_level=None)) as connection:
        yield connection


def _learned_store(root: Path) -> dict[str, str]:
    """Write results that get a dictionary, deltas against earlier versions, and plain ones; reference -> content."""
    with ContentAddressedToolResultStore(root) as store:
        written = train_a_dictionary(store)
        for version in range(4):
            content = listing(version)
            written[store.write(key=f"{version}_pytest_call_{version:04x}.txt", content=content)] = content
        content = os.urandom(300_000).hex()  # a file blob: too large for the index
        written[store.write(key="1_cat_call_big.txt", content=content)] = content
    return written


def _dependencies(connection: sqlite3.Connection) -> dict[int, tuple[int, str]]:
    return {row[0]: (row[1], row[2]) for row in connection.execute("SELECT * FROM blob_dependencies")}


def _schema(connection: sqlite3.Connection) -> dict[str, str]:
    return dict(connection.execute("SELECT name, sql FROM sqlite_master WHERE sql IS NOT NULL"))


def test_a_learned_write_records_its_dependency_in_its_slot_alone(store_root: Path) -> None:
    written = _learned_store(store_root)
    with _index(store_root) as connection:
        assert connection.execute("SELECT type FROM sqlite_master WHERE name = 'blob_dependencies'").fetchone() == (
            "view",
        )
        slots = {
            row[0]: (row[1], row[2])
            for row in connection.execute(f"SELECT blob_id, needs_id, {_ENCODING} FROM frame_slots")
        }
        encodings = dict(connection.execute("SELECT digest, encoding FROM blob_encodings"))
        ids = dict(connection.execute("SELECT digest, id FROM blobs"))
        big = next(reference for reference, content in written.items() if len(content) == 600_000)
        assert ids[digest_of(big)] not in slots  # a file blob has no slot, and needs nothing
        learned = {blob_id for blob_id, (needs_id, _) in slots.items() if needs_id is not None}
        assert {encoding for digest, encoding in encodings.items() if ids[digest] in learned} == {"dictionary", "delta"}
        # Every blob the slots say is learned, and only those, in the view; plain slots need nothing.
        assert _dependencies(connection) == {blob_id: slots[blob_id] for blob_id in learned}
        assert all(encodings[digest] == "plain" for digest, blob_id in ids.items() if blob_id not in learned)
    with ContentAddressedToolResultStore(store_root) as store:
        for reference, content in written.items():
            assert store.read(reference) == content
        assert verify(store).clean


def test_compaction_moving_a_learned_frame_keeps_what_it_needs(store_root: Path) -> None:
    """gc's compaction moves bob's learned frames out of chunks alice's forgotten results left sparse."""
    rng = random.Random(5)
    kept: dict[str, str] = {}
    with (
        ContentAddressedToolResultStore(store_root, namespace="alice") as alice,
        ContentAddressedToolResultStore(store_root, namespace="bob") as bob,
    ):
        kept.update(train_a_dictionary(bob))
        for number in range(200):
            if number % 4 == 0:
                content = listing(number // 4)
                kept[bob.write(key=f"{number}_pytest_call_{number:04x}.txt", content=content)] = content
            else:
                noise = " ".join(f"w{rng.randrange(9000)}" for _ in range(rng.randrange(300, 900)))
                alice.write(key=f"{number}_cat_call.txt", content=noise)
    with _index(store_root) as connection:
        before = {
            row[0]: row[1:]
            for row in connection.execute("SELECT blob_id, chunk, start, needs_id, is_delta FROM frame_slots")
        }
        bobs = {row[0] for row in connection.execute("SELECT id FROM blobs")} & {
            row[0]
            for digest in {digest_of(reference) for reference in kept}
            for row in connection.execute("SELECT id FROM blobs WHERE digest = ?", (digest,))
        }
        # What bob's results need: his own blobs, and the dictionary his results were written with.
        learned_before = {
            blob_id: dependency for blob_id, dependency in _dependencies(connection).items() if blob_id in bobs
        }
        connection.execute("UPDATE blobs SET last_seen = ?", (LONG_AGO,))
    assert sum(encoding == "delta" for _, encoding in learned_before.values()) >= 10
    assert sum(encoding == "dictionary" for _, encoding in learned_before.values()) >= 10
    with ContentAddressedToolResultStore(store_root, namespace="bob") as bob:
        collect_garbage(bob, namespace="alice", grace=timedelta(0))
    with _index(store_root) as connection:
        after = {
            row[0]: row[1:]
            for row in connection.execute("SELECT blob_id, chunk, start, needs_id, is_delta FROM frame_slots")
        }
        learned_after = _dependencies(connection)
    moved = [blob_id for blob_id in learned_before if after[blob_id][:2] != before[blob_id][:2]]
    assert len(moved) >= 5  # learned frames were moved, not just left where they were
    assert {blob_id: learned_after[blob_id] for blob_id in learned_before} == learned_before
    with ContentAddressedToolResultStore(store_root, namespace="bob") as bob:
        for reference, content in kept.items():
            assert bob.read(reference) == content
        assert verify(bob).clean


@pytest.mark.slow
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    steps=st.lists(
        st.one_of(
            st.tuples(st.just("append"), st.integers(1, 9000), st.sampled_from([None, "dictionary", "delta"])),
            st.tuples(st.just("release"), st.integers(0, 50), st.none()),
            st.tuples(st.just("compact"), st.integers(1, 20_000), st.none()),
        ),
        max_size=60,
    )
)
def test_a_slots_dependency_follows_its_frame_through_appends_releases_and_compactions(
    steps: list[tuple[str, int, str | None]], tmp_path_factory: pytest.TempPathFactory
) -> None:
    root = tmp_path_factory.mktemp("slots")
    create_store(root)
    model: dict[int, tuple[bytes, int | None, str | None]] = {}
    rng = random.Random(len(steps))
    next_id = 0
    with _index(root) as connection:
        for step, number, encoding in steps:
            connection.execute("BEGIN IMMEDIATE")
            if step == "append":
                next_id += 1
                blob_id = next_id
                needs_id = None if encoding is None else rng.randrange(1, 10**6)
                frame = rng.randbytes(number)
                delta = encoding == "delta"
                frame_chunks.append(
                    connection, blob_id=blob_id, size=number, frame=frame, needs_id=needs_id, is_delta=delta
                )
                model[blob_id] = (frame, needs_id, encoding)
            elif step == "release" and model:
                chosen = sorted(model)[number % len(model)]
                frame_chunks.release(connection, chosen)
                del model[chosen]
            elif step == "compact":
                frame_chunks.compact(connection, max_bytes=number)
            connection.execute("COMMIT")
            found = {
                row[0]: (bytes(row[1]), row[2], row[3])
                for row in connection.execute(
                    f"SELECT f.blob_id, f.frame, s.needs_id, {_ENCODING} FROM blob_frames f "
                    "JOIN frame_slots s ON s.blob_id = f.blob_id"
                )
            }
            assert found == model
            assert _dependencies(connection) == {
                blob_id: (needs_id, encoding) for blob_id, (_, needs_id, encoding) in model.items() if encoding
            }


def _first_slots(connection: sqlite3.Connection) -> tuple[int, int, int]:
    """:returns: Three blobs with a plain slot each."""
    rows = connection.execute("SELECT blob_id FROM frame_slots WHERE needs_id IS NULL ORDER BY blob_id LIMIT 3")
    first, second, third = (row[0] for row in rows)
    return first, second, third


def test_the_view_blob_dependencies_takes_a_persons_writes_with_the_tables_constraints(store_root: Path) -> None:
    with ContentAddressedToolResultStore(store_root, learn=False) as store:
        for number in range(4):
            store.write(key=f"{number}.txt", content=f"result {number} " * 40)
        big = store.write(key="big.txt", content=os.urandom(300_000).hex())
    with _index(store_root) as connection:
        one, two, three = _first_slots(connection)
        (file_blob,) = connection.execute("SELECT id FROM blobs WHERE digest = ?", (digest_of(big),)).fetchone()
        connection.execute(
            "INSERT INTO blob_dependencies (blob_id, needs_id, encoding) VALUES (?, ?, 'delta')", (one, two)
        )
        assert _dependencies(connection) == {one: (two, "delta")}
        slot = connection.execute("SELECT needs_id, is_delta FROM frame_slots WHERE blob_id = ?", (one,)).fetchone()
        assert slot == (two, 1)
        refused = [
            # One row per blob, both columns required, the two encodings only, and a frame kept in the index.
            ("INSERT INTO blob_dependencies VALUES (?, ?, 'dictionary')", (one, three), "UNIQUE"),
            ("INSERT INTO blob_dependencies VALUES (?, NULL, 'delta')", (two,), "NOT NULL"),
            ("INSERT INTO blob_dependencies VALUES (?, ?, NULL)", (two, one), "NOT NULL"),
            ("INSERT INTO blob_dependencies VALUES (?, ?, 'zip')", (two, one), "CHECK"),
            ("INSERT INTO blob_dependencies VALUES (?, ?, 'delta')", (file_blob, one), "no frame in the index"),
            ("INSERT INTO blob_dependencies VALUES (?, ?, 'delta')", (10**9, one), "no frame in the index"),
            ("UPDATE blob_dependencies SET needs_id = NULL", (), "NOT NULL"),
            ("UPDATE blob_dependencies SET blob_id = ?", (file_blob,), "no frame in the index"),
        ]
        for statement, parameters, message in refused:
            with pytest.raises(sqlite3.IntegrityError, match=message):
                connection.execute(statement, parameters)
            assert _dependencies(connection) == {one: (two, "delta")}
        connection.execute("UPDATE blob_dependencies SET needs_id = ?, encoding = 'dictionary'", (three,))
        assert _dependencies(connection) == {one: (three, "dictionary")}
        connection.execute("INSERT INTO blob_dependencies VALUES (?, ?, 'delta')", (two, one))
        with pytest.raises(sqlite3.IntegrityError, match="UNIQUE"):
            connection.execute("UPDATE blob_dependencies SET blob_id = ? WHERE blob_id = ?", (two, one))
        # A row moved to another blob leaves the first one plain.
        connection.execute("UPDATE blob_dependencies SET blob_id = ? WHERE blob_id = ?", (three, one))
        assert _dependencies(connection) == {three: (three, "dictionary"), two: (one, "delta")}
        connection.execute("DELETE FROM blob_dependencies WHERE blob_id = ?", (two,))
        assert _dependencies(connection) == {three: (three, "dictionary")}
        assert connection.execute("SELECT count(*) FROM frame_slots WHERE needs_id IS NULL").fetchone() == (3,)
        # gc's question, through the view, finds what is needed (by the slots' index).
        assert connection.execute(
            "SELECT count(*) FROM blobs WHERE EXISTS (SELECT 1 FROM blob_dependencies WHERE needs_id = blobs.id)"
        ).fetchone() == (1,)


def test_a_frame_written_through_blob_frames_keeps_its_slots_dependency(store_root: Path) -> None:
    with ContentAddressedToolResultStore(store_root, learn=False) as store:
        for number in range(3):
            store.write(key=f"{number}.txt", content=f"result {number} " * 40)
    with _index(store_root) as connection:
        one, two, three = _first_slots(connection)
        connection.execute("INSERT INTO blob_dependencies VALUES (?, ?, 'delta')", (one, two))
        connection.execute("UPDATE blob_frames SET frame = x'0102' WHERE blob_id = ?", (one,))
        connection.execute("INSERT INTO blob_frames (blob_id, frame, size) VALUES (?, x'03', 1)", (one,))
        assert connection.execute("SELECT frame, size FROM blob_frames WHERE blob_id = ?", (one,)).fetchone() == (
            b"\x03",
            1,
        )
        assert _dependencies(connection) == {one: (two, "delta")}
        # Deleting the frame forgets its slot, and what the frame needed with it.
        connection.execute("DELETE FROM blob_frames WHERE blob_id = ?", (one,))
        assert _dependencies(connection) == {}
        assert connection.execute("SELECT count(*) FROM frame_slots").fetchone() == (2,)
        assert three not in _dependencies(connection)


def test_an_index_made_before_0017_upgrades_in_place(store_root: Path) -> None:
    written = _learned_store(store_root)
    with _index(store_root) as connection:
        expected = _dependencies(connection)
        as_before_0018(connection)
        as_before_0017(connection)
        assert connection.execute("SELECT type FROM sqlite_master WHERE name = 'blob_dependencies'").fetchone() == (
            "table",
        )
        assert _dependencies(connection) == expected
    with ContentAddressedToolResultStore(store_root) as store:
        for reference, content in written.items():
            assert store.read(reference) == content
        assert verify(store).clean
    with _index(store_root) as connection:
        assert connection.execute("SELECT type FROM sqlite_master WHERE name = 'blob_dependencies'").fetchone() == (
            "view",
        )
        assert "blob_dependencies_by_needs" not in _schema(connection)
        assert _dependencies(connection) == expected
        learned = dict(connection.execute("SELECT blob_id, needs_id IS NOT NULL FROM frame_slots"))
        assert learned == {blob_id: int(blob_id in expected) for blob_id in learned}


def test_an_upgrade_with_a_dependency_that_has_no_frame_in_the_index_is_refused_naming_it(store_root: Path) -> None:
    written = _learned_store(store_root)
    with _index(store_root) as connection:
        as_before_0018(connection)
        as_before_0017(connection)
        big = next(reference for reference, content in written.items() if len(content) == 600_000)
        (file_blob,) = connection.execute("SELECT id FROM blobs WHERE digest = ?", (digest_of(big),)).fetchone()
        (needed,) = connection.execute("SELECT min(needs_id) FROM blob_dependencies").fetchone()
        # Damage, or a hand's edit: a file blob said to need a dictionary, and a row for a blob that is not there.
        connection.execute("INSERT INTO blob_dependencies VALUES (?, ?, 'dictionary')", (file_blob, needed))
        connection.execute("INSERT INTO blob_dependencies VALUES (?, ?, 'delta')", (10**6, needed))
        schema, rows = _schema(connection), _dependencies(connection)
    with pytest.raises(SchemaError) as refused:
        ContentAddressedToolResultStore(store_root)
    message = str(refused.value)
    assert "2 rows of the table blob_dependencies" in message
    assert f"blob_id {file_blob} ({digest_of(big)}, stored in file) needs blob_id {needed}" in message
    assert f"blob_id {10**6} (no blobs row) needs blob_id {needed} as its delta" in message
    assert "Nothing was changed" in message
    with _index(store_root) as connection:
        assert _schema(connection) == schema and _dependencies(connection) == rows
        applied = {row[0] for row in connection.execute("SELECT name FROM _sqlite_migrations")}
        assert _SLOTTED not in applied
        assert connection.execute("PRAGMA user_version").fetchone() == (MIGRATION_NAMES.index(_SLOTTED),)
        # The statement the message gives removes exactly those rows; the store then opens, upgraded.
        fix = message.split("Remove those rows with sqlite3: ")[1].split("; then", maxsplit=1)[0]
        connection.execute(fix)
        assert set(_dependencies(connection)) == set(rows) - {file_blob, 10**6}
    with ContentAddressedToolResultStore(store_root) as store:
        for reference, content in written.items():
            assert store.read(reference) == content
        assert verify(store).clean


def test_a_plain_frame_put_over_a_learned_one_needs_nothing(store_root: Path) -> None:
    """
    A blob stored again plain (copied from another store, which keeps its times) replaces its slot's dependency with
    none: the table's `DELETE FROM blob_dependencies` of every plain `put` is the slot's upsert now.
    """
    written = _learned_store(store_root)
    with _index(store_root) as connection:
        learned = dict(connection.execute("SELECT digest, encoding FROM blob_encodings WHERE encoding != 'plain'"))
        times = {
            row[0]: (row[1], row[2]) for row in connection.execute("SELECT digest, first_seen, last_seen FROM blobs")
        }
    assert set(learned.values()) == {"dictionary", "delta"}
    with ContentAddressedToolResultStore(store_root) as store:
        for reference, content in written.items():
            digest = digest_of(reference)
            if digest in learned:
                store.repository.import_blob(digest, content.encode(), seen=times[digest])
    with _index(store_root) as connection:
        assert connection.execute("SELECT count(*) FROM blob_dependencies").fetchone() == (0,)
        encodings = dict(connection.execute("SELECT digest, encoding FROM blob_encodings"))
        assert {encodings[digest] for digest in learned} == {"plain"}
    with ContentAddressedToolResultStore(store_root) as store:
        for reference, content in written.items():
            assert store.read(reference) == content
        assert verify(store).clean


def test_an_index_of_migration_0012_with_a_dependency_on_a_file_blob_is_refused_too(store_root: Path) -> None:
    """Before 0013 the frames kept in the index were rows of `blob_frames`: a dependency without one is refused."""
    written = _learned_store(store_root)
    _as_of_0012(store_root)
    big = next(reference for reference, content in written.items() if len(content) == 600_000)
    with _index(store_root) as connection:
        (file_blob,) = connection.execute("SELECT id FROM blobs WHERE digest = ?", (digest_of(big),)).fetchone()
        (needed,) = connection.execute("SELECT min(needs_id) FROM blob_dependencies").fetchone()
        connection.execute("INSERT INTO blob_dependencies VALUES (?, ?, 'dictionary')", (file_blob, needed))
        schema = _schema(connection)
    with pytest.raises(SchemaError, match="1 row of the table blob_dependencies belongs") as refused:
        ContentAddressedToolResultStore(store_root)
    fix = str(refused.value).split("Remove those rows with sqlite3: ")[1].split("; then")[0]
    assert fix == "DELETE FROM blob_dependencies WHERE blob_id NOT IN (SELECT blob_id FROM blob_frames)"
    with _index(store_root) as connection:
        assert _schema(connection) == schema  # nor 0013 applied: the frames are still rows of their own
        connection.execute(fix)
    with ContentAddressedToolResultStore(store_root) as store:
        for reference, content in written.items():
            assert store.read(reference) == content
        assert verify(store).clean
