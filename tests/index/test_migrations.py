"""
The schema: one baseline migration per engine, plain tables, the same on both; later migrations apply on top, an
index of a development version or of a newer release is refused and left as it was.
"""

import contextlib
import random
import shutil
import sqlite3
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest
import sqlite_utils

from casstore import (
    ContentAddressedToolResultStore,
    CorruptBlobError,
    IndexDamagedError,
    SchemaError,
    SharedToolResultStore,
)
from casstore.index import postgres_schema, schema, sqlite_file
from casstore.index.database import Database
from casstore.index.postgres_schema import MIGRATION_NAMES as POSTGRES_MIGRATION_NAMES
from casstore.index.schema import MIGRATION_NAMES, MIGRATION_SET, MIGRATIONS
from casstore.maintenance.checks import verify
from casstore.stores.local import RepositoryToolResultStore
from tests.helpers import create_store, tree_fingerprint
from tests.servers import S3Location

REPOSITORY = Path(__file__).resolve().parents[2]
MIGRATIONS_FOLDER = REPOSITORY / "migrations"
INDEX_V1 = REPOSITORY / "tests" / "data" / "index-v1"


def _applied(root: Path) -> list[str]:
    db = sqlite_utils.Database(root / "index.db")
    try:
        return [migration.name for migration in MIGRATIONS.applied(db)]
    finally:
        db.close()


def test_a_new_store_applies_the_baseline(store: ContentAddressedToolResultStore) -> None:
    assert _applied(store.root) == list(MIGRATION_NAMES) == ["0001_baseline", "0002_archives", "0003_lost_blobs"]
    with contextlib.closing(sqlite3.connect(store.root / "index.db")) as connection:
        assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert connection.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATION_NAMES)


# The tables and views a person queries (docs/schema.md), besides the search index's own (`search_*`).
TABLES = {
    "blobs",
    "blob_frames",
    "write_rows",
    "dictionaries",
    "dictionary_samples",
    "offloads",
    "compactions",
    "archives",
    "store_settings",
}
VIEWS = {
    "writes",
    "dedup_summary",
    "namespace_summary",
    "repeated_results",
    "offload_summary",
    "offloaded_parts",
    "archived_parts",
}


def test_the_schema_is_plain_tables_no_trigger_and_read_only_views(store: ContentAddressedToolResultStore) -> None:
    store.write(key="a.txt", content="seen")
    with contextlib.closing(sqlite3.connect(store.root / "index.db")) as connection:
        kinds = connection.execute(
            "SELECT type, name FROM sqlite_master "
            "WHERE type IN ('table', 'view', 'trigger') AND name NOT LIKE 'sqlite_%'"
        ).fetchall()
        tables = {name for kind, name in kinds if kind == "table" and not name.startswith(("search_", "_sqlite"))}
        assert tables == TABLES
        assert {name for kind, name in kinds if kind == "view"} == VIEWS
        assert [name for kind, name in kinds if kind == "trigger"] == []
        # A view takes no write: nothing is written through one.
        for view in VIEWS:
            with pytest.raises(sqlite3.OperationalError, match="cannot modify"):
                connection.execute(f"DELETE FROM {view}")


def test_both_engines_have_the_same_tables_and_columns(
    store: ContentAddressedToolResultStore, postgres_url: str, s3_bucket_url: S3Location
) -> None:
    store.write(key="a.txt", content="seen")
    with contextlib.closing(sqlite3.connect(store.root / "index.db")) as connection:
        sqlite_columns = {
            name: [row[1] for row in connection.execute(f"SELECT * FROM pragma_table_xinfo('{name}')")]
            for name in TABLES | VIEWS
        }
    SharedToolResultStore(
        index_url=postgres_url, blob_url=s3_bucket_url.url, blob_options=s3_bucket_url.options
    ).close()
    with contextlib.closing(psycopg.connect(postgres_url, autocommit=True)) as connection:
        postgres_columns = {
            name: [
                row[0]
                for row in connection.execute(
                    "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() "
                    "AND table_name = %s ORDER BY ordinal_position",
                    (name,),
                )
            ]
            for name in TABLES | VIEWS
        }
    assert postgres_columns == sqlite_columns
    assert sqlite_columns["writes"][:8] == [
        "id",
        "namespace",
        "key",
        "digest",
        "kind",
        "extension",
        "size",
        "written_at",
    ]
    assert "reference" in sqlite_columns["writes"]


