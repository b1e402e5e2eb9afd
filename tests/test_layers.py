"""The blob layer and the index layer, each alone, on a real index.db and a real blob folder."""

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import casstore.blobs
from casstore.blobs import LAST_SEEN_RESOLUTION, BlobStore, content_digest
from casstore.database import Database
from casstore.errors import CorruptBlobError
from casstore.index import (
    OffloadRecord,
    dangling_writes,
    forget_writes,
    is_referenced,
    readable_blob,
    record_offloads,
    record_write,
    unreferenced_digests,
)
from tests.helpers import blake3_hex


@pytest.fixture
def database(tmp_path: Path) -> Iterator[Database]:
    opened = Database(tmp_path / "index.db", durable=False)
    yield opened
    opened.close()


@pytest.fixture(params=[0, 1 << 20], ids=["file", "inline"])
def blobs(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BlobStore]:
    store = BlobStore(directory=tmp_path / "blobs", compression_level=3, inline_max=request.param, durable=True)
    yield store
    store.close()


def _put(database: Database, blobs: BlobStore, data: bytes) -> str:
    digest = content_digest(data)
    staged = blobs.stage(digest, data)
    with database.transaction() as connection:
        blobs.put(connection, staged)
    blobs.keep_checked()
    return digest


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=50_000))
def test_put_then_get_returns_the_bytes(database: Database, blobs: BlobStore, data: bytes) -> None:
    digest = _put(database, blobs, data)
    assert digest == blake3_hex(data)
    with database.reading() as connection:
        assert blobs.has(connection, digest)
        assert blobs.get(connection, digest) == data


def test_put_twice_keeps_one_blob_and_delete_removes_it(database: Database, blobs: BlobStore, tmp_path: Path) -> None:
    data = os.urandom(4096)
    digest = _put(database, blobs, data)
    _put(database, blobs, data)
    with database.reading() as connection:
        assert blobs.digests(connection) == [digest]
    with database.transaction() as connection:
        assert blobs.delete(connection, digest)
        assert not blobs.delete(connection, digest)
    with database.reading() as connection:
        assert not blobs.has(connection, digest)
        with pytest.raises(CorruptBlobError) as missing:
            blobs.get(connection, digest)
    assert missing.value.missing
    assert not [path for path in (tmp_path / "blobs").rglob("*") if path.is_file()]


def test_refresh_says_whether_the_blob_is_really_there(database: Database, tmp_path: Path) -> None:
    blobs = BlobStore(directory=tmp_path / "blobs", compression_level=3, inline_max=0, durable=False)
    digest = _put(database, blobs, b"x" * 10_000)
    with database.transaction() as connection:
        assert blobs.refresh(connection, digest)
        assert not blobs.refresh(connection, "0" * 64)
    (blob_file,) = [path for path in (tmp_path / "blobs").rglob("*.zst")]
    blob_file.unlink()
    with database.transaction() as connection:
        assert not blobs.refresh(connection, digest)  # a row whose file is gone counts as absent, so it is stored again
    blobs.close()


