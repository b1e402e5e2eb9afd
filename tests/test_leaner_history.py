"""
Migration 0011, the leaner history: a store of migration 0010 with data upgrades in place, every reference still
reads, and every answer of the history is the same before and after; the views keep the old columns.
"""

import contextlib
import os
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import sqlite_utils
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from casstore import ContentAddressedToolResultStore, ReferenceNotFoundError, SharedToolResultStore
from casstore.index import milliseconds
from casstore.maintenance import collect_garbage, verify
from casstore.postgres_schema import migration_scripts as postgres_migration_scripts
from casstore.references import extension_of, reference_kind
from casstore.schema import MIGRATION_NAMES, _migration_from_script
from tests.servers import S3Location
from tests.store_backends import as_before_blob_location

REPOSITORY = Path(__file__).resolve().parent.parent
_LEAN = "0011_leaner_history"
# What a person asks of the history (the docs' questions among them): the same answers before and after.
_QUESTIONS = (
    "SELECT id, namespace, key, digest, kind, size, reference, written_at FROM writes ORDER BY id",
    "SELECT digest, namespace, reference FROM visible_references ORDER BY digest, namespace, reference",
    "SELECT * FROM dedup_summary",
    "SELECT * FROM namespace_summary ORDER BY namespace",
    "SELECT * FROM repeated_results ORDER BY digest",
    "SELECT namespace, reference, digest, size, stored_in, frame, encoding, needs FROM readable_blobs "
    "ORDER BY namespace, reference",
    "SELECT o.tool_name, o.tool_call_id, part.value AS reference, w.size, b.stored_size, b.stored_in "
    "FROM offloads o, json_each(o.refs) part "
    "JOIN writes w ON w.reference = part.value AND w.namespace = o.namespace "
    "JOIN blobs b ON b.digest = w.digest GROUP BY o.id, part.key ORDER BY o.id",
)
# The objects 0011 replaces, as migration 0010 left them.
_OLD_OBJECTS = (
    "writes",
    "visible_references",
    "dedup_summary",
    "namespace_summary",
    "repeated_results",
    "readable_blobs",
)


def _schema_through(last: str) -> dict[str, tuple[str, str]]:
    """:returns: `sqlite_master`'s type and SQL of every object an index of the migrations up to `last` has, by name."""
    with contextlib.closing(sqlite3.connect(":memory:")) as connection:
        database = sqlite_utils.Database(connection)
        for name in MIGRATION_NAMES[: MIGRATION_NAMES.index(last) + 1]:
            script = (REPOSITORY / "migrations" / f"{name}.sql").read_text(encoding="utf-8")
            _migration_from_script(script)(database)
        return {
            row[0]: (row[1], row[2])
            for row in connection.execute("SELECT name, type, sql FROM sqlite_master WHERE sql IS NOT NULL")
        }


def _schema_0010() -> dict[str, str]:
    """:returns: `sqlite_master`'s SQL of every object an index of migrations 0001 to 0010 has, by name."""
    return {name: sql for name, (_, sql) in _schema_through(MIGRATION_NAMES[MIGRATION_NAMES.index(_LEAN) - 1]).items()}


