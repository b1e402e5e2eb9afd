"""
Migration 0019: a blob's times kept as integer milliseconds in `blob_rows`, under the view `blobs`, which shows them as
the text they were and takes a person's inserts, changes and deletes as the table did.
"""

import contextlib
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from casstore import ContentAddressedToolResultStore, CorruptBlobError, ReferenceNotFoundError, SchemaError
from casstore.index import milliseconds
from casstore.maintenance import collect_garbage, verify
from tests.helpers import BLOB_TIMES_IN_MILLISECONDS, as_before_0019, blake3_hex, create_store

_TIMES = "SELECT id, digest, size, stored_size, stored_in, first_seen, last_seen FROM blobs ORDER BY id"


def _connect(root: Path) -> contextlib.closing[sqlite3.Connection]:
    return contextlib.closing(sqlite3.connect(root / "index.db", isolation_level=None))


def _written(root: Path) -> dict[str, str | bytes]:
    contents: dict[str, str | bytes] = {}
    with ContentAddressedToolResultStore(root, inline_max=512) as store:
        for number in range(12):
            content: str | bytes = f"result {number}\n" * (5 + 40 * number)
            if number % 5 == 4:
                content = bytes(range(256)) * (number + 1)
            contents[store.write(key=f"{number}_read_file_call_{number}.txt", content=content)] = content
    return contents


def test_blobs_shows_the_times_as_text_and_blob_rows_keeps_milliseconds(tmp_path: Path) -> None:
    before = datetime.now(UTC).replace(tzinfo=None) - timedelta(seconds=1)
    _written(tmp_path)
    after = datetime.now(UTC).replace(tzinfo=None) + timedelta(seconds=1)
    with _connect(tmp_path) as connection:
        kinds = dict(connection.execute("SELECT name, type FROM sqlite_master WHERE name IN ('blobs', 'blob_rows')"))
        assert kinds == {"blobs": "view", "blob_rows": "table"}
        shown = connection.execute("SELECT id, first_seen, last_seen FROM blobs ORDER BY id").fetchall()
        kept = connection.execute("SELECT id, first_seen, last_seen FROM blob_rows ORDER BY id").fetchall()
        types = connection.execute("SELECT DISTINCT typeof(first_seen), typeof(last_seen) FROM blob_rows").fetchall()
    assert types == [("integer", "integer")]
    assert len(shown) == len(kept) == 12
    for (shown_id, first, last), (kept_id, first_ms, last_ms) in zip(shown, kept, strict=True):
        assert shown_id == kept_id
        assert (milliseconds(first), milliseconds(last)) == (first_ms, last_ms)
        assert before <= datetime.fromisoformat(first) <= datetime.fromisoformat(last) <= after
        assert len(first) == len("YYYY-MM-DD HH:MM:SS.SSS")


def test_a_time_set_by_hand_through_blobs_is_kept_in_milliseconds_and_gc_obeys_it(tmp_path: Path) -> None:
    with ContentAddressedToolResultStore(tmp_path, namespace="a") as store:
        kept = store.write(key="kept.txt", content="kept\n" * 50)
        gone = store.write(key="gone.txt", content="gone\n" * 50)
    digest = blake3_hex(("gone\n" * 50).encode())
    with _connect(tmp_path) as connection:
        # Nothing references it any more, and it was last seen long ago: gc may take it, with any grace period.
        connection.execute(
            "DELETE FROM namespace_references WHERE blob_id = (SELECT id FROM blobs WHERE digest = ?)", (digest,)
        )
        connection.execute("UPDATE blobs SET last_seen = '2020-01-01 00:00:00.000' WHERE digest = ?", (digest,))
        assert connection.execute("SELECT last_seen FROM blob_rows WHERE digest = ?", (digest,)).fetchone() == (
            milliseconds("2020-01-01 00:00:00.000"),
        )
        assert connection.execute("SELECT last_seen FROM blobs WHERE digest = ?", (digest,)).fetchone() == (
            "2020-01-01 00:00:00.000",
        )
    with ContentAddressedToolResultStore(tmp_path, namespace="a") as store:
        report = collect_garbage(store, grace=timedelta(days=365))
        assert report.blobs_deleted == 1
        assert store.read(kept) == "kept\n" * 50
        with pytest.raises(ReferenceNotFoundError):
            store.read(gone)


def test_a_time_that_is_not_a_time_is_refused_and_nothing_changes(tmp_path: Path) -> None:
    _written(tmp_path)
    with _connect(tmp_path) as connection:
        before = connection.execute("SELECT * FROM blob_rows ORDER BY id").fetchall()
        with pytest.raises(sqlite3.IntegrityError, match="NOT NULL"):
            connection.execute("UPDATE blobs SET last_seen = 'yesterday'")
        with pytest.raises(sqlite3.IntegrityError, match="NOT NULL"):
            connection.execute(
                "INSERT INTO blobs (digest, size, stored_size, stored_in, first_seen, last_seen) "
                "VALUES (?, 1, 1, 'index', 'never', 'never')",
                ("ab" * 32,),
            )
        assert connection.execute("SELECT * FROM blob_rows ORDER BY id").fetchall() == before


