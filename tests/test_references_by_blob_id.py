"""
Migration 0016: a namespace's references found by their blob's id (`namespace_references.blob_id`, under the unique
index `namespace_references_by_blob`) rather than by a 64-character digest. What must hold:

- every statement casstore runs, and every query of the docs, finds references through an index: none scans
  `namespace_references` inside a loop (SQLite chooses the join order, so the plans are looked at);
- `blob_id` is always the id of the blob row holding the reference's digest, or NULL when there is none (a damaged
  index), whatever is written, collected or deleted by hand: a reference whose blob row is missing still says so
  (`verify`, a read's `missing`), and writing its content again mends it, without a second row;
- an index of migration 0015 upgrades in place, with the same answers.
"""

import contextlib
import os
import re
import sqlite3
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from casstore import ContentAddressedToolResultStore, CorruptBlobError, ReferenceNotFoundError, SharedToolResultStore
from casstore.copying import copy_store
from casstore.demo import EXPLORE_QUERIES
from casstore.history import namespaces_holding, offload_log, stats
from casstore.index import OffloadRecord
from casstore.maintenance import collect_garbage, verify
from casstore.postgres_schema import migration_scripts as postgres_migration_scripts
from casstore.report import build_report
from casstore.schema import MIGRATION_NAMES
from casstore.schema_docs import QUESTIONS
from tests.helpers import (
    AN_INDEX_OF_BASES_ONLY,
    BLOB_TIMES_IN_MILLISECONDS,
    DIGESTS_KEPT_ONCE,
    KEY_STEMS,
    REFERENCES_BY_BLOB_ID,
    STORE_SETTINGS,
    as_before_0017,
    as_before_0018,
    blake3_hex,
    schema_through,
    undo_references_by_blob_id,
)
from tests.servers import S3Location
from tests.store_backends import Backend, as_before_blob_location, make_backend
from tests.test_leaner_history import _postgres_columns

REPOSITORY = Path(__file__).resolve().parent.parent
_BY_BLOB = "namespace_references_by_blob"
# Every question a person may ask of the index as the docs show it (none takes a parameter).
_DOC_QUERIES = [
    *(
        block.strip()
        for page in [REPOSITORY / "README.md", *sorted((REPOSITORY / "docs").glob("*.md"))]
        for block in re.findall(r"```sql\n(.*?)```", page.read_text(encoding="utf-8"), flags=re.DOTALL)
    ),
    *(question.sql for question in QUESTIONS),
    *EXPLORE_QUERIES,
]


def _connect(root: Path) -> sqlite3.Connection:
    return sqlite3.connect(root / "index.db", isolation_level=None)


def _fill(root: Path) -> dict[tuple[str, str], str | bytes]:
    """A history of every shape: namespaces, text and binary, repeats, a file blob, an offload, forgotten writes."""
    written: dict[tuple[str, str], str | bytes] = {}
    for namespace in ("alice", "bob", "carol"):
        with ContentAddressedToolResultStore(root, namespace=namespace, inline_max=2048, search_index=True) as store:
            for number in range(40):
                content: str | bytes = f"{namespace if number % 3 else 'shared'} result {number % 17}\n" * 30
                if number % 7 == 0:
                    content = os.urandom(300) * 20  # binary, in a file (compresses to more than inline_max)
                reference = store.write(key=f"{number}_read_file_call_{number}.txt", content=content)
                written[(namespace, reference)] = content
            store.record_offloads(
                compaction_id=f"{namespace}-1",
                offloads=[OffloadRecord("read_file", "call-1", [reference], 400, 350)],
            )
    with ContentAddressedToolResultStore(root, namespace="carol") as carol:
        collect_garbage(carol, namespace="carol", grace=timedelta(0))
    return {key: value for key, value in written.items() if key[0] != "carol"}


# --- The plans ------------------------------------------------------------------------------------------------------