def _undo_migrations_after_0011(connection: sqlite3.Connection) -> None:
    """
    Drop what the migrations after 0011 added, put back what they changed as 0011 left it (0013 made the table
    `blob_frames` a view over `frame_chunks` and `frame_slots`, and redefined the views that join it: the frames go
    back into the table; 0017 made the table `blob_dependencies` a view over the slots: its rows go back too; 0019 made
    the table `blobs` a view over `blob_rows`: its rows go back as the view shows them), and forget that they were
    applied.
    """
    through_0011 = _schema_through(_LEAN)
    latest = _schema_through(MIGRATION_NAMES[-1])
    frames = None
    if latest["blob_frames"][0] == "view":
        frames = connection.execute("SELECT blob_id, frame, size FROM blob_frames").fetchall()
    dependencies = None
    if latest["blob_dependencies"][0] == "view":
        dependencies = connection.execute("SELECT blob_id, needs_id, encoding FROM blob_dependencies").fetchall()
    blobs = None
    if latest["blobs"][0] == "view":  # 0019: the rows are `blob_rows`', their times as the view shows them
        blobs = connection.execute(
            "SELECT id, digest, size, stored_size, stored_in, first_seen, last_seen FROM blobs ORDER BY id"
        ).fetchall()
    removed = [name for name in through_0011 if name not in latest]
    added = {name: kind for name, (kind, _) in latest.items() if name not in through_0011}
    changed = {
        name: kind for name, (kind, sql) in latest.items() if name in through_0011 and through_0011[name] != (kind, sql)
    }
    for kind in ("trigger", "view", "index", "table"):
        for name in sorted(name for name, added_kind in added.items() if added_kind == kind):
            connection.execute(f'DROP {kind.upper()} "{name}"')
        for name in sorted(name for name, changed_kind in changed.items() if changed_kind == kind):
            connection.execute(f'DROP {kind.upper()} "{name}"')
    for kind in ("table", "index", "view", "trigger"):
        for name in sorted(name for name in [*changed, *removed] if through_0011[name][0] == kind):
            connection.execute(through_0011[name][1])
    if blobs is not None:
        connection.executemany("INSERT INTO blobs VALUES (?, ?, ?, ?, ?, ?, ?)", blobs)
    if frames is not None:
        connection.executemany("INSERT INTO blob_frames (blob_id, frame, size) VALUES (?, ?, ?)", frames)
    if dependencies is not None:
        connection.executemany(
            "INSERT INTO blob_dependencies (blob_id, needs_id, encoding) VALUES (?, ?, ?)", dependencies
        )
    later = MIGRATION_NAMES[MIGRATION_NAMES.index(_LEAN) + 1 :]
    connection.executemany("DELETE FROM _sqlite_migrations WHERE name = ?", [(name,) for name in later])


def _answers(root: Path) -> list[list[tuple[Any, ...]]]:
    with contextlib.closing(sqlite3.connect(root / "index.db")) as connection:
        return [connection.execute(question).fetchall() for question in _QUESTIONS]


def _as_of_0010(root: Path) -> None:
    """
    Turn an index of today's schema into exactly the index migration 0010 left, with the same history: the old tables
    `writes` and `visible_references` hold the rows the views show, and 0011 is not recorded as applied.
    """
    old = _schema_0010()
    with contextlib.closing(sqlite3.connect(root / "index.db")) as connection, connection:
        writes = connection.execute(
            "SELECT id, namespace, key, digest, kind, size, reference, written_at FROM writes"
        ).fetchall()
        visible = connection.execute("SELECT digest, namespace, reference FROM visible_references").fetchall()
        _undo_migrations_after_0011(connection)
        for view in ("readable_blobs", "dedup_summary", "namespace_summary", "repeated_results", "writes"):
            connection.execute(f"DROP VIEW {view}")
        connection.execute("DROP VIEW visible_references")
        for table in ("write_log", "namespace_references", "namespaces"):
            connection.execute(f"DROP TABLE {table}")
        for name in _OLD_OBJECTS:
            connection.execute(old[name])
        connection.executemany("INSERT INTO writes VALUES (?, ?, ?, ?, ?, ?, ?, ?)", writes)
        connection.executemany("INSERT INTO visible_references VALUES (?, ?, ?)", visible)
        connection.execute("DELETE FROM _sqlite_migrations WHERE name = ?", (_LEAN,))
        connection.execute(f"PRAGMA user_version = {MIGRATION_NAMES.index(_LEAN)}")
    with contextlib.closing(sqlite3.connect(root / "index.db")) as connection:
        now = {
            row[0]: row[1] for row in connection.execute("SELECT name, sql FROM sqlite_master WHERE sql IS NOT NULL")
        }
    now.pop("_sqlite_migrations", None)
    now.pop("idx__sqlite_migrations_migration_set_name", None)
    assert now == old  # the index is one migration 0010 left: nothing more, nothing less


