"""
A blob whose stored bytes are gone or damaged (its frame in `blob_frames`, its file, its object) reads as
`CorruptBlobError`, never as other bytes, and the next write of the same content stores it again, on both stores:
the read (or `verify`) that found it records it in `blobs.lost_at`, and every duplicate-write path treats such a blob
as not stored.
"""

import contextlib
import sqlite3
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from casstore import ContentAddressedToolResultStore, CorruptBlobError
from casstore.blobs import hints
from casstore.maintenance.checks import verify
from casstore.maintenance.copying import copy_store
from casstore.references import split_reference
from tests.helpers import tree_fingerprint
from tests.store_backends import Backend

# Compressed well past any `inline_max` below 1 KB: a blob file or object, unless the test keeps it inline.
CONTENT = "".join(f"line {number}: the listing of a tool's result\n" for number in range(400))


def _delete(backend: Backend, digest: str) -> None:
    backend.remove_raw(backend.blob_name(digest))


def _overwrite_same_size(backend: Backend, digest: str) -> None:
    (stored_size,) = backend.rows("SELECT stored_size FROM blobs WHERE digest = ?", (digest,))[0]
    backend.put_raw(backend.blob_name(digest), b"\0" * stored_size)


def _overwrite_shorter(backend: Backend, digest: str) -> None:
    backend.put_raw(backend.blob_name(digest), b"not a zstd frame")


def _overwrite_then_delete(backend: Backend, digest: str) -> None:
    _overwrite_shorter(backend, digest)
    _delete(backend, digest)


DAMAGE: dict[str, Callable[[Backend, str], None]] = {
    "deleted": _delete,
    "overwritten with as many bytes": _overwrite_same_size,
    "overwritten with fewer bytes": _overwrite_shorter,
    "overwritten, then deleted": _overwrite_then_delete,
}


def _execute(root: Path, sql: str, parameters: tuple[object, ...] = ()) -> None:
    with contextlib.closing(sqlite3.connect(root / "index.db")) as connection, connection:
        connection.execute(sql, parameters)


def _lost_at(backend: Backend, digest: str) -> object:
    return backend.rows("SELECT lost_at FROM blobs WHERE digest = ?", (digest,))[0][0]


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_blob_kept_outside_the_index_is_stored_again_by_the_next_write(backend: Backend, damage: str) -> None:
    store = backend.open(inline_max=0, learn=False)
    reference = store.write(key="1_read_file_call_1.txt", content=CONTENT)
    digest = split_reference(reference)[0]
    assert backend.rows("SELECT stored_in FROM blobs") == [(backend.stored_elsewhere,)]
    DAMAGE[damage](backend, digest)

    with pytest.raises(CorruptBlobError) as raised:
        store.read(reference)
    assert raised.value.digest == digest
    assert _lost_at(backend, digest) is not None

    assert store.write(key="2_read_file_call_2.txt", content=CONTENT) == reference
    assert store.read(reference) == CONTENT
    assert _lost_at(backend, digest) is None
    report = verify(store)
    assert report.clean, report
    # Another store object, which never saw the damage, reads the bytes stored again.
    assert backend.open(learn=False).read(reference) == CONTENT


def test_a_frame_damaged_inside_the_index_is_stored_again_by_the_next_write(backend: Backend) -> None:
    store = backend.open(learn=False)
    reference = store.write(key="1_read_file_call_1.txt", content="a small result, kept in the index")
    assert backend.rows("SELECT stored_in FROM blobs") == [("index",)]
    backend.execute("UPDATE blob_frames SET frame = ?", (b"\x28\xb5\x2f\xfd damaged",))

    with pytest.raises(CorruptBlobError):
        store.read(reference)
    store.write(key="2_read_file_call_2.txt", content="a small result, kept in the index")
    assert store.read(reference) == "a small result, kept in the index"
    assert verify(store).clean