def _aliases(connection: sqlite3.Connection, statement: str) -> set[str]:
    """:returns: The names `namespace_references` goes by in a statement, or in the views it reads."""
    texts = [statement, *(row[0] for row in connection.execute("SELECT sql FROM sqlite_master WHERE type = 'view'"))]
    names = {"namespace_references"}
    for text in texts:
        names.update(
            match.group(1)
            for match in re.finditer(r"namespace_references\s+(?:AS\s+)?([A-Za-z_]\w*)", text)
            if match.group(1).upper() not in {"WHERE", "JOIN", "ON", "SET", "LEFT", "GROUP", "ORDER", "EXCEPT"}
        )
    return names


def scans_in_a_loop(connection: sqlite3.Connection, statement: str, parameters: int | None = None) -> list[str]:
    """
    :returns: The steps of the statement's plan that scan `namespace_references` (by any of its names) once per row of
        something else: after another loop of the same query, or inside a correlated subquery. A scan run once (a
        whole-table question) is not one.
    """
    count = statement.count("?") if parameters is None else parameters
    plan = connection.execute(f"EXPLAIN QUERY PLAN {statement}", [None] * count).fetchall()
    names = _aliases(connection, statement)
    by_id = {row[0]: row for row in plan}
    found = []
    for node, parent, _, detail in plan:
        match = re.match(r"SCAN (\w+)", detail)
        if match is None or match.group(1) not in names:
            continue
        earlier = [
            row
            for row in plan
            if row[1] == parent
            and row[0] < node
            and re.match(r"(SCAN|SEARCH) ", row[3])
            and not _one_row(connection, row[3])
        ]
        ancestors = []
        up = parent
        while up in by_id:
            ancestors.append(by_id[up][3])
            up = by_id[up][1]
        if earlier or any(text.startswith("CORRELATED") for text in ancestors):
            found.append(detail)
    return found


def _one_row(connection: sqlite3.Connection, step: str) -> bool:
    """:returns: Whether a step of a plan finds at most one row (by a row id, or every column of a unique index)."""
    if re.match(r"SEARCH \w+ USING INTEGER PRIMARY KEY \(rowid=\?\)$", step):
        return True
    match = re.match(r"SEARCH \w+ USING (?:COVERING )?INDEX (\w+) \((.*)\)$", step)
    if match is None:
        return False
    index, constraints = match.groups()
    columns = [row[2] for row in connection.execute("SELECT * FROM pragma_index_info(?)", (index,))]
    is_unique = connection.execute(
        "SELECT 1 FROM sqlite_master m, pragma_index_list(m.name) l WHERE m.type = 'table' AND l.name = ? "
        'AND l."unique"',
        (index,),
    ).fetchone()
    return is_unique is not None and constraints == " AND ".join(f"{column}=?" for column in columns)


def test_the_plan_checker_sees_a_scan_in_a_loop(tmp_path: Path) -> None:
    # What the check looks for, shown on a statement that does it (without the index, the look-up by digest scans).
    with contextlib.closing(sqlite3.connect(":memory:")) as connection:
        connection.execute("CREATE TABLE blobs (id INTEGER PRIMARY KEY, digest TEXT UNIQUE)")
        connection.execute("CREATE TABLE namespace_references (id INTEGER PRIMARY KEY, digest TEXT, blob_id INTEGER)")
        looped = (
            "SELECT b.id FROM blobs b WHERE EXISTS (SELECT 1 FROM namespace_references r WHERE r.digest = b.digest)"
        )
        assert scans_in_a_loop(connection, looped)
        assert not scans_in_a_loop(connection, "SELECT count(*) FROM namespace_references")
        connection.execute("CREATE INDEX by_digest ON namespace_references (digest)")
        assert not scans_in_a_loop(connection, looped)


def _hot_statements(*, postgres: bool = False) -> dict[str, str]:
    from casstore import blob_catalog, blobs, index

    engine: object = object() if postgres else sqlite3.connect(":memory:")

    return {
        "read": blobs._READABLE_SQL,
        "read of a reference without its blob row": blobs._VISIBLE_WITHOUT_BLOB_SQL,
        "write: a repeated write": index._APPEND_REPEATED_WRITE_SQL,
        "write: find the reference": index._FIND_REFERENCE_SQL,
        "write: find a reference without its blob row": index._FIND_REFERENCE_WITHOUT_BLOB_SQL,
        "write: make the reference": index._ADD_REFERENCE_SQL if postgres else index._ADD_REFERENCE_SQLITE_SQL,
        "is visible": index._IS_VISIBLE_SQL,
        "gc: what nothing references": blob_catalog.catalog_of(engine).collectable,
        "gc: unreferenced digests": index._UNREFERENCED_SQL,
    }


