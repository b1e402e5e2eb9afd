"""
Migration 0011 (the leaner history) at its edges: writers racing on PostgreSQL for the same new namespace and reference,
the upgrade of hand-made 0010 rows, and what the views show.
"""

import contextlib
import re
import sqlite3
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest

from casstore import ContentAddressedToolResultStore, ReferenceNotFoundError, SchemaError, SharedToolResultStore
from casstore.copying import copy_store
from casstore.index import milliseconds
from casstore.maintenance import collect_garbage
from casstore.postgres import GC_LOCK_KEY
from casstore.prepared import prepare
from casstore.repository import repository_of
from casstore.schema_docs import QUESTIONS
from tests.servers import S3Location
from tests.store_backends import Backend, as_before_blob_location, make_backend
from tests.test_leaner_history import _as_of_0010, _postgres_as_of_0010

_WRITERS = 8
_ROUNDS = 6


def _race(count: int, job: Callable[[int], None]) -> list[BaseException]:
    """Run `job(i)` in `count` threads released at once; :returns: what they raised."""
    barrier = threading.Barrier(count)
    failures: list[BaseException] = []

    def run(number: int) -> None:
        try:
            barrier.wait(timeout=60)
            job(number)
        except BaseException as error:
            failures.append(error)

    threads = [threading.Thread(target=run, args=(number,)) for number in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads)
    return failures


def test_duplicate_writes_racing_into_a_new_namespace_each_record_one_write(
    postgres_url: str, s3_bucket_url: S3Location
) -> None:
    content = "a result every host has\n" * 20
    prepared = prepare(key="x.txt", content=content)
    with SharedToolResultStore(
        index_url=postgres_url, blob_url=s3_bucket_url.url, blob_options=s3_bucket_url.options, namespace="seed"
    ) as store:
        reference = store.write(key="x.txt", content=content)
    connections = [psycopg.connect(postgres_url, autocommit=True) for _ in range(_WRITERS)]
    try:
        for round_number in range(_ROUNDS):
            namespace = f"fresh-{round_number}"

            def record(number: int, namespace: str = namespace) -> None:
                row = (
                    connections[number]
                    .execute(
                        "SELECT casstore_record_stored_write(%s, %s, %s, %s, %s, %s, %s, %s)",
                        (
                            GC_LOCK_KEY,
                            namespace,
                            f"{number}.txt",
                            prepared.digest,
                            "text",
                            len(content),
                            reference,
                            "-1 seconds",
                        ),
                    )
                    .fetchone()
                )
                assert row == (True,)

            assert _race(_WRITERS, record) == []
        with psycopg.connect(postgres_url) as connection:
            per_namespace = connection.execute(
                "SELECT namespace, count(*), count(DISTINCT reference) FROM writes GROUP BY namespace ORDER BY 1"
            ).fetchall()
            references = connection.execute("SELECT count(*) FROM namespace_references").fetchone()
            namespaces = connection.execute("SELECT count(*), count(DISTINCT namespace) FROM namespaces").fetchone()
            orphans = connection.execute(
                "SELECT count(*) FROM write_log w WHERE NOT EXISTS "
                "(SELECT 1 FROM namespace_references r WHERE r.id = w.reference_id)"
            ).fetchone()
    finally:
        for connection in connections:
            connection.close()
    expected = [(f"fresh-{n}", _WRITERS, 1) for n in range(_ROUNDS)] + [("seed", 1, 1)]
    assert per_namespace == expected
    assert references == (_ROUNDS + 1,)
    assert namespaces == (_ROUNDS + 1, _ROUNDS + 1)
    assert orphans == (0,)


def test_new_content_racing_into_a_new_namespace_from_several_stores(
    postgres_url: str, s3_bucket_url: S3Location
) -> None:
    stores = [
        SharedToolResultStore(
            index_url=postgres_url,
            blob_url=s3_bucket_url.url,
            blob_options=s3_bucket_url.options,
            namespace="together",
            learn=False,
        )
        for _ in range(_WRITERS)
    ]
    try:
        for round_number in range(_ROUNDS):
            content = f"new content of round {round_number}\n" * 30

            def write(number: int, content: str = content) -> None:
                stores[number].write(key=f"{number}.txt", content=content)

            assert _race(_WRITERS, write) == []
        with psycopg.connect(postgres_url) as connection:
            rows = connection.execute(
                "SELECT count(*), count(DISTINCT reference) FROM writes WHERE namespace = 'together'"
            ).fetchone()
            references = connection.execute("SELECT count(*) FROM namespace_references").fetchone()
        assert rows == (_WRITERS * _ROUNDS, _ROUNDS)
        assert references == (_ROUNDS,)
        for store in stores:
            for round_number in range(_ROUNDS):
                content = f"new content of round {round_number}\n" * 30
                assert store.read(prepare(key="a.txt", content=content).reference) == content
    finally:
        for store in stores:
            store.close()