def _fill(root: Path) -> dict[str, list[tuple[str, str | bytes]]]:
    """Write a history of every shape into a store: namespaces, text and binary, repeats, odd keys, forgotten writes."""
    written: dict[str, list[tuple[str, str | bytes]]] = {"alice": [], "bob": [], "carol": []}
    contents: list[tuple[str, str | bytes]] = [
        ("1_read_file_call_a.txt", "the same text\n" * 50),
        ("2_read_file_call_b.txt", "the same text\n" * 50),  # a repeat
        ("3_dump_call_c.bin", bytes(range(256)) * 40),  # binary, stored in a file
        ("4_grep_call_d", "no extension\n"),
        ("5_grep_call_e.report final", "an extension too odd for a reference\n"),
        ("6_image_call_f.png", b"\x89PNG" + bytes(100)),
        ("7_notes_call_g.txt", bytes(range(256)) * 40),  # the same bytes under another extension
    ]
    for namespace, history in written.items():
        with ContentAddressedToolResultStore(root, namespace=namespace, inline_max=4096) as store:
            for key, content in contents if namespace != "carol" else contents[:2]:
                store.write(key=key, content=content)
                history.append((key, content))
            if namespace == "alice":
                store.write(key="8_text.txt", content="alice's own\n")
                history.append(("8_text.txt", "alice's own\n"))
    with ContentAddressedToolResultStore(root, namespace="carol") as store:
        collect_garbage(store, namespace="carol")  # carol's writes forgotten: her namespace row stays, her refs go
    written["carol"] = []
    return written


def test_a_store_of_migration_0010_upgrades_in_place_with_the_same_history(store_root: Path) -> None:
    written = _fill(store_root)
    _as_of_0010(store_root)
    before = _answers(store_root)
    assert before[0] and before[1]  # there is a history to compare
    with ContentAddressedToolResultStore(store_root, namespace="alice") as alice:
        assert _answers(store_root) == before  # the upgrade happened on opening, and changed no answer
        with contextlib.closing(sqlite3.connect(store_root / "index.db")) as connection:
            applied = [row[0] for row in connection.execute("SELECT name FROM _sqlite_migrations ORDER BY id")]
            kinds = dict(
                connection.execute(
                    "SELECT name, type FROM sqlite_master WHERE name IN ('writes', 'visible_references')"
                )
            )
        from_0011 = list(MIGRATION_NAMES[MIGRATION_NAMES.index(_LEAN) :])
        assert applied[-len(from_0011) :] == from_0011  # 0011 and every migration after it, applied on opening
        assert kinds == {"writes": "view", "visible_references": "view"}
        for namespace, reference in [(row[1], row[6]) for row in before[0]]:
            with ContentAddressedToolResultStore(store_root, namespace=namespace) as store:
                content = dict(written[namespace])[next(row[2] for row in before[0] if row[6] == reference)]
                read_back = store.read(reference)
                assert read_back == content and type(read_back) is type(content)
        assert verify(alice).clean
        # Writes go on, after the old ids.
        fresh = alice.write(key="9_after.txt", content="after the upgrade")
        repeat = alice.write(key="9_again.txt", content="the same text\n" * 50)
        assert alice.read(fresh) == "after the upgrade" and repeat == before[0][0][6]
    after = _answers(store_root)
    assert after[0][: len(before[0])] == before[0]
    assert [row[0] for row in after[0][len(before[0]) :]] == [before[0][-1][0] + 1, before[0][-1][0] + 2]
    with ContentAddressedToolResultStore(store_root, namespace="carol") as carol, pytest.raises(ReferenceNotFoundError):
        carol.read(before[0][0][6])