@pytest.mark.parametrize("damage", ["deleted", "overwritten with fewer bytes"])
def test_verify_finding_a_blob_lost_is_enough_for_the_next_write_to_store_it_again(
    backend: Backend, damage: str
) -> None:
    store = backend.open(inline_max=0, learn=False)
    reference = store.write(key="1_read_file_call_1.txt", content=CONTENT)
    digest = split_reference(reference)[0]
    DAMAGE[damage](backend, digest)

    found = verify(store)
    assert found.missing == [digest] if damage == "deleted" else [d for d, _ in found.corrupt] == [digest]
    store.write(key="2_read_file_call_2.txt", content=CONTENT)
    assert verify(store).clean
    assert store.read(reference) == CONTENT


def test_a_delta_whose_base_is_lost_is_readable_again_after_a_write_of_either(backend: Backend) -> None:
    # The base's content is never written again here: the delta's own write stores it as a plain frame.
    store = backend.open(learn=True, inline_max=64 * 1024)
    base = store.write(key="1_ls_call_1.txt", content=CONTENT)
    newer_content = CONTENT + "one more line\n"
    newer = store.write(key="2_ls_call_2.txt", content=newer_content)
    base_digest, newer_digest = split_reference(base)[0], split_reference(newer)[0]
    encodings = dict(backend.rows("SELECT digest, encoding FROM blobs"))
    assert encodings == {base_digest: "plain", newer_digest: "delta"}
    backend.execute(
        "UPDATE blob_frames SET frame = ? WHERE blob_id = (SELECT id FROM blobs WHERE digest = ?)",
        (b"damaged", base_digest),
    )

    reader = backend.open(learn=True)  # nothing of the base in its memory
    with pytest.raises(CorruptBlobError):
        reader.read(newer)
    reader.write(key="3_ls_call_3.txt", content=newer_content)
    assert backend.open().read(newer) == newer_content
    assert dict(backend.rows("SELECT digest, encoding FROM blobs"))[newer_digest] == "plain"


def test_a_duplicate_write_of_a_healthy_blob_leaves_it_as_it_was(backend: Backend) -> None:
    store = backend.open(inline_max=0, learn=False)
    reference = store.write(key="1_read_file_call_1.txt", content=CONTENT)
    before = backend.rows("SELECT id, stored_in, stored_size, first_seen, lost_at FROM blobs")
    store.write(key="2_read_file_call_2.txt", content=CONTENT)
    assert backend.rows("SELECT id, stored_in, stored_size, first_seen, lost_at FROM blobs") == before
    assert store.read(reference) == CONTENT


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(frame=st.binary(max_size=200))
def test_whatever_bytes_replace_an_inline_frame_a_read_raises_and_a_write_heals(
    tmp_path_factory: pytest.TempPathFactory, frame: bytes
) -> None:
    root = tmp_path_factory.mktemp("store")
    with ContentAddressedToolResultStore(root, learn=False) as store:
        reference = store.write(key="a.txt", content="what the tool said")
    _execute(root, "UPDATE blob_frames SET frame = ?", (frame,))
    with ContentAddressedToolResultStore(root, learn=False) as store:
        with pytest.raises(CorruptBlobError):
            store.read(reference)
        store.write(key="b.txt", content="what the tool said")
        assert store.read(reference) == "what the tool said"


def _chattr(flag: str, root: Path) -> None:
    subprocess.run(["chattr", "-R", flag, str(root)], check=True, capture_output=True)


@pytest.fixture
def immutable_root(tmp_path: Path) -> Iterator[Path]:
    """A store's root, made immutable (`chattr +i`, which root cannot write through either) by the test."""
    root = tmp_path / "store"
    yield root
    _chattr("-i", root)