class _Clock:
    """A stand-in for the `time` module in `casstore.blobs`: its monotonic clock moves only when a test says."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def monotonic(self) -> float:
        return self.now


_LONG_AGO = "2020-01-01 00:00:00.000"
# Fresh however long the test's thread is held up before the next statement.
_FRESH = "strftime('%Y-%m-%d %H:%M:%f', 'now', '+60 seconds')"


def test_a_blob_needs_refreshing_unless_put_or_refreshed_within_the_resolution_and_inline(
    database: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = _Clock()
    monkeypatch.setattr(casstore.blobs, "time", clock)
    inline = BlobStore(directory=tmp_path / "blobs", compression_level=3, inline_max=1 << 20, durable=False)
    in_files = BlobStore(directory=tmp_path / "blobs", compression_level=3, inline_max=0, durable=False)
    inline_digest = _put(database, inline, b"inline" * 1000)
    file_digest = _put(database, in_files, b"file" * 1000)
    assert inline.seen(inline_digest) and not inline.seen(file_digest)
    assert not inline.needs_refresh(inline_digest)  # just put: last_seen is current, and nothing outside can vanish
    assert in_files.needs_refresh(file_digest)  # its file could be removed; only refresh would notice
    assert inline.needs_refresh(file_digest)  # never seen by this blob store
    other = BlobStore(directory=tmp_path / "blobs", compression_level=3, inline_max=1 << 20, durable=False)
    with database.transaction() as connection:
        connection.execute(f"UPDATE blobs SET last_seen = {_FRESH}")
        assert other.refresh(connection, inline_digest)
    assert not other.seen(inline_digest)  # not until the caller says its transaction committed
    other.keep_checked()
    assert other.seen(inline_digest)
    assert other.needs_refresh(inline_digest)  # found with last_seen fresh, but it may be up to a resolution old
    clock.now += LAST_SEEN_RESOLUTION.total_seconds() * 1.1
    assert inline.needs_refresh(inline_digest)
    with database.rolled_back() as connection:
        connection.execute("UPDATE blobs SET last_seen = ?", (_LONG_AGO,))
        assert other.refresh(connection, inline_digest)  # stale, so rewritten, but rolled back
    other.discard_checked()
    other.keep_checked()
    assert other.needs_refresh(inline_digest)
    with database.transaction() as connection:
        connection.execute("UPDATE blobs SET last_seen = ?", (_LONG_AGO,))
        assert other.refresh(connection, inline_digest)  # rewritten and committed: current
    other.keep_checked()
    assert not other.needs_refresh(inline_digest)
    clock.now += LAST_SEEN_RESOLUTION.total_seconds() * 1.1
    assert other.needs_refresh(inline_digest)
    for blob_store in (inline, in_files, other):
        blob_store.close()


def test_stray_files_are_found_only_without_rows(database: Database, tmp_path: Path) -> None:
    blobs = BlobStore(directory=tmp_path / "blobs", compression_level=3, inline_max=0, durable=False)
    kept = _put(database, blobs, b"kept" * 5000)
    stray_digest = content_digest(b"stray")
    blobs.stage(stray_digest, b"stray" * 5000)  # a file whose row was never committed
    with database.reading() as connection:
        strays = [f for f in blobs.stray_files() if blobs.is_stray(connection, f)]
    assert [f.digest for f in strays] == [stray_digest]
    blobs.remove_stray(strays[0])
    with database.reading() as connection:
        assert [f.digest for f in blobs.stray_files()] == [kept]
    blobs.close()


def test_the_index_records_writes_and_answers_visibility(database: Database) -> None:
    digest = "a" * 64
    with database.transaction() as connection:
        was_visible = [
            record_write(
                connection,
                namespace=namespace,
                key="k.txt",
                digest=digest,
                is_text=True,
                size=3,
                reference=f"blake3/aa/{'a' * 62}.txt",
            )
            for namespace in ("alice", "alice", "bob")
        ]
        assert was_visible == [False, True, False]  # visible already: only alice's second write
        record_offloads(
            connection,
            namespace="alice",
            compaction_id="c",
            offloads=[OffloadRecord("tool", None, [f"blake3/aa/{'a' * 62}.txt"], 10, 5)],
        )
    reference = f"blake3/aa/{'a' * 62}.txt"
    with database.reading() as connection:
        assert readable_blob(connection, namespace="alice", digest=digest, reference=reference) is not None
        assert readable_blob(connection, namespace="carol", digest=digest, reference=reference) is None
        assert readable_blob(connection, namespace="alice", digest=digest, reference=reference + "x") is None
        assert is_referenced(connection, digest)
        assert dangling_writes(connection) == [("alice", reference), ("alice", reference), ("bob", reference)]
        assert connection.execute("SELECT count(*) FROM visible_references").fetchone()[0] == 2
    with database.transaction() as connection:
        assert forget_writes(connection, where="namespace = ?", parameters=["alice"]) == 2
    with database.reading() as connection:
        assert readable_blob(connection, namespace="alice", digest=digest, reference=reference) is None
        assert readable_blob(connection, namespace="bob", digest=digest, reference=reference) is not None
    with database.transaction() as connection:
        forget_writes(connection, where="1", parameters=[])
        connection.execute(
            "INSERT INTO blobs (digest, size, stored_size, stored_in, first_seen, last_seen) "
            "VALUES (?, 3, 3, 'index', 'now', 'now')",
            (digest,),
        )
    with database.reading() as connection:
        assert unreferenced_digests(connection) == [digest]
        assert not is_referenced(connection, digest)