def test_an_index_of_a_development_version_is_refused_and_left_byte_for_byte(store_root: Path) -> None:
    """`tests/data/index-v1` was written by a development version of casstore, before the baseline schema."""
    shutil.copytree(INDEX_V1, store_root, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    before = tree_fingerprint(store_root)
    with pytest.raises(SchemaError, match="development version of casstore") as refused:
        ContentAddressedToolResultStore(store_root)
    assert "Start a new store" in str(refused.value)
    assert not isinstance(refused.value, IndexDamagedError)
    assert tree_fingerprint(store_root) == before


def test_a_shared_index_of_a_development_version_is_refused_unchanged(
    postgres_url: str, s3_bucket_url: S3Location
) -> None:
    with contextlib.closing(psycopg.connect(postgres_url, autocommit=True)) as connection:
        connection.execute("CREATE TABLE _casstore_migrations (id SERIAL PRIMARY KEY, name TEXT, applied_at TEXT)")
        connection.execute("INSERT INTO _casstore_migrations (name, applied_at) VALUES ('0001_blobs_and_writes', 'x')")
        connection.execute("CREATE TABLE write_log (id SERIAL PRIMARY KEY, key TEXT)")
    with pytest.raises(SchemaError, match="development version of casstore"):
        SharedToolResultStore(index_url=postgres_url, blob_url=s3_bucket_url.url, blob_options=s3_bucket_url.options)
    with contextlib.closing(psycopg.connect(postgres_url, autocommit=True)) as connection:
        tables = {row[0] for row in connection.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}
    assert tables == {"_casstore_migrations", "write_log"}


# The migration a newer release would add, after this release's own.
LATER = f"{len(MIGRATION_NAMES) + 1:04d}_notes"


def _with_a_later_migration(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make casstore's migrations this release's plus `LATER` (on both engines), from a temporary folder."""
    added = (
        "ALTER TABLE write_rows ADD COLUMN note TEXT;\n"
        "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL);\n"
    )
    sqlite_folder, postgres_folder = tmp_path / "migrations", tmp_path / "migrations-postgresql"
    for folder, source in ((sqlite_folder, MIGRATIONS_FOLDER), (postgres_folder, MIGRATIONS_FOLDER / "postgresql")):
        folder.mkdir(parents=True)
        for script in source.glob("*.sql"):
            shutil.copy(script, folder)
        (folder / f"{LATER}.sql").write_text(
            added.replace("INTEGER PRIMARY KEY", "BIGSERIAL PRIMARY KEY") if folder == postgres_folder else added
        )
    migrations, names = schema.load_migrations(sqlite_folder)
    monkeypatch.setattr(sqlite_file, "MIGRATIONS", migrations)
    monkeypatch.setattr(sqlite_file, "MIGRATION_NAMES", names)
    scripts = [(path.stem, path.read_text()) for path in sorted(postgres_folder.glob("*.sql"))]
    monkeypatch.setattr(postgres_schema, "migration_scripts", lambda: scripts)
    monkeypatch.setattr(postgres_schema, "MIGRATION_NAMES", tuple(name for name, _ in scripts))


def test_a_later_migration_applies_to_a_store_with_data_and_an_older_release_refuses_it(
    store_root: Path, tmp_path: Path, postgres_url: str, s3_bucket_url: S3Location
) -> None:
    def local() -> RepositoryToolResultStore:
        return ContentAddressedToolResultStore(store_root)

    def shared() -> RepositoryToolResultStore:
        return SharedToolResultStore(
            index_url=postgres_url, blob_url=s3_bucket_url.url, blob_options=s3_bucket_url.options
        )

    def local_applied() -> list[str]:
        return _applied(store_root)

    def shared_applied() -> list[str]:
        return _postgres_applied(postgres_url)

    engines: list[tuple[Callable[[], RepositoryToolResultStore], Callable[[], list[str]]]] = [
        (local, local_applied),
        (shared, shared_applied),
    ]
    for open_store, applied in engines:
        with open_store() as store:
            reference = store.write(key="a.txt", content="written under the baseline")
        with pytest.MonkeyPatch.context() as monkeypatch:
            _with_a_later_migration(tmp_path / open_store.__name__, monkeypatch)
            with open_store() as store:
                assert store.read(reference) == "written under the baseline"
                later = store.write(key="b.txt", content="written after the later migration")
                assert verify(store).clean
            assert applied() == [*MIGRATION_NAMES, LATER]
        # This release does not know the later migration: it refuses the index a newer casstore migrated, and
        # changes nothing.
        with pytest.raises(SchemaError, match="newer casstore") as refused:
            open_store()
        assert LATER in str(refused.value) and "nothing was changed" in str(refused.value)
        assert applied() == [*MIGRATION_NAMES, LATER]
        assert later


def _postgres_applied(url: str) -> list[str]:
    with contextlib.closing(psycopg.connect(url, autocommit=True)) as connection:
        return [row[0] for row in connection.execute("SELECT name FROM _casstore_migrations ORDER BY id")]


def test_an_index_from_a_newer_release_is_refused_and_left_unchanged(store_root: Path) -> None:
    create_store(store_root)
    with sqlite3.connect(store_root / "index.db") as connection:
        connection.execute(
            "INSERT INTO _sqlite_migrations (migration_set, name, applied_at) VALUES (?, ?, ?)",
            (MIGRATION_SET, "9999_from_the_future", "2030-01-01"),
        )
    before = tree_fingerprint(store_root)
    with pytest.raises(SchemaError, match="newer casstore") as refused:
        ContentAddressedToolResultStore(store_root)
    assert not isinstance(refused.value, IndexDamagedError)  # nothing is damaged: casstore is too old
    assert tree_fingerprint(store_root) == before


def test_a_foreign_sqlite_database_is_refused(store_root: Path) -> None:
    store_root.mkdir()
    with sqlite3.connect(store_root / "index.db") as connection:
        connection.execute("CREATE TABLE customers (name TEXT)")
    before = tree_fingerprint(store_root)
    with pytest.raises(SchemaError, match="not a casstore index") as refused:
        ContentAddressedToolResultStore(store_root)
    assert not isinstance(refused.value, IndexDamagedError)
    assert tree_fingerprint(store_root) == before


# Another application's databases that hold no table of their own, or only sqlite-utils' record of migrations that
# are not casstore's: each is still not a casstore index.
FOREIGN_SCHEMAS = {
    "a view only": ["CREATE VIEW answers AS SELECT 42 AS answer"],
    "a view left after its table was dropped": [
        "CREATE TABLE notes (body TEXT)",
        "CREATE VIEW recent AS SELECT 1 AS one",
        "DROP TABLE notes",
    ],
    "another application's migrations only": [
        "CREATE TABLE _sqlite_migrations (id INTEGER PRIMARY KEY, migration_set TEXT, name TEXT, applied_at TEXT)",
        "INSERT INTO _sqlite_migrations (migration_set, name, applied_at) VALUES ('otherapp', '0001_x', '2026')",
    ],
    "a trigger on an empty migrations table": [
        "CREATE TABLE _sqlite_migrations (id INTEGER PRIMARY KEY, migration_set TEXT, name TEXT, applied_at TEXT)",
        "CREATE TRIGGER audit AFTER INSERT ON _sqlite_migrations BEGIN SELECT 1; END",
    ],
}


@pytest.mark.parametrize("wal", [False, True], ids=["checkpointed", "pending log"])
@pytest.mark.parametrize("schema", list(FOREIGN_SCHEMAS))
def test_a_foreign_database_without_tables_of_its_own_is_refused_byte_for_byte(
    store_root: Path, schema: str, wal: bool
) -> None:
    store_root.mkdir()
    index = store_root / "index.db"
    if wal:
        _leave_a_pending_log(index, FOREIGN_SCHEMAS[schema])
        assert (store_root / "index.db-wal").stat().st_size > 0
    else:
        with contextlib.closing(sqlite3.connect(index)) as connection, connection:
            for statement in FOREIGN_SCHEMAS[schema]:
                connection.execute(statement)
    before = tree_fingerprint(store_root)
    with pytest.raises(SchemaError, match="not a casstore index") as refused:
        ContentAddressedToolResultStore(store_root)
    assert not isinstance(refused.value, IndexDamagedError)
    assert tree_fingerprint(store_root) == before
    with contextlib.closing(sqlite3.connect(f"file:{index}?mode=ro", uri=True)) as connection:
        assert "blobs" not in {row[0] for row in connection.execute("SELECT name FROM sqlite_master")}


@pytest.mark.parametrize("made", ["an empty file", "an empty database", "an empty database in WAL mode"])
def test_an_empty_file_or_database_becomes_a_new_store(store_root: Path, made: str) -> None:
    store_root.mkdir()
    index = store_root / "index.db"
    if made == "an empty file":
        index.write_bytes(b"")
    else:
        with contextlib.closing(sqlite3.connect(index)) as connection:
            connection.execute("PRAGMA journal_mode=WAL" if "WAL" in made else "PRAGMA user_version = 0")
            connection.execute("VACUUM")  # writes the header: a database file with no schema object
    with ContentAddressedToolResultStore(store_root) as store:
        reference = store.write(key="result.txt", content="kept")
        assert store.read(reference) == "kept"
    assert _applied(store_root) == list(MIGRATION_NAMES)


def _leave_a_pending_log(index: Path, statements: list[str]) -> None:
    """Run `statements` on `index` in WAL mode in a process that then ends without closing it: its log stays."""
    script = (
        "import os, sqlite3, sys\n"
        "connection = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        "connection.execute('PRAGMA journal_mode=WAL')\n"
        "for statement in sys.argv[2:]:\n"
        "    connection.execute(statement)\n"
        "os._exit(0)\n"
    )
    subprocess.run([sys.executable, "-c", script, str(index), *statements], check=True, timeout=60)


@pytest.mark.parametrize("made_by", ["another application", "a newer casstore"])
def test_an_index_refused_with_a_pending_log_is_left_byte_for_byte_log_included(store_root: Path, made_by: str) -> None:
    # SQLite folds a pending write-ahead log into the file when the last writing connection closes: the refusal must
    # come before any such connection, or the refused file changes (and its log is deleted).
    if made_by == "a newer casstore":
        create_store(store_root)
        statements = [
            "INSERT INTO _sqlite_migrations (migration_set, name, applied_at) "
            f"VALUES ('{MIGRATION_SET}', '9999_from_the_future', '2030-01-01')"
        ]
    else:
        store_root.mkdir()
        statements = ["CREATE TABLE notes (body TEXT)", "INSERT INTO notes VALUES ('keep me')"]
    _leave_a_pending_log(store_root / "index.db", statements)
    log = store_root / "index.db-wal"
    assert log.stat().st_size > 0
    before, log_before = tree_fingerprint(store_root), log.read_bytes()
    with pytest.raises(SchemaError, match="newer casstore" if made_by == "a newer casstore" else "not a casstore"):
        ContentAddressedToolResultStore(store_root)
    assert tree_fingerprint(store_root) == before
    assert log.read_bytes() == log_before


def test_a_database_with_a_hot_rollback_journal_is_refused_unchanged(store_root: Path) -> None:
    # Another program's database, its writer gone in the middle of a transaction that spilled into the file: opening
    # it to write would roll the transaction back (changing the file and deleting the journal).
    store_root.mkdir()
    rows = (
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 400) "
        "SELECT hex(randomblob(500)) FROM n"
    )
    script = (
        "import os, sqlite3, sys\n"
        "connection = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        "connection.execute('CREATE TABLE notes (body TEXT)')\n"
        "connection.execute('INSERT INTO notes ' + sys.argv[2])\n"
        "connection.execute('PRAGMA cache_size = 1')\n"
        "connection.execute('BEGIN')\n"
        "connection.execute(\"UPDATE notes SET body = 'changed'\")\n"
        "os._exit(0)\n"
    )
    subprocess.run([sys.executable, "-c", script, str(store_root / "index.db"), rows], check=True, timeout=60)
    assert (store_root / "index.db-journal").stat().st_size > 0
    before = tree_fingerprint(store_root)
    with pytest.raises(SchemaError, match="rollback journal") as refused:
        ContentAddressedToolResultStore(store_root)
    assert not isinstance(refused.value, IndexDamagedError)
    assert tree_fingerprint(store_root) == before  # the journal included


def _killed_while_made(folder: Path) -> bool:
    """
    Kill a process 0-4 ms into its first write into the new store `folder`, as SQLite makes its index.

    :returns: Whether it left a hot rollback journal: it was killed between the index's first page and its switch to
        the write-ahead log, after the journal was synced.
    """
    script = (
        "import sys\n"
        "from casstore import ContentAddressedToolResultStore\n"
        "store = ContentAddressedToolResultStore(sys.argv[1])\n"
        "print('ready', flush=True)\n"
        "store.write(key='a.txt', content='hello ' * 1000)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", script, str(folder)], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdout.readline() == "ready\n"
    time.sleep(random.uniform(0, 0.004))
    child.kill()
    child.wait(timeout=60)
    child.stdout.close()
    journal = folder / "index.db-journal"
    # Hot only once synced: SQLite writes a journal's magic number last, and ignores (deletes) a journal without it.
    return journal.exists() and journal.read_bytes()[:8] == bytes.fromhex("d9d505f920a163d7")


def _journal_of_a_killed_maker(tmp_path: Path) -> Path:
    """:returns: A folder a process was killed in while SQLite made its index, its journal left (bounded tries)."""
    for attempt in range(120):
        folder = tmp_path / f"killed-{attempt}"
        if _killed_while_made(folder):
            return folder
    raise AssertionError("120 kills left no hot journal: the window they aim at was not hit")


def test_an_index_whose_maker_was_killed_before_its_log_is_made_at_the_next_open(tmp_path: Path) -> None:
    folder = _journal_of_a_killed_maker(tmp_path)
    with ContentAddressedToolResultStore(folder) as store:
        reference = store.write(key="a.txt", content="the first result")
        assert store.read(reference) == "the first result"
        assert verify(store).clean
    assert not (folder / "index.db-journal").exists()


@pytest.mark.parametrize("writes_in", ["index.db", "its log"])
def test_a_stale_journal_beside_a_store_with_writes_is_refused_byte_for_byte(
    tmp_path: Path, store_root: Path, writes_in: str
) -> None:
    # A killed maker's journal beside an index restored from a backup, say, whose writes are in the file, or all still
    # in its log (a crash before any checkpoint leaves index.db one page with no schema): rolling it back would empty
    # the file, and SQLite would drop the log with it.
    journal = _journal_of_a_killed_maker(tmp_path) / "index.db-journal"
    crashed = tmp_path / "crashed"
    with ContentAddressedToolResultStore(store_root) as store:
        references = [store.write(key=f"{number}.txt", content=f"result {number}") for number in range(20)]
        if writes_in == "its log":
            shutil.copytree(store_root, crashed)  # as a crash leaves it: the log not yet folded into the file
            assert (crashed / "index.db").stat().st_size == 4096 and (crashed / "index.db-wal").stat().st_size > 0
    if writes_in == "index.db":
        shutil.copytree(store_root, crashed)  # closed: the log folded into the file
    shutil.copyfile(journal, crashed / "index.db-journal")
    before = tree_fingerprint(crashed)
    with pytest.raises(SchemaError, match="rollback journal"):
        ContentAddressedToolResultStore(crashed)
    assert tree_fingerprint(crashed) == before
    (crashed / "index.db-journal").unlink()
    with ContentAddressedToolResultStore(crashed) as store:
        assert [store.read(reference) for reference in references] == [f"result {n}" for n in range(20)]


def test_a_full_disk_at_the_first_write_is_a_storage_error_and_the_next_write_works(store_root: Path) -> None:
    # A file size limit stands in for a full disk: the first page of the new index cannot be written.
    script = (
        "import resource, signal, sys\n"
        "from casstore import ContentAddressedToolResultStore, StorageError\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (1024, resource.RLIM_INFINITY))\n"
        "try:\n"
        "    ContentAddressedToolResultStore(sys.argv[1]).write(key='a.txt', content='x')\n"
        "except StorageError as error:\n"
        "    print('StorageError', error)\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", script, str(store_root)], capture_output=True, text=True, timeout=60, check=True
    )
    assert completed.stdout.startswith("StorageError"), completed.stdout + completed.stderr
    assert "free space" in completed.stdout
    with ContentAddressedToolResultStore(store_root) as store:
        assert (
            store.read(store.write(key="a.txt", content="written once there is room")) == "written once there is room"
        )
        assert verify(store).clean


def test_a_file_that_is_not_sqlite_is_refused(store_root: Path) -> None:
    store_root.mkdir()
    (store_root / "index.db").write_bytes(b"this is not a database" * 100)
    before = tree_fingerprint(store_root)
    with pytest.raises(IndexDamagedError, match="not a usable casstore index") as refused:
        ContentAddressedToolResultStore(store_root)
    # Both a refusal to open and damaged storage, so code expecting either catches it.
    assert isinstance(refused.value, SchemaError) and isinstance(refused.value, CorruptBlobError)
    assert tree_fingerprint(store_root) == before


@pytest.mark.slow
def test_processes_opening_a_new_root_at_once_apply_the_schema_once(store_root: Path) -> None:
    script = (
        "import sys; from casstore import ContentAddressedToolResultStore as S; "
        "s = S(sys.argv[1]); s.write(key='k.txt', content='same'); s.close()"
    )
    processes = [subprocess.Popen([sys.executable, "-c", script, str(store_root)]) for _ in range(6)]
    assert [process.wait(timeout=60) for process in processes] == [0] * 6
    assert _applied(store_root) == list(MIGRATION_NAMES)
    with Database(store_root / "index.db", durable=False).reading() as connection:
        assert connection.execute("SELECT count(*) FROM writes").fetchone()[0] == 6


@pytest.mark.slow
def test_the_wheel_ships_migrations_inside_casstore_only(tmp_path: Path) -> None:
    # Built from a copy without build output: setuptools reuses `build/lib`, where a renamed migration would linger.
    source = tmp_path / "source"
    leftovers = shutil.ignore_patterns("build", ".venv", "*.egg-info", ".git", "__pycache__", ".*cache")
    shutil.copytree(REPOSITORY, source, ignore=leftovers)
    wheels = tmp_path / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", str(wheels), str(source)],
        check=True,
    )
    (wheel,) = wheels.glob("casstore-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    sql_files = sorted(name for name in names if name.endswith(".sql"))
    postgres = [f"casstore/migrations/postgresql/{name}.sql" for name in POSTGRES_MIGRATION_NAMES]
    assert sql_files == sorted([f"casstore/migrations/{name}.sql" for name in MIGRATION_NAMES] + postgres)
    # Each PostgreSQL migration is named like its SQLite counterpart.
    assert list(POSTGRES_MIGRATION_NAMES) == list(MIGRATION_NAMES)
    assert not [name for name in names if name.startswith("migrations/")]
    assert {"casstore/py.typed", "casstore/compactor/py.typed"} <= set(names)
    # One top-level name: the compactor ships inside casstore, never as a `compactor` package of its own.
    assert {name.split("/")[0] for name in names if not name.startswith("casstore-")} == {"casstore"}


def test_an_index_locked_by_another_process_says_so(store_root: Path) -> None:
    create_store(store_root)
    holder = sqlite3.connect(store_root / "index.db", isolation_level=None)
    try:
        holder.execute("PRAGMA locking_mode=EXCLUSIVE")
        holder.execute("BEGIN EXCLUSIVE")
        with pytest.raises(SchemaError, match="is locked by another process") as refused:
            Database(store_root / "index.db", durable=False, busy_timeout=0.1)
        assert not isinstance(refused.value, IndexDamagedError)  # held, not damaged
    finally:
        holder.close()
    Database(store_root / "index.db", durable=False).close()  # usable again once released
