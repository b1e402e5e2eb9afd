"""The layers under the repository, each alone on a real index.db and a real blob folder, and the boundary above."""

import os
from collections.abc import Iterator
from contextlib import nullcontext
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import casstore.blobs.hints
from casstore.blobs.files import BlobDirectory
from casstore.blobs.frames import FrameCodec
from casstore.blobs.hints import LAST_SEEN_RESOLUTION
from casstore.blobs.store import BlobStore
from casstore.errors import CorruptBlobError
from casstore.index.database import Database
from casstore.index.prepared import PreparedWrite
from casstore.index.queries import WritePosition
from casstore.index.work import UnitOfWork
from casstore.index.writes import (
    Forgotten,
    OffloadRecord,
    dangling_writes,
    forget,
    is_visible,
    record_offloads,
    record_write,
    unreferenced_digests,
)
from casstore.references import content_digest
from tests.helpers import blake3_hex
from tests.store_backends import LONG_AGO

PACKAGE = Path(casstore.blobs.hints.__file__).resolve().parent
COMPACTOR = PACKAGE.parent / "compactor"


@pytest.fixture
def database(tmp_path: Path) -> Iterator[Database]:
    opened = Database(tmp_path / "index.db", durable=False)
    yield opened
    opened.close()


def _blob_store(tmp_path: Path, *, inline_max: int) -> BlobStore:
    return BlobStore(
        files=BlobDirectory(tmp_path / "blobs", durable=False),
        codec=FrameCodec(compression_level=3),
        inline_max=inline_max,
        file_access=nullcontext(),
    )


@pytest.fixture(params=[0, 1 << 20], ids=["file", "inline"])
def blobs(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BlobStore]:
    store = _blob_store(tmp_path, inline_max=request.param)
    yield store
    store.close()


def _put(database: Database, blobs: BlobStore, data: bytes) -> str:
    digest = content_digest(data)
    staged = blobs.stage(digest, data)
    with database.transaction() as work:
        blobs.put(work, staged)
    return digest


def _content(database: Database, blobs: BlobStore, digest: str) -> bytes:
    with database.reading() as connection:
        location = blobs.locate(connection, digest)
    return blobs.load(location)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=50_000))
def test_put_then_read_returns_the_bytes(database: Database, blobs: BlobStore, data: bytes) -> None:
    digest = _put(database, blobs, data)
    assert digest == blake3_hex(data)
    with database.reading() as connection:
        assert blobs.exists(connection, digest)
    assert _content(database, blobs, digest) == data


@settings(max_examples=60, deadline=None)
@given(data=st.binary(max_size=20_000), other=st.binary(min_size=1, max_size=20_000))
def test_a_frame_of_other_content_never_decodes_as_this_digest(data: bytes, other: bytes) -> None:
    codec = FrameCodec(compression_level=1)
    digest = content_digest(data)
    assert codec.decode(digest, len(data), codec.encode(data)) == data
    forged = data[:-1] + bytes([data[-1] ^ 1]) if data else other
    with pytest.raises(CorruptBlobError, match=digest):
        codec.decode(digest, len(forged), codec.encode(forged))


def test_put_twice_keeps_one_blob_and_a_collection_removes_it(
    database: Database, blobs: BlobStore, tmp_path: Path
) -> None:
    data = os.urandom(4096)
    digest = _put(database, blobs, data)
    _put(database, blobs, data)
    with database.reading() as connection:
        assert blobs.digests(connection) == [digest]
        assert blobs.collectable(connection, grace=LAST_SEEN_RESOLUTION) == []  # seen just now
    with database.transaction() as work:
        work.connection.execute("UPDATE blobs SET last_seen = '2020-01-01 00:00:00.000'")
        assert blobs.delete_if_collectable(work, digest, grace=LAST_SEEN_RESOLUTION)
        assert not blobs.delete_if_collectable(work, digest, grace=LAST_SEEN_RESOLUTION)
    with database.reading() as connection:
        assert not blobs.exists(connection, digest)
        with pytest.raises(CorruptBlobError) as missing:
            blobs.locate(connection, digest)
    assert missing.value.missing
    assert not [path for path in (tmp_path / "blobs").rglob("*") if path.is_file()]


def test_a_referenced_blob_is_never_collectable(database: Database, blobs: BlobStore) -> None:
    digest = _put(database, blobs, b"kept")
    with database.transaction() as work:
        record_write(work, "ns", PreparedWrite(f"blake3/{digest[:2]}/{digest[2:]}.txt", "k.txt", digest, True, b"kept"))
        work.connection.execute("UPDATE blobs SET last_seen = '2020-01-01 00:00:00.000'")
        assert not blobs.delete_if_collectable(work, digest, grace=LAST_SEEN_RESOLUTION)
    assert _content(database, blobs, digest) == b"kept"


