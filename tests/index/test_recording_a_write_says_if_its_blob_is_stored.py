"""
The index's answer to "is this write's blob stored?", given by the statement that records the write, on both engines:
what lets a duplicate write skip the look-up of its blob, so it must never say yes wrongly, whatever else the schema
holds (a trigger of the user's own).
"""

from collections.abc import Iterator
from pathlib import Path

import pytest

from casstore.index.database import Database
from casstore.index.prepared import PreparedWrite
from casstore.index.writes import forget, record_write
from casstore.repository import IndexDatabase

_DIGEST = "c" * 64
_WRITES = [("alice", "a.txt"), ("alice", "b.txt"), ("bob", "a.txt"), ("bob", "b.txt")]
_REFERENCE = f"blake3/cc/{'c' * 62}.txt"

# An audit table with a trigger on the table a write inserts into: each trigger's row is a change of the connection's,
# not of the statement that fired it.
_TABLES = ("write_rows", "offloads")
_SQLITE_TRIGGERS = [
    "CREATE TABLE audit (what TEXT)",
    *(
        f"CREATE TRIGGER audit_{table} AFTER INSERT ON {table} BEGIN INSERT INTO audit VALUES ('{table}'); END"
        for table in _TABLES
    ),
]
_POSTGRES_TRIGGERS = [
    "CREATE TABLE audit (what TEXT)",
    "CREATE FUNCTION audit_row() RETURNS trigger LANGUAGE plpgsql AS "
    "$$ BEGIN INSERT INTO audit VALUES (TG_TABLE_NAME); INSERT INTO audit VALUES (TG_TABLE_NAME); RETURN NEW; END $$",
    *(
        f"CREATE TRIGGER audit_{table} AFTER INSERT ON {table} FOR EACH ROW EXECUTE FUNCTION audit_row()"
        for table in _TABLES
    ),
]


@pytest.fixture(params=["sqlite", "postgresql"])
def index_database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[IndexDatabase]:
    database: IndexDatabase
    if request.param == "sqlite":
        database = Database(tmp_path / "index.db", durable=False)
    else:
        from casstore.index.postgres import PostgresDatabase

        database = PostgresDatabase(request.getfixturevalue("postgres_url"))
    yield database
    database.close()


def _write(key: str) -> PreparedWrite:
    return PreparedWrite(reference=_REFERENCE, key=key, digest=_DIGEST, is_text=True, data=b"abc")


def _add_triggers(database: IndexDatabase) -> None:
    with database.transaction() as work:
        for statement in _SQLITE_TRIGGERS if isinstance(database, Database) else _POSTGRES_TRIGGERS:
            work.connection.execute(statement)


def _add_blob(database: IndexDatabase) -> None:
    # A write is recorded in the transaction that stores or finds its blob's row (a reference names it by its id).
    with database.transaction() as work:
        work.connection.execute(
            "INSERT INTO blobs (digest, size, stored_size, stored_in, first_seen, last_seen) "
            "VALUES (?, 3, 12, 'index', '2026-01-01 00:00:00.000', '2026-01-01 00:00:00.000')",
            (_DIGEST,),
        )


@pytest.mark.parametrize("triggers", [False, True], ids=["plain", "with-triggers"])
def test_a_write_says_whether_its_blob_is_stored(index_database: IndexDatabase, triggers: bool) -> None:
    if triggers:
        _add_triggers(index_database)
    # No blob row: no write is recorded, and each says so, so that its blob is stored or looked up.
    with index_database.transaction() as work:
        assert [record_write(work, namespace, _write(key)) for namespace, key in _WRITES] == [False] * 4
        assert work.connection.execute("SELECT count(*) FROM write_rows").fetchone()[0] == 0
    _add_blob(index_database)
    with index_database.transaction() as work:
        assert [record_write(work, namespace, _write(key)) for namespace, key in _WRITES] == [True] * 4
        assert work.connection.execute("SELECT count(*) FROM writes").fetchone()[0] == 4
    with index_database.transaction() as work:
        forgotten = forget(work, namespace="alice", older_than=None)
        assert (forgotten.writes, forgotten.offloads) == (2, 0)
        work.connection.execute("DELETE FROM blobs")  # as gc does once nothing names it
    with index_database.transaction() as work:
        assert record_write(work, "bob", _write("again.txt")) is False


def test_a_change_counts_only_the_rows_of_its_own_statement(index_database: IndexDatabase) -> None:
    _add_triggers(index_database)
    with index_database.transaction() as work:
        insert = "INSERT INTO store_settings (name, value) VALUES (?, 'x') ON CONFLICT DO NOTHING"
        assert work.change(insert, ("alice",)) == 1
        assert work.change(insert, ("alice",)) == 0
        assert work.change(insert, ("bob",)) == 1
        assert work.change("DELETE FROM store_settings WHERE name IN (?, ?)", ("alice", "bob")) == 2
        assert work.change("DELETE FROM store_settings WHERE name IN (?, ?)", ("alice", "bob")) == 0
        # A trigger's rows are not the statement's: a write whose blob row is missing is one row, not one and more.
        assert (
            work.change(
                "INSERT INTO offloads (compaction_id, namespace, tool_name, refs, original_tokens, saved_tokens, "
                "offloaded_at) VALUES ('c', 'n', 't', '[]', 1, 1, '2026-01-01 00:00:00.000')",
                (),
            )
            == 1
        )