def test_the_views_show_what_a_write_returned(store_root: Path) -> None:
    keys = ["a.txt", "b", "c.tar.gz", "d.final version", "e.PNG", "f.x-y_z+1"]
    with ContentAddressedToolResultStore(store_root) as store:
        returned = [store.write(key=key, content=key * 3) for key in keys]
        returned.append(store.write(key="g.bin", content=b"g" * 10))
    with contextlib.closing(sqlite3.connect(store_root / "index.db")) as connection:
        shown = connection.execute("SELECT key, reference, kind, size FROM writes ORDER BY id").fetchall()
        visible = [row[0] for row in connection.execute("SELECT reference FROM visible_references ORDER BY reference")]
    assert [row[1] for row in shown] == returned
    assert sorted(set(returned)) == visible
    assert shown[-1][2:] == ("binary", 10) and all(kind == "text" for _, _, kind, _ in shown[:-1])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(min_value=0, max_value=253402300799999))
def test_a_time_survives_text_and_back(store_root: Path, moment: int) -> None:
    """`write_log` keeps milliseconds, the view shows them as text, and that text set by hand stores the same."""
    with ContentAddressedToolResultStore(store_root) as store:
        store.write(key="a.txt", content="a")
    with contextlib.closing(sqlite3.connect(store_root / "index.db")) as connection, connection:
        connection.execute("UPDATE write_log SET written_at = ?", (moment,))
        (text,) = connection.execute("SELECT written_at FROM writes").fetchone()
        assert milliseconds(text) == moment
        connection.execute("UPDATE writes SET written_at = ?", (text,))
        assert connection.execute("SELECT written_at FROM write_log").fetchone() == (moment,)


def _postgres_statement(name: str, pattern: str) -> str:
    script = (REPOSITORY / "migrations" / "postgresql" / f"{name}.sql").read_text(encoding="utf-8")
    found = re.search(pattern, script, flags=re.DOTALL)
    assert found is not None, (name, pattern)
    return found[0]


def _postgres_0010_objects() -> list[str]:
    """The statements that made, in migrations 0001 to 0010, what the PostgreSQL index's 0011 replaced."""
    return [
        _postgres_statement("0001_blobs_and_writes", r"CREATE TABLE writes \(.*?\n\);"),
        _postgres_statement("0001_blobs_and_writes", r"CREATE TABLE visible_references \(.*?\n\);"),
        *(
            _postgres_statement("0003_summary_views", rf"CREATE VIEW {view} AS\n.*?;")
            for view in ("dedup_summary", "namespace_summary", "repeated_results")
        ),
        _postgres_statement("0008_learned_encodings", r"CREATE VIEW readable_blobs AS\n.*?;"),
        (REPOSITORY / "migrations" / "postgresql" / "0007_writes_in_one_statement.sql").read_text(encoding="utf-8"),
    ]


def _postgres_columns(connection: Any, schema: str) -> set[tuple[Any, ...]]:
    rows = connection.execute(
        "SELECT table_name, column_name, data_type, ordinal_position FROM information_schema.columns "
        "WHERE table_schema = %s AND table_name <> '_casstore_migrations'",
        (schema,),
    ).fetchall()
    routines = connection.execute(
        "SELECT routine_name, '', '', 0 FROM information_schema.routines WHERE routine_schema = %s", (schema,)
    ).fetchall()
    return set(rows) | set(routines)


def _postgres_views(connection: Any) -> set[str]:
    """:returns: The views of the public schema."""
    rows = connection.execute("SELECT table_name FROM information_schema.views WHERE table_schema = 'public'")
    return {row[0] for row in rows.fetchall()}