def test_an_upgrade_keeps_text_and_binary_twins_extensions_and_hand_set_times(store_root: Path) -> None:
    with ContentAddressedToolResultStore(store_root, namespace="a") as store:
        written = [
            (store.write(key="1.txt", content="twin"), "twin"),
            (store.write(key="2.txt", content=b"twin"), b"twin"),  # the same bytes as binary
            (store.write(key="3.md", content="twin"), "twin"),  # the same content under another extension
            (store.write(key="4.tar.gz", content=b"dots" * 9), b"dots" * 9),
            (store.write(key="5", content="no extension"), "no extension"),
        ]
    _as_of_0010(store_root)
    hand_set = {1: "2024-05-06 07:08:09", 2: "2024-05-06 07:08:09.5", 3: "2024-05-06T07:08:09.123"}
    with contextlib.closing(sqlite3.connect(store_root / "index.db")) as connection, connection:
        for write_id, text in hand_set.items():
            connection.execute("UPDATE writes SET written_at = ? WHERE id = ?", (text, write_id))
        before = connection.execute("SELECT id, namespace, key, digest, kind, size, reference FROM writes").fetchall()
        visible_before = sorted(connection.execute("SELECT * FROM visible_references").fetchall())
    with ContentAddressedToolResultStore(store_root, namespace="a") as store:
        for reference, content in written:
            read_back = store.read(reference)
            assert read_back == content and type(read_back) is type(content)
    with contextlib.closing(sqlite3.connect(store_root / "index.db")) as connection:
        after = connection.execute("SELECT id, namespace, key, digest, kind, size, reference FROM writes").fetchall()
        visible_after = sorted(connection.execute("SELECT * FROM visible_references").fetchall())
        times = dict(connection.execute("SELECT id, written_at FROM write_log"))
    assert after == before and visible_after == visible_before
    assert len({row[6] for row in after}) == len(written)
    expected = {1: "2024-05-06 07:08:09.000", 2: "2024-05-06 07:08:09.500", 3: "2024-05-06 07:08:09.123"}
    assert {write_id: times[write_id] for write_id in hand_set} == {
        write_id: milliseconds(text) for write_id, text in expected.items()
    }