def _trigger_statements(connection: sqlite3.Connection) -> list[str]:
    """
    :returns: The statements of the triggers on `blobs` (0016; on `blob_rows` since 0019, and the view's), their `NEW.`
        and `OLD.` values as parameters.
    """
    bodies = [
        row[0]
        for row in connection.execute(
            "SELECT sql FROM sqlite_master WHERE tbl_name IN ('blobs', 'blob_rows') AND type = 'trigger'"
        )
    ]
    statements = [
        re.sub(r"\b(?:NEW|OLD)\.\w+", "?", statement.strip())
        for body in bodies
        for statement in body.split("BEGIN", 1)[1].rsplit("END", 1)[0].split(";")
        if "namespace_references" in statement
    ]
    return statements


@pytest.mark.parametrize("name", sorted(_hot_statements()))
def test_the_hot_statements_find_references_by_blob_id(name: str, tmp_path: Path) -> None:
    _fill(tmp_path / "store")
    statement = _hot_statements()[name]
    with contextlib.closing(_connect(tmp_path / "store")) as connection:
        plan = [row[3] for row in connection.execute(f"EXPLAIN QUERY PLAN {statement}", [None] * statement.count("?"))]
        names = _aliases(connection, statement)
    reads = [step for step in plan if re.match(r"(SCAN|SEARCH) (\w+)", step) and step.split()[1] in names]
    if re.match(r"\s*INSERT INTO namespace_references", statement):
        assert reads == []  # making a reference reads none (its conflict is the unique index's own check)
        return
    assert reads, plan
    assert all(step.startswith("SEARCH") and _BY_BLOB in step for step in reads), plan


def test_the_triggers_on_blobs_find_references_by_the_index(tmp_path: Path) -> None:
    _fill(tmp_path / "store")
    with contextlib.closing(_connect(tmp_path / "store")) as connection:
        statements = _trigger_statements(connection)
        assert len(statements) == 4  # detach, attach, and both on an update of a blob's id or digest
        for statement in statements:
            plan = [
                row[3] for row in connection.execute(f"EXPLAIN QUERY PLAN {statement}", [None] * statement.count("?"))
            ]
            steps = [step for step in plan if "namespace_references" in step]
            assert steps and all(step.startswith("SEARCH") and _BY_BLOB in step for step in steps), plan


def _traced_workload(root: Path) -> set[str]:
    """:returns: Every statement casstore ran on SQLite while a store was written, read, searched, kept and copied."""
    statements: set[str] = set()
    connect = sqlite3.connect

    def traced(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        connection: sqlite3.Connection = connect(*args, **kwargs)
        connection.set_trace_callback(statements.add)
        return connection

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sqlite3, "connect", traced)
        written = _fill(root)
        for namespace in ("alice", "bob"):
            with ContentAddressedToolResultStore(root, namespace=namespace, search_index=True) as store:
                for (owner, reference), content in written.items():
                    if owner == namespace:
                        assert store.read(reference) == content
                store.write(key="again.txt", content="shared result 1\n" * 30)
                with pytest.raises(ReferenceNotFoundError):
                    store.read(f"blake3/{'ab'}/{'c' * 62}.txt")
                store.search(terms=["result"])
                store.search(terms=["shared"], tool_name="read_file")
                namespaces_holding(store, next(iter(written))[1])
                stats(store)
                stats(store, namespace=namespace)
                offload_log(store)
                build_report(store)
                verify(store)
                collect_garbage(store, older_than=timedelta(days=1), grace=timedelta(0))
                collect_garbage(store, max_size=10_000, grace=timedelta(0), dry_run=True)
        with (
            ContentAddressedToolResultStore(root, namespace="alice") as source,
            ContentAddressedToolResultStore(root.parent / "copy", namespace="alice") as target,
        ):
            copy_store(source, target)
        with contextlib.closing(_connect(root)) as connection:
            digest = connection.execute("SELECT digest FROM blobs ORDER BY id LIMIT 1").fetchone()[0]
            connection.execute("DELETE FROM blobs WHERE digest = ?", (digest,))  # damage: verify and gc report it
        with ContentAddressedToolResultStore(root, namespace="alice") as store:
            verify(store)
            collect_garbage(store, grace=timedelta(0))
    return {statement for statement in statements if not statement.lstrip().startswith("--")}


