"""The schema: applied with sqlite-utils' migrations, upgraded in place, and never downgraded by an old release."""

import contextlib
import importlib.util
import json
import shutil
import sqlite3
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
import sqlite_utils

from casstore import (
    ContentAddressedToolResultStore,
    CorruptBlobError,
    IndexDamagedError,
    ReferenceNotFoundError,
    SchemaError,
)
from casstore.database import Database
from casstore.maintenance import verify
from casstore.postgres_schema import MIGRATION_NAMES as POSTGRES_MIGRATION_NAMES
from casstore.schema import MIGRATION_NAMES, MIGRATION_SET, MIGRATIONS
from tests.helpers import create_store, tree_fingerprint

REPOSITORY = Path(__file__).resolve().parent.parent
INDEX_V1 = REPOSITORY / "tests" / "data" / "index-v1"


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
    """
    `visible_references` is kept by casstore's index layer alone (0006 dropped the trigger that kept half of it). The
    triggers left only let a person move a write in time through the view `writes` (0011), write a frame through
    the view `blob_frames` (0013), a dependency through the view `blob_dependencies` (0017) and a blob's row through
    the view `blobs` (0019), and keep a reference's `blob_id` the id of its digest's blob row (0016, on `blob_rows`
    since 0019), which changes no reference's visibility.
    """
    with sqlite3.connect(store.root / "index.db") as connection:
        triggers = connection.execute(
            "SELECT name, tbl_name FROM sqlite_master WHERE type = 'trigger' ORDER BY name"
        ).fetchall()
    assert triggers == [
        ("blob_dependencies_delete", "blob_dependencies"),
        ("blob_dependencies_insert", "blob_dependencies"),
        ("blob_dependencies_update", "blob_dependencies"),
        ("blob_frames_delete", "blob_frames"),
        ("blob_frames_insert", "blob_frames"),
        ("blob_frames_update", "blob_frames"),
        ("blobs_attach_references", "blob_rows"),
        ("blobs_delete", "blobs"),
        ("blobs_detach_references", "blob_rows"),
        ("blobs_follow_references", "blob_rows"),
        ("blobs_insert", "blobs"),
        ("blobs_update", "blobs"),
        ("key_stems_kept", "key_stems"),
        ("writes_set_written_at", "writes"),
    ]
    reference = store.write(key="a.txt", content="seen")
    store.write(key="b.txt", content="seen")
    with sqlite3.connect(store.root / "index.db") as connection:
        rows = connection.execute("SELECT namespace, reference FROM visible_references").fetchall()
    assert rows == [("default", reference)]


def _index_v1_recipe() -> Any:
    """The script that made `tests/data/index-v1`, loaded without running it: its `WRITES` and `OFFLOAD`."""
    spec = importlib.util.spec_from_file_location("make_index_v1", INDEX_V1 / "make_index_v1.py")
    assert spec is not None and spec.loader is not None
    recipe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(recipe)
    return recipe


def test_an_index_of_the_first_schema_version_upgrades_in_place(store_root: Path) -> None:
    """
    An index and blob files written by old code, opened with today's: every reference reads back, writes go on.

    `tests/data/index-v1` was written by commit 1826268 (migrations 0001 to 0003: the earliest code whose schema
    today's migrations upgrade; the first commit's 0001 was rewritten before it). Its docstring has the commands:
    `PYTHONPATH=<that commit's casstore, migrations inside> python tests/data/index-v1/make_index_v1.py <root>`.
    """
    recipe = _index_v1_recipe()
    shutil.copytree(INDEX_V1, store_root, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    assert _applied(store_root) == list(MIGRATION_NAMES[:3])
    with contextlib.closing(sqlite3.connect(store_root / "index.db")) as old:
        old_writes = old.execute("SELECT namespace, key, kind, reference FROM writes ORDER BY id").fetchall()
    assert [(namespace, key) for namespace, key, _, _ in old_writes] == [(ns, key) for ns, key, _ in recipe.WRITES]
    assert {kind for _, _, kind, _ in old_writes} == {"text", "binary"}

    stores = {
        namespace: ContentAddressedToolResultStore(store_root, namespace=namespace, inline_max=recipe.INLINE_MAX)
        for namespace in ("alice", "bob")
    }
    try:
        assert _applied(store_root) == list(MIGRATION_NAMES)
        for (namespace, key, content), (_, _, kind, reference) in zip(recipe.WRITES, old_writes, strict=True):
            assert kind == ("text" if isinstance(content, str) else "binary")
            # The reference the old code returned is still the one today's code computes for the same write ...
            assert stores[namespace].prepare_write(key=key, content=content).reference == reference
            # ... and reads back exactly, as the type it was written with.
            read_back = stores[namespace].read(reference)
            assert read_back == content and type(read_back) is type(content), (namespace, key)
        bob_only = old_writes[-2][3]  # bob's large binary: alice never wrote it
        with pytest.raises(ReferenceNotFoundError):
            stores["alice"].read(bob_only)
        report = verify(stores["alice"])
        assert report.clean and report.blobs_checked == 5, report

        # Writes go on: new content, a repeat of old content in the other namespace, and a new blob file.
        new_text = stores["alice"].write(key="5_new.txt", content="written after the upgrade")
        repeat = stores["alice"].write(key="5_dump.bin", content=recipe.WRITES[-2][2])
        new_large = stores["bob"].write(key="5_large.bin", content=bytes(range(256)) * 4 + recipe.WRITES[-2][2])
        assert repeat == bob_only
        assert stores["alice"].read(new_text) == "written after the upgrade"
        assert stores["alice"].read(repeat) == recipe.WRITES[-2][2]
        assert stores["bob"].read(new_large) == bytes(range(256)) * 4 + recipe.WRITES[-2][2]
        assert verify(stores["bob"]).clean
        large_digest = new_large.rsplit("/", 2)[1] + new_large.rsplit("/", 1)[1].removesuffix(".bin")
        assert (store_root / "blobs" / large_digest[:2] / f"{large_digest[2:]}.zst").is_file()
    finally:
        for store in stores.values():
            store.close()

    with contextlib.closing(sqlite3.connect(store_root / "index.db")) as check:
        assert check.execute("SELECT writes, blobs FROM dedup_summary").fetchone() == (len(recipe.WRITES) + 3, 7)
        offload = recipe.OFFLOAD
        assert check.execute(
            "SELECT compaction_id, namespace, tool_name, tool_call_id, refs, original_tokens, saved_tokens "
            "FROM offloads"
        ).fetchall() == [
            (
                offload["compaction_id"],
                "alice",
                offload["tool_name"],
                offload["tool_call_id"],
                json.dumps([old_writes[0][3]]),
                offload["original_tokens"],
                offload["saved_tokens"],
            )
        ]
        # 0005 gave each frame kept in the index its content size, from its blob's row.
        sizes_match = check.execute(
            "SELECT blob_frames.size IS blobs.size FROM blob_frames JOIN blobs ON blobs.id = blob_frames.blob_id"
        ).fetchall()
        assert len(sizes_match) == 4 and all(match == (1,) for match in sizes_match)  # 3 old, 1 new
        assert (
            check.execute("SELECT count(*) FROM visible_references").fetchone()[0]
            == (check.execute("SELECT count(*) FROM (SELECT DISTINCT namespace, reference FROM writes)").fetchone()[0])
        )


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