def test_rows_written_and_deleted_through_blobs_keep_the_references_rules(tmp_path: Path) -> None:
    """A row deleted through the view leaves its references naming the content; made again, it takes them back."""
    with ContentAddressedToolResultStore(tmp_path, namespace="a") as store:
        reference = store.write(key="a.txt", content="content\n" * 40)
    digest = blake3_hex(("content\n" * 40).encode())
    with _connect(tmp_path) as connection:
        (row,) = connection.execute("SELECT * FROM blobs WHERE digest = ?", (digest,)).fetchall()
        connection.execute("DELETE FROM blobs WHERE digest = ?", (digest,))
        assert connection.execute("SELECT blob_id, digest FROM namespace_references").fetchall() == [(None, digest)]
    with ContentAddressedToolResultStore(tmp_path, namespace="a") as store:
        with pytest.raises(CorruptBlobError) as raised:
            store.read(reference)
        assert raised.value.missing
        assert not verify(store).ok
    with _connect(tmp_path) as connection:
        connection.execute("INSERT INTO blobs VALUES (?, ?, ?, ?, ?, ?, ?)", row)  # put back by hand, times and all
        assert connection.execute("SELECT * FROM blobs WHERE digest = ?", (digest,)).fetchall() == [row]
        assert connection.execute("SELECT blob_id, digest FROM namespace_references").fetchall() == [(row[0], None)]
    with ContentAddressedToolResultStore(tmp_path, namespace="a") as store:
        assert store.read(reference) == "content\n" * 40
        assert verify(store).clean


@settings(max_examples=200, deadline=None)
@given(moment=st.integers(min_value=0, max_value=milliseconds("2999-12-31 23:59:59.999")))
def test_any_time_shown_by_blobs_turns_back_into_the_same_milliseconds(moment: int) -> None:
    """What the view shows of a time, given back to it as text (a person's update), is the same millisecond."""
    with contextlib.closing(sqlite3.connect(":memory:")) as connection:
        script = Path(__file__).resolve().parent.parent / "migrations" / f"{BLOB_TIMES_IN_MILLISECONDS}.sql"
        connection.execute(
            "CREATE TABLE blobs (id INTEGER PRIMARY KEY, digest TEXT NOT NULL UNIQUE, size INTEGER NOT NULL, "
            "stored_size INTEGER NOT NULL, stored_in TEXT NOT NULL, first_seen TEXT NOT NULL, last_seen TEXT NOT NULL)"
        )
        connection.execute("CREATE TABLE namespace_references (blob_id INTEGER, digest TEXT)")
        from casstore.schema import _statements

        for statement in _statements(script.read_text(encoding="utf-8")):
            connection.execute(statement)
        connection.execute("INSERT INTO blob_rows VALUES (1, 'd', 1, 1, 'index', ?, ?)", (moment, moment))
        (shown,) = connection.execute("SELECT first_seen FROM blobs").fetchone()
        connection.execute("INSERT INTO blobs VALUES (2, 'e', 1, 1, 'index', ?, ?)", (shown, shown))
        connection.execute("UPDATE blobs SET last_seen = ? WHERE id = 1", (f"{shown}",))
        assert connection.execute("SELECT first_seen, last_seen FROM blob_rows ORDER BY id").fetchall() == [
            (moment, moment),
            (moment, moment),
        ]
        assert milliseconds(shown) == moment


def test_an_index_of_0018_upgrades_in_place_with_the_same_answers(tmp_path: Path) -> None:
    contents = _written(tmp_path)
    with _connect(tmp_path) as connection:
        expected = connection.execute(_TIMES).fetchall()
        as_before_0019(connection)
        assert connection.execute("SELECT type FROM sqlite_master WHERE name = 'blobs'").fetchone() == ("table",)
        assert connection.execute(_TIMES).fetchall() == expected
    with ContentAddressedToolResultStore(tmp_path) as store:
        for reference, content in contents.items():
            assert store.read(reference) == content
        assert verify(store).clean
    with _connect(tmp_path) as connection:
        assert connection.execute("SELECT type FROM sqlite_master WHERE name = 'blobs'").fetchone() == ("view",)
        assert connection.execute(_TIMES).fetchall() == expected
        applied = [row[0] for row in connection.execute("SELECT name FROM _sqlite_migrations ORDER BY id")]
        assert BLOB_TIMES_IN_MILLISECONDS in applied


def test_an_upgrade_with_a_time_that_is_not_a_time_is_refused_naming_it_and_its_fix_works(tmp_path: Path) -> None:
    contents = _written(tmp_path)
    with _connect(tmp_path) as connection:
        as_before_0019(connection)
        connection.execute("UPDATE blobs SET last_seen = 'last week' WHERE id = 2")
        schema = connection.execute("SELECT name, sql FROM sqlite_master ORDER BY name").fetchall()
        rows = connection.execute(_TIMES).fetchall()
    with pytest.raises(SchemaError) as raised:
        ContentAddressedToolResultStore(tmp_path).read(next(iter(contents)))
    message = str(raised.value)
    assert "1 row of the table blobs has" in message and "id 2" in message and "'last week'" in message
    assert BLOB_TIMES_IN_MILLISECONDS in message and "Nothing was changed" in message
    with _connect(tmp_path) as connection:
        assert connection.execute("SELECT name, sql FROM sqlite_master ORDER BY name").fetchall() == schema
        assert connection.execute(_TIMES).fetchall() == rows
        fix = message.split("with sqlite3: ", 1)[1].rsplit("; then open the store again.", 1)[0]
        connection.execute(fix)
    with ContentAddressedToolResultStore(tmp_path) as store:
        for reference, content in contents.items():
            assert store.read(reference) == content


def test_a_new_index_has_no_blobs_table_to_check(tmp_path: Path) -> None:
    create_store(tmp_path)
    with _connect(tmp_path) as connection:
        assert connection.execute("SELECT count(*) FROM blobs").fetchone() == (0,)
