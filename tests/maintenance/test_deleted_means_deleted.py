"""
Deleted means deleted: when gc deletes a result, its bytes leave the store's files in the same run (the index, its
write-ahead log, the blob files), and the search index no longer holds its text.
"""

import contextlib
import os
import random
import sqlite3
from contextlib import closing
from datetime import timedelta
from pathlib import Path
from typing import Any

import obstore
import psycopg
import pytest
from click.testing import CliRunner

from casstore import ContentAddressedToolResultStore, ReferenceNotFoundError, SharedToolResultStore, StorageError
from casstore.cli import cli
from casstore.index import sqlite_space
from casstore.index.database import Database
from casstore.maintenance.checks import collect_garbage
from casstore.search.fts5 import term_query
from tests.servers import PostgresServer, S3Location
from tests.store_backends import open_bucket

# Results this small live inside index.db; larger ones in blob files (the store's default inline_max, 64 KiB).
_INLINE_SIZES = (300, 3_000, 30_000)
_FILE_SIZES = (100_000, 400_000)


def _secret(size: int) -> bytes:
    # Random bytes: zstd keeps them as they are, so the stored frame holds them verbatim, and a search of the raw files
    # for them finds them while they are stored (checked below), and never once they are deleted.
    return os.urandom(size)


def _files_holding(root: Path, needles: list[bytes]) -> dict[str, list[int]]:
    """:returns: For each file under `root` holding any needle (a 64-byte piece of a secret), which needles."""
    found: dict[str, list[int]] = {}
    for path in sorted(root.rglob("*")):
        if path.is_file():
            data = path.read_bytes()
            hits = [number for number, needle in enumerate(needles) if needle in data]
            if hits:
                found[str(path.relative_to(root))] = hits
    return found