def _postgres_objects_through(connection: Any, last: str) -> tuple[set[str], set[str]]:
    """:returns: The tables and views, and the functions, the PostgreSQL migrations up to `last` make."""
    connection.execute("CREATE SCHEMA scratch_migrations")
    connection.execute("SET LOCAL search_path TO scratch_migrations")
    for _, script in postgres_migration_scripts()[: MIGRATION_NAMES.index(last) + 1]:
        connection.execute(script)
    rows = connection.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = 'scratch_migrations'"
    ).fetchall()
    functions = connection.execute(
        "SELECT routine_name FROM information_schema.routines WHERE routine_schema = 'scratch_migrations'"
    ).fetchall()
    connection.execute("DROP SCHEMA scratch_migrations CASCADE")
    connection.execute("SET LOCAL search_path TO public")
    return {row[0] for row in rows}, {row[0] for row in functions}


def _postgres_undo_migrations_after_0011(connection: Any) -> None:
    """
    Drop the tables and functions (with their triggers) the PostgreSQL migrations after 0011 added, and forget them.
    The caller drops what they changed (`namespace_references`, `readable_blobs`, `casstore_record_stored_write`).
    """
    tables, functions = _postgres_objects_through(connection, MIGRATION_NAMES[-1])
    tables_0011, functions_0011 = _postgres_objects_through(connection, _LEAN)
    views = _postgres_views(connection)
    for view in sorted((tables - tables_0011) & views):
        connection.execute(f'DROP VIEW "{view}"')
    for table in sorted(tables - tables_0011 - views):
        connection.execute(f'DROP TABLE "{table}" CASCADE')
    for function in sorted(functions - functions_0011):
        connection.execute(f'DROP FUNCTION "{function}" CASCADE')
    later = list(MIGRATION_NAMES[MIGRATION_NAMES.index(_LEAN) + 1 :])
    connection.execute("DELETE FROM _casstore_migrations WHERE name = ANY(%s)", (later,))


def _postgres_as_of_0010(url: str) -> None:
    """The shared index of today's schema turned into exactly what migration 0010 left, with the same history."""
    import psycopg

    with psycopg.connect(url) as connection:
        writes = connection.execute(
            "SELECT id, namespace, key, digest, kind, size, reference, written_at FROM writes"
        ).fetchall()
        visible = connection.execute("SELECT digest, namespace, reference FROM visible_references").fetchall()
        for view in ("readable_blobs", "dedup_summary", "namespace_summary", "repeated_results", "writes"):
            connection.execute(f"DROP VIEW {view}")
        connection.execute("DROP VIEW visible_references")
        _postgres_undo_migrations_after_0011(connection)
        connection.execute("DROP FUNCTION casstore_set_written_at()")
        connection.execute("DROP FUNCTION casstore_record_stored_write")
        for table in ("write_log", "namespace_references", "namespaces"):
            connection.execute(f"DROP TABLE {table}")
        for statement in _postgres_0010_objects():
            connection.execute(statement)
        with connection.cursor() as cursor:
            cursor.executemany("INSERT INTO writes VALUES (%s, %s, %s, %s, %s, %s, %s, %s)", writes)
            cursor.executemany("INSERT INTO visible_references VALUES (%s, %s, %s)", visible)
        connection.execute(
            "SELECT setval(pg_get_serial_sequence('writes', 'id'), "
            "(SELECT coalesce(max(id), 0) + 1 FROM writes), false)"
        )
        connection.execute("DELETE FROM _casstore_migrations WHERE name = %s", (_LEAN,))
        # What 0001 to 0010 make, in a schema of its own: the same columns, views and functions.
        connection.execute("CREATE SCHEMA reference_0010")
        connection.execute("SET LOCAL search_path TO reference_0010")
        for name, script in postgres_migration_scripts()[: MIGRATION_NAMES.index(_LEAN)]:
            assert name != _LEAN
            connection.execute(script)
        assert _postgres_columns(connection, "public") == _postgres_columns(connection, "reference_0010")
        connection.execute("DROP SCHEMA reference_0010 CASCADE")


def _postgres_answers(url: str) -> list[list[tuple[Any, ...]]]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as connection:
        return [connection.execute(question).fetchall() for question in _QUESTIONS[:-1]]  # the last is SQLite's