def test_a_read_only_store_reading_a_lost_blob_raises_and_changes_nothing(immutable_root: Path) -> None:
    with ContentAddressedToolResultStore(immutable_root, inline_max=0, learn=False) as store:
        reference = store.write(key="a.txt", content=CONTENT)
    digest = split_reference(reference)[0]
    (immutable_root / "blobs" / digest[:2] / f"{digest[2:]}.zst").write_bytes(b"damaged")
    _chattr("+i", immutable_root)
    before = tree_fingerprint(immutable_root)
    with ContentAddressedToolResultStore(immutable_root) as store:
        assert store.repository.read_only
        with pytest.raises(CorruptBlobError) as raised:
            store.read(reference)
        assert raised.value.digest == digest
        assert not verify(store).ok
    assert tree_fingerprint(immutable_root) == before


def test_a_read_whose_mark_fails_raises_what_it_found(store_root: Path) -> None:
    with ContentAddressedToolResultStore(store_root, inline_max=0, learn=False) as store:
        reference = store.write(key="a.txt", content=CONTENT)
        digest = split_reference(reference)[0]
        (store_root / "blobs" / digest[:2] / f"{digest[2:]}.zst").unlink()
        _execute(
            store_root,
            "CREATE TRIGGER refuse_lost BEFORE UPDATE OF lost_at ON blobs WHEN NEW.lost_at IS NOT NULL "
            "BEGIN SELECT RAISE(ABORT, 'disk I/O error'); END",
        )
        with pytest.raises(CorruptBlobError, match="is missing") as raised:
            store.read(reference)
        assert raised.value.missing
        # Unmarked, the blob file is still found gone by the write's own look-up, and stored again.
        store.write(key="b.txt", content=CONTENT)
        assert store.read(reference) == CONTENT


def test_a_writer_that_stored_the_content_a_moment_ago_stores_it_again_once_its_hint_is_stale(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Another store object (as another process would) finds the blob lost; the writer's hint, less than
    # LAST_SEEN_RESOLUTION old, is of its own write, and the first write after that resolution stores it again.
    writer = backend.open(learn=False)
    content = "a small result, kept in the index"
    reference = writer.write(key="1.txt", content=content)
    backend.execute("UPDATE blob_frames SET frame = ?", (b"damaged",))
    reader = backend.open(learn=False)
    with pytest.raises(CorruptBlobError):
        reader.read(reference)
    later = time.monotonic() + 2 * hints.LAST_SEEN_RESOLUTION.total_seconds()
    monkeypatch.setattr(hints, "time", SimpleNamespace(monotonic=lambda: later))
    writer.write(key="2.txt", content=content)
    assert reader.read(reference) == content


def test_damage_a_search_meets_is_stored_again_by_the_next_write(backend: Backend) -> None:
    store = backend.open(inline_max=0, learn=False, search_index=True)
    reference = store.write(key="1_read_file_call_1.txt", content=CONTENT)
    digest = split_reference(reference)[0]
    _overwrite_shorter(backend, digest)
    found = store.search(terms=["listing of a tool"], limit=5)
    assert found.hits == [] and found.unreadable == 1
    assert _lost_at(backend, digest) is not None
    store.write(key="2_read_file_call_2.txt", content=CONTENT)
    assert store.read(reference) == CONTENT
    assert [hit.reference for hit in store.search(terms=["listing of a tool"], limit=5).hits] == [reference]


def test_damage_a_copy_meets_is_stored_again_by_the_next_write(backend: Backend, tmp_path: Path) -> None:
    store = backend.open(inline_max=0, learn=False)
    reference = store.write(key="1_read_file_call_1.txt", content=CONTENT)
    digest = split_reference(reference)[0]
    _overwrite_shorter(backend, digest)
    with ContentAddressedToolResultStore(tmp_path / "copy") as target:
        assert copy_store(store, target).unreadable_blobs == [digest]
    assert _lost_at(backend, digest) is not None
    store.write(key="2_read_file_call_2.txt", content=CONTENT)
    with ContentAddressedToolResultStore(tmp_path / "copy") as target:
        assert copy_store(store, target).complete
        assert target.read(reference) == CONTENT