def test_confirm_says_whether_the_blob_is_really_there(database: Database, tmp_path: Path) -> None:
    blobs = _blob_store(tmp_path, inline_max=0)
    digest = _put(database, blobs, b"x" * 10_000)
    with database.transaction() as work:
        assert blobs.confirm(work, digest)
        assert not blobs.confirm(work, "0" * 64)
    (blob_file,) = [path for path in (tmp_path / "blobs").rglob("*.zst")]
    blob_file.unlink()
    with database.transaction() as work:
        assert not blobs.confirm(work, digest)  # a row whose file is gone counts as absent, so it is stored again
    blobs.close()


def test_a_unit_of_work_publishes_only_once_committed(database: Database) -> None:
    published: list[str] = []
    with database.transaction() as work:
        work.on_commit(lambda: published.append("committed"))
        assert published == []  # not while the transaction is open
    assert published == ["committed"]
    with pytest.raises(RuntimeError), database.transaction() as work:
        work.on_commit(lambda: published.append("rolled back"))
        raise RuntimeError("the transaction fails")
    with database.rolled_back() as work:
        work.on_commit(lambda: published.append("dry run"))
    assert published == ["committed"]


class _Clock:
    """A stand-in for the `time` module in `casstore.blobs.hints`: its clock moves only when a test says."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def monotonic(self) -> float:
        return self.now


# Fresh however long the test's thread is held up before the next statement.
_FRESH = "strftime('%Y-%m-%d %H:%M:%f', 'now', '+60 seconds')"


def test_a_blob_needs_confirming_unless_put_or_confirmed_within_the_resolution_and_inline(
    database: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = _Clock()
    monkeypatch.setattr(casstore.blobs.hints, "time", clock)
    inline = _blob_store(tmp_path, inline_max=1 << 20)
    in_files = _blob_store(tmp_path, inline_max=0)
    inline_digest = _put(database, inline, b"inline" * 1000)
    file_digest = _put(database, in_files, b"file" * 1000)
    assert inline.known(inline_digest) and not inline.known(file_digest)
    assert not inline.needs_confirmation(inline_digest)  # just put: last_seen is current, and nothing can vanish
    assert in_files.needs_confirmation(file_digest)  # its file could be removed; only confirm would notice
    assert inline.needs_confirmation(file_digest)  # never seen by this blob store
    other = _blob_store(tmp_path, inline_max=1 << 20)
    with database.transaction() as work:
        work.connection.execute(f"UPDATE blobs SET last_seen = {_FRESH}")
        assert other.confirm(work, inline_digest)
        assert not other.known(inline_digest)  # not until its transaction commits
    assert other.known(inline_digest)
    assert other.needs_confirmation(inline_digest)  # found with last_seen fresh, but it may be up to a resolution old
    clock.now += LAST_SEEN_RESOLUTION.total_seconds() * 1.1
    assert inline.needs_confirmation(inline_digest)
    another = _blob_store(tmp_path, inline_max=1 << 20)
    with database.rolled_back() as work:
        work.connection.execute("UPDATE blobs SET last_seen = ?", (LONG_AGO,))
        assert another.confirm(work, inline_digest)  # stale, so rewritten, but rolled back
    assert not another.known(inline_digest)
    with database.transaction() as work:
        work.connection.execute("UPDATE blobs SET last_seen = ?", (LONG_AGO,))
        assert other.confirm(work, inline_digest)  # rewritten and committed: current
    assert not other.needs_confirmation(inline_digest)
    clock.now += LAST_SEEN_RESOLUTION.total_seconds() * 1.1
    assert other.needs_confirmation(inline_digest)
    for blob_store in (inline, in_files, other, another):
        blob_store.close()


def test_stray_files_are_found_only_without_rows(database: Database, tmp_path: Path) -> None:
    blobs = _blob_store(tmp_path, inline_max=0)
    kept = _put(database, blobs, b"kept" * 5000)
    stray_digest = content_digest(b"stray")
    blobs.stage(stray_digest, b"stray" * 5000)  # a file whose row was never committed
    with database.reading() as connection:
        strays = [f for f in blobs.files() if blobs.is_stray(connection, f)]
    assert [f.digest for f in strays] == [stray_digest]
    blobs.remove_stray(strays[0])
    assert [f.digest for f in blobs.files()] == [kept]
    blobs.close()


def test_the_index_records_writes_and_answers_visibility(database: Database) -> None:
    digest = "a" * 64
    reference = f"blake3/aa/{'a' * 62}.txt"
    write = PreparedWrite(reference, "k.txt", digest, True, b"abc")
    insert_blob = (
        "INSERT INTO blobs (digest, size, stored_size, stored_in, first_seen, last_seen) "
        "VALUES (?, 3, 3, 'index', 'now', 'now')"
    )
    with database.transaction() as work:
        # Without its blob's row, a write is not recorded, and says its blob is not stored.
        assert record_write(work, "alice", write) is False
        # A write is recorded in the transaction that stores or finds its blob's row.
        work.connection.execute(insert_blob, (digest,))
        stored = [record_write(work, namespace, write) for namespace in ("alice", "alice", "bob")]
        assert stored == [True, True, True]  # each found the blob's row in the statement that recorded it
        record_offloads(
            work, namespace="alice", compaction_id="c", offloads=[OffloadRecord("tool", None, [reference], 10, 5)]
        )
    with database.reading() as connection:
        assert is_visible(connection, namespace="alice", digest=digest, reference=reference)
        assert not is_visible(connection, namespace="carol", digest=digest, reference=reference)
        assert not is_visible(connection, namespace="alice", digest=digest, reference=reference + "x")
        assert dangling_writes(connection) == []
        assert connection.execute("SELECT count(DISTINCT namespace) FROM writes").fetchone()[0] == 2
        assert connection.execute("SELECT DISTINCT reference FROM writes").fetchall() == [(reference,)]
    with database.transaction() as work:
        assert forget(work, namespace=None, older_than=None) == Forgotten(0, 0)  # nothing named, nothing forgotten
        assert forget(work, namespace="alice", older_than=None, with_digests=True) == Forgotten(
            2, 1, frozenset([digest])
        )
    with database.reading() as connection:
        assert not is_visible(connection, namespace="alice", digest=digest, reference=reference)
        assert is_visible(connection, namespace="bob", digest=digest, reference=reference)
    with database.transaction() as work:
        work.connection.execute("DELETE FROM blobs WHERE digest = ?", (digest,))  # damage: bob's write dangles
        work.connection.execute(insert_blob, ("b" * 64,))  # a later blob never takes the lost one's id
    with database.reading() as connection:
        assert dangling_writes(connection) == [("bob", "k.txt")]
        assert connection.execute("SELECT count(*) FROM writes").fetchone()[0] == 0
    with database.transaction() as work:
        assert forget(work, namespace="bob", older_than=None) == Forgotten(1, 0)
        work.connection.execute(insert_blob, (digest,))
    with database.reading() as connection:
        assert sorted(unreferenced_digests(connection)) == [digest, "b" * 64]
        assert connection.execute("SELECT count(*) FROM write_rows").fetchone()[0] == 0


def _add_blob_row(work: UnitOfWork, digest: str) -> None:
    work.connection.execute(
        "INSERT INTO blobs (digest, size, stored_size, stored_in, first_seen, last_seen) "
        "VALUES (?, 1, 1, 'index', 'now', 'now')",
        (digest,),
    )


def test_forgetting_by_age_keeps_recent_writes(database: Database) -> None:
    reference = f"blake3/bb/{'b' * 62}.txt"
    with database.transaction() as work:
        _add_blob_row(work, "b" * 64)
        for key in ("old.txt", "new.txt"):
            assert record_write(work, "ns", PreparedWrite(reference, key, "b" * 64, True, b"b"))
        work.connection.execute("UPDATE write_rows SET written_at = '2020-01-01 00:00:00.000' WHERE key = 'old.txt'")
    with database.transaction() as work:
        assert forget(work, namespace=None, older_than=LAST_SEEN_RESOLUTION * 3600) == Forgotten(1, 0)
    with database.reading() as connection:
        assert is_visible(connection, namespace="ns", digest="b" * 64, reference=reference)  # new.txt still holds it


def test_forgetting_through_a_write_breaks_ties_of_time_by_row_id(database: Database) -> None:
    with database.transaction() as work:
        for number in range(4):
            digest = f"{number}" * 64
            _add_blob_row(work, digest)
            write = PreparedWrite(f"blake3/{digest[:2]}/{digest[2:]}.txt", "k", digest, True, b"x")
            assert record_write(work, "ns", write)
        work.connection.execute("UPDATE write_rows SET written_at = '2020-01-01 00:00:00.000'")  # one time for all
        second = work.connection.execute("SELECT id FROM writes ORDER BY id LIMIT 1 OFFSET 1").fetchone()[0]
    with database.transaction() as work:
        forgotten = forget(
            work,
            namespace="ns",
            older_than=None,
            through=WritePosition("2020-01-01 00:00:00.000", second),
            with_digests=True,
        )
    assert forgotten == Forgotten(2, 0, frozenset({"0" * 64, "1" * 64}))
    with database.reading() as connection:
        assert [row[0] for row in connection.execute("SELECT digest FROM writes ORDER BY id")] == ["2" * 64, "3" * 64]
