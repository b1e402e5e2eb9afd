"""
The history as plain rows: one `writes` row per write, a reference visible while a row names it, times the same on
both engines, and a history that survives damage to the blob rows and copies between engines.
"""

import contextlib
import sqlite3
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest

from casstore import (
    ContentAddressedToolResultStore,
    ReferenceNotFoundError,
    SharedToolResultStore,
)
from casstore.maintenance.checks import collect_garbage, verify
from casstore.maintenance.copying import copy_store
from tests.helpers import blake3_hex
from tests.servers import S3Location
from tests.store_backends import Backend


def test_a_reference_stays_visible_until_its_last_write_is_forgotten(backend: Backend) -> None:
    a, b = backend.open(namespace="a"), backend.open(namespace="b")
    shared = a.write(key="old.txt", content="shared result\n" * 10)
    assert a.write(key="new.txt", content="shared result\n" * 10) == shared
    assert b.write(key="old.txt", content="shared result\n" * 10) == shared
    only_old = a.write(key="old2.txt", content="only old\n" * 10)
    backend.execute("UPDATE write_rows SET written_at = '2020-01-01 00:00:00.000' WHERE key IN ('old.txt', 'old2.txt')")
    assert backend.rows("SELECT count(*) FROM writes WHERE written_at < '2021-01-01'") == [(3,)]
    collect_garbage(a, older_than=timedelta(days=1))
    assert a.read(shared) == "shared result\n" * 10  # its newer write is kept
    with pytest.raises(ReferenceNotFoundError):
        b.read(shared)
    with pytest.raises(ReferenceNotFoundError):
        a.read(only_old)
    assert backend.rows("SELECT DISTINCT namespace, reference FROM writes") == [("a", shared)]
    assert a.write(key="again.txt", content="shared result\n" * 10) == shared
    collect_garbage(a, namespace="b")  # nothing of b's left: a's reference stays
    assert a.read(shared) == "shared result\n" * 10
    collect_garbage(a, max_size=0)
    with pytest.raises(ReferenceNotFoundError):
        a.read(shared)
    assert backend.rows("SELECT count(*) FROM writes") == [(0,)]


def test_a_write_row_reads_as_what_write_returned(backend: Backend) -> None:
    store = backend.open(namespace="agent")
    made = [
        (store.write(key="3_read_file_call_1.txt", content="text"), "3_read_file_call_1.txt", "text", 4),
        (store.write(key="shot.png", content=b"\x89PNG bytes"), "shot.png", "binary", 10),
        (store.write(key="no-extension", content="text"), "no-extension", "text", 4),
    ]
    rows = backend.rows("SELECT namespace, key, digest, kind, size, reference FROM writes ORDER BY id")
    assert rows == [
        ("agent", key, reference.split("/")[-2] + reference.split("/")[-1][:62], kind, size, reference)
        for reference, key, kind, size in made
    ]


def test_writes_whose_blob_row_is_deleted_are_reported_and_name_no_later_blob(backend: Backend) -> None:
    store = backend.open(namespace="alice")
    other = backend.open(namespace="bob")
    content = "kept in the index\n" * 40
    reference = store.write(key="a.txt", content=content)
    other.write(key="a.txt", content=content)
    digest = blake3_hex(content.encode())
    backend.execute("DELETE FROM blobs WHERE digest = ?", (digest,))  # damage, by hand: the writes lose their blob
    later = store.write(key="b.txt", content="written after the damage\n" * 40)  # never takes the freed id
    with pytest.raises(ReferenceNotFoundError):
        backend.open(namespace="alice").read(reference)
    assert backend.open(namespace="alice").read(later) == "written after the damage\n" * 40
    with pytest.raises(ReferenceNotFoundError):
        backend.open(namespace="bob").read(later)  # bob's damaged writes do not name the later blob
    report = verify(store)
    assert sorted(report.dangling_writes) == [("alice", "a.txt"), ("bob", "a.txt")] and not report.ok
    collect_garbage(store, grace=timedelta(0))  # nothing it may delete: the writes stay, still damaged
    assert backend.rows("SELECT count(*) FROM write_rows") == [(3,)]
    # Writing the content again stores the blob anew, for the writes made from then on.
    assert backend.open(namespace="alice").write(key="again.txt", content=content) == reference
    assert backend.open(namespace="alice").read(reference) == content
    with pytest.raises(ReferenceNotFoundError):
        backend.open(namespace="bob").read(reference)
    # Forgetting a namespace forgets its damaged writes with the rest.
    collect_garbage(backend.open(namespace="bob"), namespace="bob", grace=timedelta(0))
    assert verify(store).dangling_writes == [("alice", "a.txt")]


def test_times_are_utc_whatever_the_postgresql_sessions_time_zone(postgres_url: str, s3_bucket_url: S3Location) -> None:
    with contextlib.closing(psycopg.connect(postgres_url, autocommit=True)) as connection:
        database = connection.execute("SELECT current_database()").fetchone()
        assert database is not None
        connection.execute(f"ALTER DATABASE \"{database[0]}\" SET timezone TO 'Asia/Kolkata'")
    before = datetime.now(UTC)
    with SharedToolResultStore(
        index_url=postgres_url, blob_url=s3_bucket_url.url, blob_options=s3_bucket_url.options, namespace="tz"
    ) as store:
        new = store.write(key="new.txt", content="new content\n" * 5)
        store.write(key="again.txt", content="new content\n" * 5)  # the one-statement function
        old = store.write(key="old.txt", content="old content\n" * 5)
        after = datetime.now(UTC)
        with contextlib.closing(psycopg.connect(postgres_url, autocommit=True)) as connection:
            assert connection.execute("SHOW timezone").fetchone() == ("Asia/Kolkata",)
            shown = connection.execute("SELECT written_at FROM writes ORDER BY id").fetchall()
            # A person's text time in their session's zone means that moment: the row is older than an hour.
            connection.execute("UPDATE write_rows SET written_at = '2020-01-01 05:30:00' WHERE key = 'old.txt'")
        for (moment,) in shown:
            assert before - timedelta(seconds=1) <= moment <= after + timedelta(seconds=1), (moment, before, after)
        # What casstore shows is UTC, whatever the session's zone.
        (old_row,) = [row for row in store.repository.copies.write_rows() if row[1] == "old.txt"]
        assert old_row[6] == "2020-01-01 00:00:00.000"
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
    with SharedToolResultStore(
        index_url=postgres_url, blob_url=s3_bucket_url.url, blob_options=s3_bucket_url.options
    ) as store:
        shared_rows = Counter(store.repository.copies.write_rows())
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
        for namespace, pairs in written.items():
            with ContentAddressedToolResultStore(target_root, namespace=namespace) as store:
                for reference, content in pairs:
                    read_back = store.read(reference)
                    assert read_back == content and type(read_back) is type(content)