def _needles(secrets: list[bytes]) -> list[bytes]:
    # Pieces from the start, middle and end of each secret: a part kept anywhere is found.
    return [secret[start : start + 64] for secret in secrets for start in (0, len(secret) // 2, len(secret) - 64)]


@pytest.mark.parametrize("search_index", [False, True], ids=["plain", "search-index"])
def test_a_deleted_namespaces_results_leave_every_file_of_the_store(store_root: Path, search_index: bool) -> None:
    secrets = [_secret(size) for size in (*_INLINE_SIZES, *_FILE_SIZES)]
    text_secret = "alice's salary is " + os.urandom(24).hex()
    with ContentAddressedToolResultStore(store_root, namespace="bob", search_index=search_index) as bob:
        kept = [bob.write(key=f"kept_{n}.bin", content=os.urandom(size)) for n, size in enumerate(_INLINE_SIZES)]
        kept_text = bob.write(key="kept.txt", content="bob's own notes, kept")
    with ContentAddressedToolResultStore(store_root, namespace="alice", search_index=search_index) as alice:
        for number, secret in enumerate(secrets):
            alice.write(key=f"{number}_read_call_{number}.bin", content=secret)
        alice.write(key="salary.txt", content=text_secret)
        if search_index:
            assert alice.search(terms=[text_secret[-20:]]).hits
    needles = _needles(secrets)
    # While stored, the search of the raw files finds every secret: the check below can fail.
    held = _files_holding(store_root, needles)
    assert sorted({number for hits in held.values() for number in hits}) == list(range(len(needles)))
    with ContentAddressedToolResultStore(store_root, namespace="bob") as bob:
        report = collect_garbage(bob, namespace="alice")
        assert report.writes_forgotten == len(secrets) + 1
        assert report.blobs_deleted == 0  # written a moment ago: the grace period keeps them
        report = collect_garbage(bob, grace=timedelta(0))
        assert report.blobs_deleted == len(secrets) + 1
        assert _files_holding(store_root, needles) == {}
        # What bob keeps reads back, and nothing of alice's is found.
        assert [len(bob.read(reference)) for reference in kept] == list(_INLINE_SIZES)
        assert bob.read(kept_text) == "bob's own notes, kept"
    if search_index:
        # The trigram index itself no longer finds the text: the document's rows went, and its segments were merged.
        with contextlib.closing(sqlite3.connect(store_root / "index.db")) as connection:
            query = term_query(text_secret[-20:])
            assert connection.execute("SELECT count(*) FROM search_text(?)", (query,)).fetchone() == (0,)
            assert connection.execute("SELECT count(*) FROM search_documents").fetchone() == (1,)  # bob's


@pytest.mark.parametrize("search_index", [False, True], ids=["plain", "search-index"])
def test_no_copy_of_many_small_deleted_results_stays_inside_a_page(store_root: Path, search_index: bool) -> None:
    # Many small results, each a row of its own inside index.db, between results that are kept: deleting them leaves
    # pages underfull, and SQLite moves rows between pages as it balances its B-tree. A page rebuilt so keeps old bytes
    # in its unused part (secure_delete zeroes only the deleted row itself): copies of rows that moved on, some of them
    # deleted later in the same run. This layout left such a copy behind until gc rebuilt the index after deleting.
    rng = random.Random(5)
    secrets = [b"SECRET-%04d-" % number + rng.randbytes(rng.randint(100, 1200)) for number in range(1500)]
    with (
        ContentAddressedToolResultStore(store_root, namespace="keep", search_index=search_index) as keep,
        ContentAddressedToolResultStore(store_root, namespace="alice", search_index=search_index) as alice,
    ):
        kept = {}
        for number, secret in enumerate(secrets):
            alice.write(key=f"{number}.bin", content=secret)
            if number % 3 == 0:
                content = b"KEEP" + rng.randbytes(rng.randint(100, 900))
                kept[keep.write(key=f"kept_{number}.bin", content=content)] = content
    needles = [piece for secret in secrets for piece in (secret[12:44], secret[-32:])]
    assert len(_files_holding(store_root, needles)["index.db"]) == len(needles)  # the search below can fail
    with ContentAddressedToolResultStore(store_root, namespace="keep") as keep:
        collect_garbage(keep, namespace="alice")
        report = collect_garbage(keep, grace=timedelta(0))
        assert _files_holding(store_root, needles) == {}
        assert (report.blobs_deleted, report.index_space) == (len(secrets), "rebuilt")
        assert all(keep.read(reference) == content for reference, content in kept.items())


def test_a_gc_that_deletes_no_content_gives_the_space_back_in_steps(store_root: Path) -> None:
    # Forgetting writes whose blobs the grace period keeps deletes no content: no rebuild, which would hold writers.
    with ContentAddressedToolResultStore(store_root, namespace="alice") as alice:
        for number in range(200):
            alice.write(key=f"{number}.bin", content=os.urandom(500))
        report = collect_garbage(alice, namespace="alice")
        assert (report.writes_forgotten, report.blobs_deleted, report.index_space) == (200, 0, "returned")
        dry = collect_garbage(alice, grace=timedelta(0), dry_run=True)
        assert (dry.blobs_deleted, dry.index_space) == (200, "rebuilt")


def _database_files(connection: "psycopg.Connection[Any]", server: PostgresServer) -> Path:
    (oid,) = connection.execute("SELECT oid FROM pg_database WHERE datname = current_database()").fetchone() or (0,)
    return server.data / "base" / str(oid)


def test_a_shared_stores_deleted_results_leave_its_objects_and_after_vacuum_its_tables(
    postgres_server: PostgresServer, postgres_url: str, s3_bucket_url: S3Location
) -> None:
    secrets = [_secret(size) for size in (*_INLINE_SIZES, *_FILE_SIZES)]
    needles = _needles(secrets)
    options: dict[str, Any] = {
        "index_url": postgres_url,
        "blob_url": s3_bucket_url.url,
        "blob_options": s3_bucket_url.options,
    }
    with SharedToolResultStore(**options, namespace="alice") as alice:
        references = [alice.write(key=f"{n}.bin", content=secret) for n, secret in enumerate(secrets)]
    bucket, prefix = open_bucket(s3_bucket_url)
    objects = [meta["path"] for batch in obstore.list(bucket, prefix=prefix) for meta in batch]
    assert sum(1 for name in objects if "/blake3/" in name) == len(_FILE_SIZES)
    with contextlib.closing(psycopg.connect(postgres_url, autocommit=True)) as connection:
        connection.execute("CHECKPOINT")  # what the tables hold, written to their files
        files = _database_files(connection, postgres_server)
        # While stored, the raw table files hold the frames kept in the index: the check below can fail.
        held = _files_holding(files, needles[: 3 * len(_INLINE_SIZES)])
        assert {number // 3 for hits in held.values() for number in hits} == set(range(len(_INLINE_SIZES)))
        with SharedToolResultStore(**options) as store:
            collect_garbage(store, namespace="alice", grace=timedelta(0))
            assert [row[0] for row in connection.execute("SELECT count(*) FROM blobs")] == [0]
            # The objects go in the same run; the rows' bytes stay in the tables' files until they are rewritten.
            assert [
                name
                for batch in obstore.list(bucket, prefix=prefix)
                for meta in batch
                if "/blake3/" in (name := meta["path"])
            ] == []
            report = collect_garbage(store, grace=timedelta(0), vacuum=True)
            assert report.index_space == "vacuumed"
        connection.execute("CHECKPOINT")
        assert _files_holding(_database_files(connection, postgres_server), needles) == {}
    with SharedToolResultStore(**options, namespace="alice") as alice:
        for reference in references:
            with pytest.raises(ReferenceNotFoundError):
                alice.read(reference)


def test_a_rebuild_that_fails_still_gives_the_space_back_and_says_what_to_do(
    store_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A gc run to free a full disk may not have the room a rebuild needs (about twice index.db).
    with ContentAddressedToolResultStore(store_root, namespace="keep") as keep:
        kept = keep.write(key="kept.bin", content=b"kept" * 100)
    with ContentAddressedToolResultStore(store_root, namespace="alice") as alice:
        gone = [alice.write(key=f"{number}.bin", content=os.urandom(2_000)) for number in range(300)]
    before = (store_root / "index.db").stat().st_size

    def full(self: Database) -> None:
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(Database, "rebuild", full)
    with ContentAddressedToolResultStore(store_root, namespace="keep") as keep:
        with pytest.raises(StorageError, match="could not rebuild the index") as failed:
            collect_garbage(keep, namespace="alice", grace=timedelta(0))
        assert "casstore gc --vacuum" in str(failed.value) and "disk is full" in str(failed.value)
        assert (store_root / "index.db").stat().st_size < before / 3  # the pages went back in steps
        assert keep.read(kept) == b"kept" * 100
    with ContentAddressedToolResultStore(store_root, namespace="alice") as alice, pytest.raises(ReferenceNotFoundError):
        alice.read(gone[0])
    monkeypatch.undo()
    with ContentAddressedToolResultStore(store_root, namespace="keep") as keep:
        assert collect_garbage(keep, grace=timedelta(0), vacuum=True).index_space == "rebuilt"


def test_a_reader_of_older_pages_is_reported_and_the_next_gc_finishes_the_job(
    store_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A reader's snapshot is its own until it ends: the rebuilt index cannot replace the pages it reads. gc must say
    # so (it does not wait forever), and a later gc must leave only the rebuilt index.
    monkeypatch.setattr(sqlite_space, "_CHECKPOINT_PATIENCE_SECONDS", 1.0)
    rng = random.Random(3)
    secrets = [b"SECRET-%04d-" % number + rng.randbytes(rng.randint(100, 1500)) for number in range(600)]
    with ContentAddressedToolResultStore(store_root, namespace="alice") as alice:
        for number, secret in enumerate(secrets):
            alice.write(key=f"{number}.bin", content=secret)
    with ContentAddressedToolResultStore(store_root, namespace="keep") as keep:
        kept = keep.write(key="kept.txt", content="kept")
    needles = [secret[12:44] for secret in secrets]
    with closing(sqlite3.connect(store_root / "index.db", isolation_level=None)) as reader:
        reader.execute("BEGIN")
        assert reader.execute("SELECT count(*) FROM blobs").fetchone() == (len(secrets) + 1,)
        result = CliRunner().invoke(cli, ["gc", "--root", str(store_root), "--namespace", "alice", "--grace", "0s"])
        assert result.exit_code == 1
        assert "another connection is still reading an older state" in result.stderr
        assert "blobs deleted       600" in result.stdout  # the report came first
        assert _files_holding(store_root, needles)  # what the reader reads is still there, as it must be
        reader.execute("COMMIT")
    with ContentAddressedToolResultStore(store_root, namespace="keep") as keep:
        report = collect_garbage(keep, grace=timedelta(0))
        assert (report.blobs_deleted, report.old_pages_held) == (0, False)
        assert _files_holding(store_root, needles) == {}
        assert keep.read(kept) == "kept"