def test_no_statement_casstore_runs_scans_the_references_in_a_loop(tmp_path: Path) -> None:
    statements = _traced_workload(tmp_path / "store")
    asked = [s for s in statements if re.match(r"\s*(SELECT|INSERT|UPDATE|DELETE|WITH)\b", s, flags=re.IGNORECASE)]
    assert any("namespace_references" in statement for statement in asked)  # the workload asked about references
    looping: dict[str, list[str]] = {}
    with contextlib.closing(_connect(tmp_path / "store")) as connection:
        for statement in asked:
            found = scans_in_a_loop(connection, statement, parameters=0)
            if found:
                looping[statement] = found
    assert looping == {}


@pytest.mark.parametrize("query", _DOC_QUERIES, ids=lambda query: query.splitlines()[0][:60])
def test_no_query_of_the_docs_scans_the_references_in_a_loop(query: str, tmp_path: Path) -> None:
    _fill(tmp_path / "store")
    with contextlib.closing(_connect(tmp_path / "store")) as connection:
        assert scans_in_a_loop(connection, query.rstrip().rstrip(";"), parameters=0) == []


# --- blob_id follows the blob rows ----------------------------------------------------------------------------------


def _mismatched(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return [row for row in rows if row[1] != row[2]]


# The digest a reference names: its own while its blob row is missing, else its blob's (SQLite keeps it only in the
# blob's row since migration 0018; PostgreSQL keeps it in both, and `_DIGESTS_DISAGREE` checks they agree).
_NAMED = "coalesce(r.digest, (SELECT x.digest FROM blobs x WHERE x.id = r.blob_id))"
_CONSISTENT = (
    f"SELECT r.id, r.blob_id, (SELECT b.id FROM blobs b WHERE b.digest = {_NAMED}) FROM namespace_references r"
)
_DIGESTS_DISAGREE = (
    "SELECT r.id FROM namespace_references r JOIN blobs b ON b.id = r.blob_id "
    "WHERE r.digest IS NOT NULL AND r.digest <> b.digest"
)
_TWINS = (
    f"SELECT {_NAMED} AS named, namespace_id, is_binary, extension, count(*) FROM namespace_references r "
    "GROUP BY named, namespace_id, is_binary, extension HAVING count(*) > 1"
)
_BLOB_IDS_NAMING = f"SELECT r.blob_id FROM namespace_references r WHERE {_NAMED} = ?"


@pytest.fixture(params=["local", "shared"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    made = make_backend(request.param, request, tmp_path)
    yield made
    made.close()


def test_a_reference_whose_blob_row_is_deleted_says_so_and_a_write_mends_it(backend: Backend) -> None:
    store = backend.open(namespace="alice")
    other = backend.open(namespace="bob")
    content = "kept in the index\n" * 40
    reference = store.write(key="a.txt", content=content)
    other.write(key="a.txt", content=content)
    digest = blake3_hex(content.encode())
    backend.execute("DELETE FROM blobs WHERE digest = ?", (digest,))  # damage, by hand
    assert backend.rows(_BLOB_IDS_NAMING, (digest,)) == [(None,), (None,)]
    # Another blob may take the freed id: the reference must not read it.
    later = store.write(key="b.txt", content="written after the damage\n" * 40)
    with pytest.raises(CorruptBlobError) as raised:
        backend.open(namespace="alice").read(reference)
    assert raised.value.missing and raised.value.digest == digest
    assert namespaces_holding(store, reference) == ["alice", "bob"]
    report = verify(store)
    assert sorted(report.dangling_writes) == [("alice", reference), ("bob", reference)] and not report.ok
    collect_garbage(store, grace=timedelta(0))  # nothing it may delete: the references stay, still damaged
    assert len(backend.rows(_BLOB_IDS_NAMING, (digest,))) == 2
    # Writing the content again stores the blob anew; both references take its new id, and no second row is made.
    assert backend.open(namespace="alice").write(key="again.txt", content=content) == reference
    (new_id,) = backend.rows("SELECT id FROM blobs WHERE digest = ?", (digest,))[0]
    assert backend.rows(_BLOB_IDS_NAMING, (digest,)) == [(new_id,)] * 2
    assert backend.rows(_TWINS) == []
    assert _mismatched(backend.rows(_CONSISTENT)) == [] and backend.rows(_DIGESTS_DISAGREE) == []
    for namespace in ("alice", "bob"):
        assert backend.open(namespace=namespace).read(reference) == content
    assert backend.open(namespace="alice").read(later) == "written after the damage\n" * 40
    assert verify(store).clean


def test_a_blob_row_whose_id_or_digest_a_person_changes_is_followed(backend: Backend) -> None:
    store = backend.open(inline_max=0)  # in a file or an object, by digest: a frame in the index is found by the id
    first = store.write(key="a.txt", content="first content\n" * 30)
    digest = blake3_hex(("first content\n" * 30).encode())
    backend.execute("UPDATE blobs SET id = id + 1000 WHERE digest = ?", (digest,))
    assert _mismatched(backend.rows(_CONSISTENT)) == []
    assert backend.open().read(first) == "first content\n" * 30
    backend.execute("UPDATE blobs SET digest = ? WHERE digest = ?", ("f" * 64, digest))  # now it names other content
    assert _mismatched(backend.rows(_CONSISTENT)) == []
    with pytest.raises(CorruptBlobError) as raised:
        backend.open().read(first)
    assert raised.value.missing


_OPERATIONS = st.lists(
    st.tuples(st.sampled_from(["write", "delete", "forget", "gc"]), st.integers(0, 2), st.integers(0, 5)),
    min_size=1,
    max_size=25,
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(operations=_OPERATIONS)
def test_blob_id_is_always_the_id_of_the_digests_blob_row(
    operations: list[tuple[str, int, int]], tmp_path: Path
) -> None:
    """Whatever is written, forgotten, collected or deleted by hand, in any order, `blob_id` follows the blob rows."""
    root = tmp_path / f"store-{os.urandom(4).hex()}"
    contents = [f"content number {number}\n" * (10 + 50 * number) for number in range(6)]
    expected: dict[tuple[str, str], str] = {}
    for operation, namespace_number, content_number in operations:
        namespace = f"ns{namespace_number}"
        with ContentAddressedToolResultStore(root, namespace=namespace, inline_max=256, learn=False) as store:
            if operation == "write":
                key = f"{content_number}.{'txt' if content_number % 2 else 'log'}"
                expected[(namespace, store.write(key=key, content=contents[content_number]))] = contents[content_number]
            elif operation == "delete" and (root / "index.db").exists():
                digest = blake3_hex(contents[content_number].encode())
                with contextlib.closing(_connect(root)) as connection:
                    connection.execute("DELETE FROM blobs WHERE digest = ?", (digest,))
                expected = {key: value for key, value in expected.items() if value != contents[content_number]}
            elif operation == "forget":
                collect_garbage(store, namespace=namespace, grace=timedelta(0))
                expected = {key: value for key, value in expected.items() if key[0] != namespace}
            elif operation == "gc":
                collect_garbage(store, grace=timedelta(0))
        if not (root / "index.db").exists():
            continue
        with contextlib.closing(_connect(root)) as connection:
            assert _mismatched(connection.execute(_CONSISTENT).fetchall()) == []
            assert connection.execute(_TWINS).fetchall() == []
            assert connection.execute(_DIGESTS_DISAGREE).fetchall() == []
    for (namespace, reference), content in expected.items():
        with ContentAddressedToolResultStore(root, namespace=namespace) as store:
            assert store.read(reference) == content


# --- Upgrading an index of 0015 -------------------------------------------------------------------------------------

_ANSWERS = (
    "SELECT id, namespace, key, digest, kind, size, reference, written_at FROM writes ORDER BY id",
    "SELECT digest, namespace, reference FROM visible_references ORDER BY digest, namespace, reference",
    "SELECT * FROM dedup_summary",
    "SELECT * FROM namespace_summary ORDER BY namespace",
    "SELECT * FROM repeated_results ORDER BY digest",
    "SELECT namespace, reference, digest, is_binary, extension, size, stored_in, frame, encoding, needs "
    "FROM readable_blobs ORDER BY namespace, reference",
)


def _answers(root: Path) -> list[list[tuple[Any, ...]]]:
    with contextlib.closing(_connect(root)) as connection:
        return [connection.execute(question).fetchall() for question in _ANSWERS]


def _as_of_0015(root: Path) -> None:
    """Turn an index of today's schema into exactly what migration 0015 left, with the same rows."""
    later = MIGRATION_NAMES[MIGRATION_NAMES.index(REFERENCES_BY_BLOB_ID) + 1 :]
    assert later == (
        "0017_dependencies_in_slots",
        DIGESTS_KEPT_ONCE,
        BLOB_TIMES_IN_MILLISECONDS,
        AN_INDEX_OF_BASES_ONLY,
        KEY_STEMS,
        STORE_SETTINGS,
    ), "undo the migrations after 0016 here first"
    with contextlib.closing(_connect(root)) as connection:
        as_before_0018(connection)
        as_before_0017(connection)
        undo_references_by_blob_id(connection)
        now = {
            row[0]: (row[1], row[2])
            for row in connection.execute("SELECT name, type, sql FROM sqlite_master WHERE sql IS NOT NULL")
            if not row[0].startswith(("_sqlite_migrations", "idx__sqlite_migrations", "sqlite_stat"))
        }
    old = schema_through(MIGRATION_NAMES[MIGRATION_NAMES.index(REFERENCES_BY_BLOB_ID) - 1])
    assert now == old  # the index is one migration 0015 left: nothing more, nothing less


def test_an_index_of_0015_upgrades_in_place_with_the_same_answers_and_its_damage(tmp_path: Path) -> None:
    root = tmp_path / "store"
    written = _fill(root)
    damaged_reference, damaged_content = next(
        (reference, content) for (namespace, reference), content in written.items() if namespace == "bob"
    )
    damaged = blake3_hex(damaged_content.encode() if isinstance(damaged_content, str) else damaged_content)
    _as_of_0015(root)
    with contextlib.closing(_connect(root)) as connection:
        connection.execute("DELETE FROM blobs WHERE digest = ?", (damaged,))  # a damaged index of 0015
    before = _answers(root)
    assert before[0] and before[1]
    with ContentAddressedToolResultStore(root, namespace="alice") as alice:
        assert _answers(root) == before  # the upgrade happened on opening, and changed no answer
        with contextlib.closing(_connect(root)) as connection:
            applied = [row[0] for row in connection.execute("SELECT name FROM _sqlite_migrations ORDER BY id")]
            assert applied[-7:] == [
                REFERENCES_BY_BLOB_ID,
                "0017_dependencies_in_slots",
                DIGESTS_KEPT_ONCE,
                BLOB_TIMES_IN_MILLISECONDS,
                AN_INDEX_OF_BASES_ONLY,
                KEY_STEMS,
                STORE_SETTINGS,
            ]
            assert _mismatched(connection.execute(_CONSISTENT).fetchall()) == []
            assert connection.execute("SELECT count(*) FROM namespace_references WHERE blob_id IS NULL").fetchone()[
                0
            ] == sum(1 for (_, reference) in written if reference == damaged_reference)
            indexes = {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
            assert _BY_BLOB in indexes and "namespace_references_by_digest" not in indexes
        report = verify(alice)
        assert [reference for _, reference in report.dangling_writes] and not report.ok
        assert {reference for _, reference in report.dangling_writes} == {damaged_reference}
        for (namespace, reference), content in written.items():
            with ContentAddressedToolResultStore(root, namespace=namespace) as store:
                if reference == damaged_reference:
                    with pytest.raises(CorruptBlobError) as raised:
                        store.read(reference)
                    assert raised.value.missing
                else:
                    assert store.read(reference) == content
        # Writes go on after the upgrade; the damaged content written again mends its references.
        fresh = alice.write(key="after.txt", content="after the upgrade")
        assert alice.write(key="mend.txt", content=damaged_content) == damaged_reference
        assert alice.read(fresh) == "after the upgrade"
        assert verify(alice).clean
    after = _answers(root)
    assert after[0][: len(before[0])] == before[0]


def _postgres_schema(connection: Any, schema: str) -> dict[str, set[tuple[Any, ...]]]:
    """:returns: What a PostgreSQL schema holds: columns and routines, indexes, views, function bodies, triggers."""
    connection.execute(f"SET LOCAL search_path TO {schema}")
    return {
        "columns": _postgres_columns(connection, schema),
        "indexes": set(
            connection.execute(
                "SELECT indexname, replace(indexdef, %s, '') FROM pg_indexes WHERE schemaname = %s "
                "AND tablename <> '_casstore_migrations'",
                (f"{schema}.", schema),
            ).fetchall()
        ),
        "views": set(
            connection.execute("SELECT viewname, definition FROM pg_views WHERE schemaname = %s", (schema,)).fetchall()
        ),
        "functions": set(
            connection.execute(
                "SELECT p.proname, p.prosrc FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
                "WHERE n.nspname = %s",
                (schema,),
            ).fetchall()
        ),
        "triggers": set(
            connection.execute(
                "SELECT event_object_table, trigger_name, event_manipulation FROM information_schema.triggers "
                "WHERE trigger_schema = %s",
                (schema,),
            ).fetchall()
        ),
    }


def _postgres_as_of_0015(url: str) -> None:
    """The shared index of today's schema turned into exactly what PostgreSQL's migration 0015 left, same rows."""
    import psycopg

    scripts = dict(postgres_migration_scripts())
    lean = scripts["0011_leaner_history"]
    restored = [
        re.search(pattern, lean, flags=re.DOTALL).group(0)  # type: ignore[union-attr]
        for pattern in (
            r"CREATE UNIQUE INDEX namespace_references_by_digest.*?;\n",
            r"CREATE VIEW readable_blobs AS.*?;\n",
            r"CREATE OR REPLACE FUNCTION casstore_record_stored_write\(.*?\$\$;\n",
        )
    ]
    with psycopg.connect(url) as connection:
        connection.execute("DROP VIEW offloaded_parts")  # 0018, which applies again after 0016
        connection.execute("DELETE FROM _casstore_migrations WHERE name = %s", (DIGESTS_KEPT_ONCE,))
        connection.execute("DROP FUNCTION casstore_attach_references() CASCADE")  # and its three triggers
        connection.execute("DROP VIEW readable_blobs")
        connection.execute("DROP INDEX namespace_references_by_blob")
        connection.execute("ALTER TABLE namespace_references DROP COLUMN blob_id")
        for statement in restored:
            connection.execute(statement)
        connection.execute("DELETE FROM _casstore_migrations WHERE name = %s", (REFERENCES_BY_BLOB_ID,))
        connection.execute("CREATE SCHEMA reference_0015")
        connection.execute("SET LOCAL search_path TO reference_0015")
        for _, script in postgres_migration_scripts()[: MIGRATION_NAMES.index(REFERENCES_BY_BLOB_ID)]:
            connection.execute(script)
        assert _postgres_schema(connection, "public") == _postgres_schema(connection, "reference_0015")
        connection.execute("DROP SCHEMA reference_0015 CASCADE")


def test_a_shared_index_of_0015_upgrades_in_place_with_its_damage(postgres_url: str, s3_bucket_url: S3Location) -> None:
    import psycopg

    def shared(namespace: str) -> SharedToolResultStore:
        return SharedToolResultStore(
            index_url=postgres_url,
            blob_url=s3_bucket_url.url,
            blob_options=s3_bucket_url.options,
            namespace=namespace,
            inline_max=4096,
        )

    written: dict[tuple[str, str], str | bytes] = {}
    for namespace in ("alice", "bob"):
        with shared(namespace) as store:
            for number in range(12):
                content: str | bytes = f"result {number % 5}\n" * 40 if number % 4 else os.urandom(9000)
                written[(namespace, store.write(key=f"{number}_tool_call.txt", content=content))] = content
    damaged_reference, damaged_content = next(iter(written.items()))[0][1], next(iter(written.values()))
    damaged = blake3_hex(damaged_content if isinstance(damaged_content, bytes) else damaged_content.encode())
    as_before_blob_location(postgres_url, s3_bucket_url)
    _postgres_as_of_0015(postgres_url)
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        connection.execute("DELETE FROM blobs WHERE digest = %s", (damaged,))  # a damaged index of 0015
        before = connection.execute("SELECT * FROM writes ORDER BY id").fetchall()
    with shared("alice") as alice, shared("bob") as bob:
        with psycopg.connect(postgres_url, autocommit=True) as connection:
            assert connection.execute("SELECT * FROM writes ORDER BY id").fetchall() == before
            assert (
                connection.execute(
                    "SELECT r.id FROM namespace_references r LEFT JOIN blobs b ON b.digest = r.digest "
                    "WHERE r.blob_id IS DISTINCT FROM b.id"
                ).fetchall()
                == []
            )
            assert connection.execute("SELECT digest FROM namespace_references WHERE blob_id IS NULL").fetchall() == [
                (damaged,)
            ]
        stores = {"alice": alice, "bob": bob}
        for (namespace, reference), content in written.items():
            if reference == damaged_reference and namespace == "alice":
                with pytest.raises(CorruptBlobError) as raised:
                    alice.read(reference)
                assert raised.value.missing
            else:
                assert stores[namespace].read(reference) == content
        assert verify(alice).dangling_writes == [("alice", damaged_reference)]
        # A duplicate write through the one-statement function (rewritten by 0016), and the damaged content mended.
        again = next(reference for (namespace, reference) in written if namespace == "bob")
        assert bob.write(key="again.txt", content=written[("bob", again)]) == again
        assert alice.write(key="mend.txt", content=damaged_content) == damaged_reference
        assert alice.read(damaged_reference) == damaged_content
        assert verify(alice).clean


def test_the_hot_statements_find_references_by_an_index_on_postgresql(
    postgres_url: str, s3_bucket_url: S3Location
) -> None:
    """PostgreSQL plans by its statistics (a small table is read whole); with sequential scans off, none is needed."""
    import psycopg

    from casstore.postgres import translate

    with SharedToolResultStore(
        index_url=postgres_url, blob_url=s3_bucket_url.url, blob_options=s3_bucket_url.options
    ) as store:
        reference = store.write(key="a.txt", content="some content\n" * 20)
    digest = reference.split("/")[1] + reference.split("/")[2].removesuffix(".txt")
    values = {"digest": digest, "namespace": "default", "is_binary": 0, "extension": ".txt", "key": "k"}
    values["grace"] = "-1 days"
    arguments = {
        "read": ("digest", "namespace", "is_binary", "extension"),
        "read of a reference without its blob row": ("digest", "namespace", "is_binary", "extension"),
        "write: a repeated write": ("key", "digest", "namespace", "is_binary", "extension"),
        "write: find the reference": ("digest", "namespace", "is_binary", "extension"),
        "write: find a reference without its blob row": ("digest", "namespace", "is_binary", "extension"),
        "write: make the reference": ("namespace", "digest", "digest", "is_binary", "extension", "is_binary"),
        "is visible": ("digest", "digest", "namespace", "is_binary", "extension"),
        "gc: what nothing references": ("grace",),
        "gc: unreferenced digests": (),
    }
    with psycopg.connect(postgres_url) as connection:
        connection.execute("SET LOCAL enable_seqscan = off")
        for name, statement in _hot_statements(postgres=True).items():
            plan = "\n".join(
                row[0]
                for row in connection.execute(
                    f"EXPLAIN {translate(statement)}", [values[argument] for argument in arguments[name]]
                )
            )
            assert "Seq Scan on namespace_references" not in plan, (name, plan)
            if "namespace_references" in statement and not statement.startswith("INSERT INTO namespace_references"):
                assert _BY_BLOB in plan, (name, plan)
