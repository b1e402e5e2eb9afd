"""
Prepared writes: nothing is stored until written, the parts of one result are stored together or not at all, and
what a failed write leaves behind harms no later write.
"""

import os

import pytest

from casstore import ReferenceNotFoundError, StorageError
from casstore.blobs.frames import FrameCodec
from casstore.maintenance.checks import verify
from casstore.stores.local import RepositoryToolResultStore
from tests.helpers import blake3_hex
from tests.store_backends import Backend, StoreFactory


def test_prepare_write_stores_nothing_until_written(backend: Backend, store: RepositoryToolResultStore) -> None:
    prepared = store.prepare_write(key="a.txt", content="later")
    assert backend.snapshot() == (0, 0, 0, [])
    with pytest.raises(ReferenceNotFoundError):
        store.read(prepared.reference)
    assert store.write_prepared(prepared) == prepared.reference == store.write(key="b.txt", content="later")
    assert store.read(prepared.reference) == "later"


def test_write_prepared_many_stores_every_part_in_order(backend: Backend, store: RepositoryToolResultStore) -> None:
    parts = [
        store.prepare_write(key="0.txt", content="first"),
        store.prepare_write(key="1.png", content=b"\x89PNG second"),
        store.prepare_write(key="2.txt", content="first"),
    ]
    references = store.write_prepared_many(parts)
    assert references == [part.reference for part in parts]
    assert [store.read(reference) for reference in references] == ["first", b"\x89PNG second", "first"]
    assert (backend.count("writes"), backend.count("blobs")) == (3, 2)
    assert backend.rows("SELECT key, kind, size FROM writes ORDER BY id") == [
        ("0.txt", "text", 5),
        ("1.png", "binary", 11),
        ("2.txt", "text", 5),
    ]


def test_the_parts_of_one_result_are_stored_together_or_not_at_all(backend: Backend, open_store: StoreFactory) -> None:
    store = open_store(inline_max=1024)
    known = store.write(key="known.txt", content="already stored")
    before = backend.snapshot()
    backend.fail_writes_of_key("boom.txt")
    small, large = "a small first part\n" * 10, os.urandom(100_000)
    parts = [
        store.prepare_write(key="0.txt", content=small),
        store.prepare_write(key="1.bin", content=large),
        store.prepare_write(key="2.txt", content="already stored"),
        store.prepare_write(key="boom.txt", content="the part the index refuses"),
    ]
    with pytest.raises(StorageError, match="no space left on device") as raised:
        store.write_prepared_many(parts)
    assert not isinstance(raised.value, FileNotFoundError)
    writes, blobs, frames, names = backend.snapshot()
    assert (writes, blobs, frames) == before[:3]  # not even the parts before the one refused
    # At most the large part's staged blob, which no row points at (gc removes it).
    assert set(names) - set(before[3]) <= {backend.blob_name(blake3_hex(large))}
    for part in parts[:2]:
        with pytest.raises(ReferenceNotFoundError):
            store.read(part.reference)
    assert store.read(known) == "already stored"
    # Without the refused part, the same parts are stored, and read back, from this store and another.
    assert store.write_prepared_many(parts[:3]) == [part.reference for part in parts[:3]]
    other = open_store()
    assert [other.read(part.reference) for part in parts[:3]] == [small, large, "already stored"]
    assert verify(store).ok


@pytest.mark.parametrize("leftover", ["other settings", "damaged"])
def test_a_blob_left_by_a_failed_write_does_not_harm_a_later_write(
    backend: Backend, open_store: StoreFactory, leftover: str
) -> None:
    """
    A failed write (or a crash before its commit) leaves its staged blob, which no row points at: garbage for gc, and
    harmless meanwhile. A later write of that content, by a replica with another compression level (whose frame has
    another size) or after the leftover was damaged (same size, other bytes), stores it and reads it back.
    """
    content = "".join(f"line {number}: compressible text, again and again\n" for number in range(5000))
    digest = blake3_hex(content.encode())
    first = open_store(inline_max=0, compression_level=1)
    backend.fail_writes_of_key("boom.txt")
    with pytest.raises(StorageError):
        first.write(key="boom.txt", content=content)
    assert backend.blob_names() == [backend.blob_name(digest)]  # the leftover
    assert backend.count("blobs") == 0
    if leftover == "damaged":
        frame = FrameCodec(compression_level=1).encode(content.encode())  # what the failed write left
        backend.put_raw(backend.blob_name(digest), bytes(len(frame)))
        other = open_store(inline_max=0, compression_level=1)
    else:
        other = open_store(inline_max=0, compression_level=19)
    reference = other.write(key="a.txt", content=content)
    assert other.read(reference) == content
    assert open_store().read(reference) == content
    assert verify(other).clean