def test_a_shared_index_of_migration_0010_upgrades_in_place_with_the_same_history(
    postgres_url: str, s3_bucket_url: S3Location
) -> None:
    def shared(namespace: str) -> SharedToolResultStore:
        return SharedToolResultStore(
            index_url=postgres_url,
            blob_url=s3_bucket_url.url,
            blob_options=s3_bucket_url.options,
            namespace=namespace,
            inline_max=4096,
        )

    contents: list[tuple[str, str | bytes]] = [
        ("1_read_file_call_a.txt", "the same text\n" * 50),
        ("2_read_file_call_b.txt", "the same text\n" * 50),
        ("3_dump_call_c.bin", os.urandom(20_000)),  # an object
        ("4_grep_call_d", "no extension\n"),
        ("5_grep_call_e.report final", "an extension too odd for a reference\n"),
        ("6_image_call_f.png", b"\x89PNG" + bytes(100)),
    ]
    for namespace in ("alice", "bob", "carol"):
        with shared(namespace) as store:
            for key, content in contents:
                store.write(key=key, content=content)
    with shared("carol") as carol:
        collect_garbage(carol, namespace="carol")
    _postgres_as_of_0010(postgres_url)  # no `store_settings` then: 0022 is undone with the rest
    as_before_blob_location(postgres_url, s3_bucket_url)
    before = _postgres_answers(postgres_url)
    assert len(before[0]) == 12 and len(before[1]) == 10  # the first two are one reference
    with shared("alice") as alice, shared("bob") as bob:
        assert _postgres_answers(postgres_url) == before
        stores = {"alice": alice, "bob": bob}
        for row, (_, content) in zip(before[0], contents * 2, strict=True):
            read_back = stores[row[1]].read(row[6])
            assert read_back == content and type(read_back) is type(content)
        assert verify(alice).clean
        # A duplicate goes through the one-statement function (rewritten by 0011); new content through the tables.
        again = alice.write(key="7_again.txt", content="the same text\n" * 50)
        fresh = bob.write(key="7_fresh.txt", content="after the upgrade")
        assert again == before[0][0][6] and bob.read(fresh) == "after the upgrade"
        with pytest.raises(ReferenceNotFoundError):
            alice.read(fresh)
    after = _postgres_answers(postgres_url)
    assert after[0][: len(before[0])] == before[0]
    assert [row[0] for row in after[0][len(before[0]) :]] == [before[0][-1][0] + 1, before[0][-1][0] + 2]


_KEYS = st.from_regex(
    r"[0-9]{1,3}_[a-z_]{1,12}_call_[0-9a-f]{1,16}(\.[A-Za-z0-9][A-Za-z0-9_+-]{0,17})?", fullmatch=True
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=_KEYS, content=st.one_of(st.text(max_size=40), st.binary(max_size=40)), namespace=st.sampled_from("ab"))
def test_the_views_derive_every_reference_a_write_returns(
    store_root: Path, key: str, content: str | bytes, namespace: str
) -> None:
    """Whatever the extension (kept, or too long and left out) and the kind: the views show what write returned."""
    with ContentAddressedToolResultStore(store_root, namespace=namespace) as store:
        reference = store.write(key=key, content=content)
        assert reference_kind(reference) == (0 if isinstance(content, str) else 1, extension_of(key))
        assert store.read(reference) == content
    with contextlib.closing(sqlite3.connect(store_root / "index.db")) as connection:
        last = connection.execute(
            "SELECT namespace, key, reference, kind FROM writes ORDER BY id DESC LIMIT 1"
        ).fetchone()
        visible = connection.execute(
            "SELECT count(*) FROM visible_references WHERE namespace = ? AND reference = ?", (namespace, reference)
        ).fetchone()
    assert last == (namespace, key, reference, "text" if isinstance(content, str) else "binary")
    assert visible == (1,)