@pytest.fixture(params=["local", "shared"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    made = make_backend(request.param, request, tmp_path)
    try:
        yield made
    finally:
        made.close()


def test_a_reference_stays_visible_until_its_last_write_is_forgotten(backend: Backend) -> None:
    a, b = backend.open(namespace="a"), backend.open(namespace="b")
    shared = a.write(key="old.txt", content="shared result\n" * 10)
    assert a.write(key="new.txt", content="shared result\n" * 10) == shared
    assert b.write(key="old.txt", content="shared result\n" * 10) == shared
    only_old = a.write(key="old2.txt", content="only old\n" * 10)
    backend.execute("UPDATE writes SET written_at = '2020-01-01 00:00:00.000' WHERE key IN ('old.txt', 'old2.txt')")
    assert backend.rows("SELECT count(*) FROM writes WHERE written_at < '2021'") == [(3,)]
    collect_garbage(a, older_than=timedelta(days=1))
    assert a.read(shared) == "shared result\n" * 10  # its newer write is kept
    with pytest.raises(ReferenceNotFoundError):
        b.read(shared)
    with pytest.raises(ReferenceNotFoundError):
        a.read(only_old)
    assert backend.rows("SELECT namespace, reference FROM visible_references ORDER BY namespace") == [("a", shared)]
    assert a.write(key="again.txt", content="shared result\n" * 10) == shared
    collect_garbage(a, namespace="b")  # nothing of b's left: a's reference stays
    assert a.read(shared) == "shared result\n" * 10
    collect_garbage(a, max_size=0)
    with pytest.raises(ReferenceNotFoundError):
        a.read(shared)
    assert backend.rows("SELECT count(*) FROM namespace_references") == [(0,)]
    assert backend.rows("SELECT count(*) FROM write_log") == [(0,)]
    assert backend.rows("SELECT namespace FROM namespaces ORDER BY 1") == [("a",), ("b",)]


# The docs' question "Every part of every offloaded result" (docs/index.md), as the page writes it.
_PARTS_QUESTION = next(question.sql for question in QUESTIONS if question.name == "every_part")
# The same question as the docs asked it until migration 0018, joining `writes` by the reference's text: it still runs
# and answers the same (the index of that text is gone, so it is no longer asked for its speed).
_PARTS_QUESTION_BEFORE_0018 = """
SELECT o.tool_name, o.tool_call_id, part.value AS reference, w.size, b.stored_size, b.stored_in
FROM offloads o, json_each(o.refs) part
JOIN writes w ON w.reference = part.value AND w.namespace = o.namespace
JOIN blobs b ON b.digest = w.digest
GROUP BY o.id, part.key ORDER BY o.id
"""


def _steps_of_the_parts_question(root: Path, results: int) -> int:
    """:returns: SQLite's virtual-machine steps (in thousands) for the docs' question over `results` offloads."""
    with ContentAddressedToolResultStore(root, namespace="agent", learn=False) as store:
        for number in range(results):
            store.write(key=f"{number}_read_file_call_{number}.txt", content=f"result number {number}\n")
    with contextlib.closing(sqlite3.connect(root / "index.db")) as connection:
        with connection:
            connection.execute(
                "INSERT INTO offloads (compaction_id, namespace, tool_name, tool_call_id, refs, original_tokens, "
                "saved_tokens, offloaded_at) SELECT 'c', namespace, 'read_file', key, json_array(reference), 10, 5, "
                "written_at FROM writes"
            )
        steps = [0]

        def count() -> int:
            steps[0] += 1
            return 0

        connection.set_progress_handler(count, 1000)
        rows = connection.execute(_PARTS_QUESTION).fetchall()
        connection.set_progress_handler(None, 1000)
        assert len(rows) == results
        if results <= 600:
            assert connection.execute(_PARTS_QUESTION_BEFORE_0018).fetchall() == rows
        return steps[0]


def test_the_docs_question_joining_offloads_to_writes_grows_linearly_with_the_history(tmp_path: Path) -> None:
    """
    Since 0018 each part's blob is looked up by the digest its reference carries (the view `offloaded_parts`); twice
    the history must cost about twice the steps, not four times (a scan of the namespace's references per part).
    """
    small = _steps_of_the_parts_question(tmp_path / "small", 600)
    large = _steps_of_the_parts_question(tmp_path / "large", 1200)
    assert large < 3 * small, (small, large)


def test_times_are_utc_whatever_the_postgresql_sessions_time_zone(postgres_url: str, s3_bucket_url: S3Location) -> None:
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        database = connection.execute("SELECT current_database()").fetchone()
        assert database is not None
        connection.execute(f"ALTER DATABASE \"{database[0]}\" SET timezone TO 'Asia/Kolkata'")
    before = datetime.now(UTC).replace(tzinfo=None)
    with SharedToolResultStore(
        index_url=postgres_url, blob_url=s3_bucket_url.url, blob_options=s3_bucket_url.options, namespace="tz"
    ) as store:
        new = store.write(key="new.txt", content="new content\n" * 5)
        store.write(key="again.txt", content="new content\n" * 5)  # the one-statement function
        old = store.write(key="old.txt", content="old content\n" * 5)
        after = datetime.now(UTC).replace(tzinfo=None)
        with psycopg.connect(postgres_url, autocommit=True) as connection:
            assert connection.execute("SHOW timezone").fetchone() == ("Asia/Kolkata",)
            shown = connection.execute("SELECT key, written_at FROM writes ORDER BY id").fetchall()
            connection.execute("UPDATE writes SET written_at = '2020-01-01 00:00:00.000' WHERE key = 'old.txt'")
            moved = connection.execute("SELECT written_at FROM write_log WHERE key = 'old.txt'").fetchone()
        for _, text in shown:
            moment = datetime.fromisoformat(text)
            assert before - timedelta(seconds=1) <= moment <= after + timedelta(seconds=1), (text, before, after)
        assert moved == (milliseconds("2020-01-01 00:00:00.000"),)
        collect_garbage(store, older_than=timedelta(hours=1))
        assert store.read(new) == "new content\n" * 5
        with pytest.raises(ReferenceNotFoundError):
            store.read(old)


def test_a_copy_from_postgresql_into_sqlite_and_on_keeps_every_write_and_time(
    tmp_path: Path, postgres_url: str, s3_bucket_url: S3Location
) -> None:
    question = "SELECT namespace, key, digest, kind, size, reference, written_at FROM writes"
    written: dict[str, list[tuple[str, str | bytes]]] = {}
    for namespace in ("alice", "bob"):
        with SharedToolResultStore(
            index_url=postgres_url, blob_url=s3_bucket_url.url, blob_options=s3_bucket_url.options, namespace=namespace
        ) as store:
            contents: list[tuple[str, str | bytes]] = [("1.txt", "twin"), ("2.txt", b"twin"), ("3.md", "twin")]
            for key, content in [*contents, ("4.tar.gz", "dots")]:
                written.setdefault(namespace, []).append((store.write(key=key, content=content), content))
    with psycopg.connect(postgres_url) as connection:
        shared_rows = Counter(tuple(row) for row in connection.execute(question).fetchall())
    for target_root in (tmp_path / "first", tmp_path / "second"):
        source_of = (
            SharedToolResultStore(
                index_url=postgres_url, blob_url=s3_bucket_url.url, blob_options=s3_bucket_url.options
            )
            if target_root.name == "first"
            else ContentAddressedToolResultStore(tmp_path / "first")
        )
        with source_of as source, ContentAddressedToolResultStore(target_root) as target:
            first = copy_store(source, target)
            again = copy_store(source, target)
        assert first.writes_copied == 8 and again.writes_copied == 0 and first.complete
        with contextlib.closing(sqlite3.connect(target_root / "index.db")) as connection:
            assert Counter(tuple(row) for row in connection.execute(question).fetchall()) == shared_rows
            assert connection.execute("SELECT count(*) FROM namespace_references").fetchone() == (8,)
        for namespace, pairs in written.items():
            with ContentAddressedToolResultStore(target_root, namespace=namespace) as store:
                for reference, content in pairs:
                    read_back = store.read(reference)
                    assert read_back == content and type(read_back) is type(content)


def test_changing_another_column_with_written_at_is_refused_and_changes_nothing(backend: Backend) -> None:
    """docs/index.md: the views cannot be written to, except `written_at`; PostgreSQL's trigger refuses the rest."""
    store = backend.open(namespace="a")
    store.write(key="kept.txt", content="a result\n")
    before = backend.rows("SELECT id, namespace, key, written_at FROM writes")
    with pytest.raises((sqlite3.DatabaseError, psycopg.Error)):
        backend.execute("UPDATE writes SET key = 'changed.txt', written_at = '2020-01-01 00:00:00.000'")
    assert backend.rows("SELECT id, namespace, key, written_at FROM writes") == before


@pytest.mark.slow
def test_two_copies_of_the_same_results_in_other_orders_into_one_postgresql_index_both_land(
    postgres_url: str, s3_bucket_url: S3Location
) -> None:
    """
    Two hosts copy their stores into one shared store at once; they wrote the same results in other orders. Before
    0011 a batch made its references visible in digest order, so two batches never waited on each other in a cycle.
    """
    results = 300
    stores = [
        SharedToolResultStore(
            index_url=postgres_url,
            blob_url=s3_bucket_url.url,
            blob_options=s3_bucket_url.options,
            namespace="seed",
            learn=False,
        )
        for _ in range(2)
    ]
    try:
        rows: list[tuple[str, str, str, str, int, str, str]] = []
        for number in range(results):
            content = f"result {number}\n"
            reference = stores[0].write(key=f"{number}.txt", content=content)
            digest = prepare(key=f"{number}.txt", content=content).digest
            rows.append(("agent", f"{number}.txt", digest, "text", len(content), reference, "2026-01-01 00:00:00.000"))
        with SharedToolResultStore(
            index_url=postgres_url, blob_url=s3_bucket_url.url, blob_options=s3_bucket_url.options, namespace="agent"
        ) as agent:
            agent.write(key="earlier.txt", content="the namespace has a history already")
        batches = [rows, rows[::-1]]

        def copy(number: int) -> None:
            repository_of(stores[number]).import_writes(batches[number])

        failures = _race(2, copy)
        assert failures == [], failures
        with psycopg.connect(postgres_url) as connection:
            counted = connection.execute("SELECT count(*) FROM writes WHERE namespace = 'agent'").fetchone()
        assert counted == (2 * results + 1,)
    finally:
        for store in stores:
            store.close()


def test_a_shared_index_of_0010_with_twins_and_hand_set_times_upgrades_in_a_non_utc_session(
    postgres_url: str, s3_bucket_url: S3Location
) -> None:
    def shared() -> SharedToolResultStore:
        return SharedToolResultStore(
            index_url=postgres_url, blob_url=s3_bucket_url.url, blob_options=s3_bucket_url.options, namespace="a"
        )

    contents: list[tuple[str, str | bytes]] = [("1.txt", "twin"), ("2.txt", b"twin"), ("3.md", "twin"), ("4", "x")]
    with shared() as store:
        written = [(store.write(key=key, content=content), content) for key, content in contents]
    _postgres_as_of_0010(postgres_url)  # no `store_settings` then: 0022 is undone with the rest
    as_before_blob_location(postgres_url, s3_bucket_url)
    hand_set = {1: "2024-05-06 07:08:09", 2: "2024-05-06 07:08:09.5", 3: "2024-05-06T07:08:09.123"}
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        for write_id, text in hand_set.items():
            connection.execute("UPDATE writes SET written_at = %s WHERE id = %s", (text, write_id))
        database = connection.execute("SELECT current_database()").fetchone()
        assert database is not None
        connection.execute(f"ALTER DATABASE \"{database[0]}\" SET timezone TO 'America/St_Johns'")
        before = connection.execute("SELECT id, namespace, key, digest, kind, size, reference FROM writes").fetchall()
    with shared() as store:
        for reference, content in written:
            read_back = store.read(reference)
            assert read_back == content and type(read_back) is type(content)
    with psycopg.connect(postgres_url) as connection:
        after = connection.execute(
            "SELECT id, namespace, key, digest, kind, size, reference FROM writes ORDER BY id"
        ).fetchall()
        times: dict[int, int] = dict(connection.execute("SELECT id, written_at FROM write_log").fetchall())
    assert sorted(after) == sorted(before)
    expected = {1: "2024-05-06 07:08:09.000", 2: "2024-05-06 07:08:09.500", 3: "2024-05-06 07:08:09.123"}
    assert {write_id: times[write_id] for write_id in hand_set} == {
        write_id: milliseconds(text) for write_id, text in expected.items()
    }


def test_duplicate_writes_racing_for_a_new_reference_of_an_existing_namespace_each_record_one_write(
    postgres_url: str, s3_bucket_url: S3Location
) -> None:
    """The function's second conflict: the namespace is there, the reference is made by several writers at once."""
    contents = [f"result {number} every host has\n" * 20 for number in range(_ROUNDS)]
    with SharedToolResultStore(
        index_url=postgres_url, blob_url=s3_bucket_url.url, blob_options=s3_bucket_url.options, namespace="seed"
    ) as store:
        references = [store.write(key="x.txt", content=content) for content in contents]
    with SharedToolResultStore(
        index_url=postgres_url, blob_url=s3_bucket_url.url, blob_options=s3_bucket_url.options, namespace="team"
    ) as store:
        store.write(key="earlier.txt", content="the namespace has a history already")
    connections = [psycopg.connect(postgres_url, autocommit=True) for _ in range(_WRITERS)]
    try:
        for content, reference in zip(contents, references, strict=True):
            digest = prepare(key="x.txt", content=content).digest

            def record(number: int, digest: str = digest, reference: str = reference, size: int = len(content)) -> None:
                row = (
                    connections[number]
                    .execute(
                        "SELECT casstore_record_stored_write(%s, %s, %s, %s, %s, %s, %s, %s)",
                        (GC_LOCK_KEY, "team", f"{number}.txt", digest, "text", size, reference, "-1 seconds"),
                    )
                    .fetchone()
                )
                assert row == (True,)

            assert _race(_WRITERS, record) == []
        with psycopg.connect(postgres_url) as connection:
            counted = connection.execute(
                "SELECT count(*), count(DISTINCT reference) FROM writes WHERE namespace = 'team'"
            ).fetchone()
            made = connection.execute(
                "SELECT count(*) FROM namespace_references r JOIN namespaces n ON n.id = r.namespace_id "
                "WHERE n.namespace = 'team'"
            ).fetchone()
    finally:
        for connection in connections:
            connection.close()
    assert counted == (_WRITERS * _ROUNDS + 1, _ROUNDS + 1)
    assert made == (_ROUNDS + 1,)


def _fix_from(message: str, engine: str) -> str:
    """:returns: The statement a `SchemaError` about unreadable times tells a person to run with `engine`."""
    match = re.search(rf"with {engine}: (UPDATE writes .*?); then open the store again", message)
    assert match is not None, message
    return match.group(1)


def test_an_upgrade_refuses_times_that_are_not_times_names_them_and_its_fix_works(store_root: Path) -> None:
    with ContentAddressedToolResultStore(store_root, namespace="a") as store:
        references = [store.write(key=f"{number}.txt", content=f"result {number}\n") for number in range(4)]
    _as_of_0010(store_root)
    with contextlib.closing(sqlite3.connect(store_root / "index.db")) as connection, connection:
        connection.execute("UPDATE writes SET written_at = 'yesterday' WHERE id = 2")
        connection.execute("UPDATE writes SET written_at = '' WHERE id = 4")
        before = connection.execute("SELECT * FROM writes ORDER BY id").fetchall()
    with pytest.raises(SchemaError) as refused:
        ContentAddressedToolResultStore(store_root, namespace="a").read(references[0])
    message = str(refused.value)
    assert "2 rows of the table writes have a written_at that is not a time" in message
    assert "id 2: 'yesterday', id 4: ''" in message and "Nothing was changed" in message
    with contextlib.closing(sqlite3.connect(store_root / "index.db")) as connection, connection:
        assert connection.execute("SELECT type FROM sqlite_master WHERE name = 'writes'").fetchone() == ("table",)
        assert connection.execute("SELECT * FROM writes ORDER BY id").fetchall() == before
        assert connection.execute("SELECT count(*) FROM _sqlite_migrations WHERE name LIKE '0011%'").fetchone() == (0,)
        connection.execute(_fix_from(message, "sqlite3"))
        first_seen = dict(
            connection.execute("SELECT w.id, b.first_seen FROM writes w JOIN blobs b ON b.digest = w.digest")
        )
    with ContentAddressedToolResultStore(store_root, namespace="a") as store:
        assert [store.read(reference) for reference in references] == [f"result {n}\n" for n in range(4)]
    with contextlib.closing(sqlite3.connect(store_root / "index.db")) as connection:
        times = dict(connection.execute("SELECT id, written_at FROM write_log"))
    assert {write_id: times[write_id] for write_id in (2, 4)} == {
        write_id: milliseconds(first_seen[write_id]) for write_id in (2, 4)
    }


def test_a_shared_upgrade_refuses_times_that_are_not_times_and_its_fix_works(
    postgres_url: str, s3_bucket_url: S3Location
) -> None:
    def shared() -> SharedToolResultStore:
        return SharedToolResultStore(
            index_url=postgres_url, blob_url=s3_bucket_url.url, blob_options=s3_bucket_url.options, namespace="a"
        )

    with shared() as store:
        references = [store.write(key=f"{number}.txt", content=f"result {number}\n") for number in range(3)]
    _postgres_as_of_0010(postgres_url)  # no `store_settings` then: 0022 is undone with the rest
    as_before_blob_location(postgres_url, s3_bucket_url)
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        connection.execute("UPDATE writes SET written_at = 'not a time' WHERE id = 3")
        before = connection.execute("SELECT * FROM writes ORDER BY id").fetchall()
    with pytest.raises(SchemaError) as refused:
        shared().read(references[0])
    message = str(refused.value)
    assert "1 row of the table writes has a written_at that is not a time (id 3: 'not a time')" in message
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        assert connection.execute("SELECT * FROM writes ORDER BY id").fetchall() == before
        assert connection.execute("SELECT count(*) FROM _casstore_migrations WHERE name LIKE '0011%'").fetchone() == (
            0,
        )
        connection.execute(_fix_from(message, "psql"))
    with shared() as store:
        assert [store.read(reference) for reference in references] == [f"result {n}\n" for n in range(3)]
