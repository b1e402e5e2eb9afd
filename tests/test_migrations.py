"""The schema: applied with sqlite-utils' migrations, upgraded in place, and never downgraded by an old release."""

import shutil
import sqlite3
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import sqlite_utils

from casstore import ContentAddressedToolResultStore, CorruptBlobError, IndexDamagedError, SchemaError
from casstore.database import Database
from casstore.frames import FrameCodec, content_digest
from casstore.references import Reference
from casstore.schema import MIGRATION_NAMES, MIGRATION_SET, MIGRATIONS
from tests.helpers import tree_fingerprint

REPOSITORY = Path(__file__).resolve().parent.parent


def _applied(root: Path) -> list[str]:
    db = sqlite_utils.Database(root / "index.db")
    try:
        return [migration.name for migration in MIGRATIONS.applied(db)]
    finally:
        db.close()


def test_a_new_store_applies_every_migration(store: ContentAddressedToolResultStore) -> None:
    assert _applied(store.root) == list(MIGRATION_NAMES)
    with sqlite3.connect(store.root / "index.db") as connection:
        assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert connection.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATION_NAMES)


def test_visibility_has_one_owner_and_no_trigger(store: ContentAddressedToolResultStore) -> None:
    """`visible_references` is kept by casstore's index layer alone (0006 dropped the trigger that kept half of it)."""
    with sqlite3.connect(store.root / "index.db") as connection:
        triggers = connection.execute("SELECT name, tbl_name FROM sqlite_master WHERE type = 'trigger'").fetchall()
    assert triggers == []
    reference = store.write(key="a.txt", content="seen")
    store.write(key="b.txt", content="seen")
    with sqlite3.connect(store.root / "index.db") as connection:
        rows = connection.execute("SELECT namespace, reference FROM visible_references").fetchall()
    assert rows == [("default", reference)]


def test_an_index_of_the_first_schema_version_upgrades_in_place(store_root: Path) -> None:
    """Build an index as the first release did (only the first migration, and the rows it wrote), then open."""
    store_root.mkdir()
    connection = sqlite3.connect(store_root / "index.db", isolation_level=None)
    MIGRATIONS.apply(sqlite_utils.Database(connection), stop_before=MIGRATION_NAMES[1])
    codec = FrameCodec(compression_level=3)
    written = {"small.txt": "a short result", "large.txt": "a longer result, line after line\n" * 1000}
    references = {}
    for key, text in written.items():
        data = text.encode()
        digest = content_digest(data)
        reference = str(Reference(digest=digest, is_text=True, extension=".txt"))
        frame = codec.encode(data)
        in_index = len(frame) <= 100
        if not in_index:
            (store_root / "blobs" / digest[:2]).mkdir(parents=True, exist_ok=True)
            (store_root / "blobs" / digest[:2] / f"{digest[2:]}.zst").write_bytes(frame)
        stored_in = "index" if in_index else "file"
        blob_id = connection.execute(
            "INSERT INTO blobs (digest, size, stored_size, stored_in, first_seen, last_seen) "
            "VALUES (?, ?, ?, ?, '2025-01-01 00:00:00.000', '2025-01-01 00:00:00.000')",
            (digest, len(data), len(frame), stored_in),
        ).lastrowid
        if in_index:
            connection.execute("INSERT INTO blob_frames (blob_id, frame) VALUES (?, ?)", (blob_id, frame))
        connection.execute(
            "INSERT INTO writes (namespace, key, digest, kind, size, reference, written_at) "
            "VALUES ('default', ?, ?, 'text', ?, ?, '2025-01-01 00:00:00.000')",
            (key, digest, len(data), reference),
        )
        references[key] = reference
    connection.close()
    assert _applied(store_root) == [MIGRATION_NAMES[0]]

    with ContentAddressedToolResultStore(store_root) as store:
        assert _applied(store_root) == list(MIGRATION_NAMES)
        for key, text in written.items():
            assert store.read(references[key]) == text
        assert store.write(key="again.txt", content=written["small.txt"]) == references["small.txt"]
    with sqlite3.connect(store_root / "index.db") as check:
        assert check.execute("SELECT writes, blobs FROM dedup_summary").fetchone() == (3, 2)
        # 0005 gave the frame kept in the index its content size, from its blob's row.
        sizes_match = check.execute(
            "SELECT blob_frames.size IS blobs.size FROM blob_frames JOIN blobs ON blobs.id = blob_frames.blob_id"
        ).fetchall()
        assert sizes_match and all(match == (1,) for match in sizes_match)


def test_an_index_from_a_newer_release_is_refused_and_left_unchanged(store_root: Path) -> None:
    ContentAddressedToolResultStore(store_root).close()
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


def test_a_file_that_is_not_sqlite_is_refused(store_root: Path) -> None:
    store_root.mkdir()
    (store_root / "index.db").write_bytes(b"this is not a database" * 100)
    before = tree_fingerprint(store_root)
    with pytest.raises(IndexDamagedError, match="not a usable casstore index") as refused:
        ContentAddressedToolResultStore(store_root)
    # Both a refusal to open and damaged storage, so code expecting either catches it.
    assert isinstance(refused.value, SchemaError) and isinstance(refused.value, CorruptBlobError)
    assert tree_fingerprint(store_root) == before


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
    assert sql_files == [f"casstore/migrations/{name}.sql" for name in MIGRATION_NAMES]
    assert not [name for name in names if name.startswith("migrations/")]
    assert {"casstore/py.typed", "casstore/compactor/py.typed"} <= set(names)
    # One top-level name: the compactor ships inside casstore, never as a `compactor` package of its own.
    assert {name.split("/")[0] for name in names if not name.startswith("casstore-")} == {"casstore"}


def test_an_index_locked_by_another_process_says_so(store_root: Path) -> None:
    ContentAddressedToolResultStore(store_root).close()
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
