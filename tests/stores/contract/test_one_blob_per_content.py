"""
One blob per content, however often and in whichever namespace it is written, even by writers racing each other;
small blobs kept in the index, large ones in a file or object, compressed. Namespaces share blobs, not reads.
"""

import os
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from casstore import ReferenceNotFoundError
from casstore.blobs.location import MARKER_NAME
from casstore.maintenance.checks import verify
from tests.helpers import blake3_hex
from tests.store_backends import Backend, SharedBackend, StoreFactory, blob_digests, where_blobs_are


@pytest.mark.parametrize("size", ["small", "large"])
def test_the_same_content_written_many_times_in_two_namespaces_is_stored_once(
    backend: Backend, open_store: StoreFactory, size: str
) -> None:
    content = "the same file, read again\n" * 10 if size == "small" else os.urandom(200_000).hex()
    alice, bob = open_store(namespace="A"), open_store(namespace="B")
    references = {store.write(key=f"{n}_read_{n}.txt", content=content) for n in range(10) for store in (alice, bob)}
    digest = blake3_hex(content.encode())
    assert len(references) == 1
    assert backend.count("writes") == 20
    assert backend.rows("SELECT digest FROM blobs") == [(digest,)]
    assert backend.rows("SELECT DISTINCT namespace FROM writes ORDER BY namespace") == [("A",), ("B",)]
    if size == "small":
        assert where_blobs_are(backend) == {digest: "index"}
        assert backend.count("blob_frames") == 1
        assert backend.blob_names() == []
    else:
        assert where_blobs_are(backend) == {digest: backend.stored_elsewhere}
        assert backend.count("blob_frames") == 0
        assert backend.blob_names() == [backend.blob_name(digest)]
    (reference,) = references
    assert alice.read(reference) == bob.read(reference) == content


def test_small_blobs_live_in_the_index_and_large_ones_outside(backend: Backend, open_store: StoreFactory) -> None:
    store = open_store(inline_max=1024)
    small = store.write(key="small.txt", content="short result")
    large_content = os.urandom(50_000)
    large = store.write(key="large.bin", content=large_content)
    assert store.read(small) == "short result"
    assert store.read(large) == large_content
    digest = blake3_hex(large_content)
    assert dict(backend.rows("SELECT size, stored_in FROM blobs")) == {12: "index", 50_000: backend.stored_elsewhere}
    assert backend.blob_names() == [backend.blob_name(digest)]
    if isinstance(backend, SharedBackend):
        # The blob's object, and the marker naming the store at its blob location.
        assert backend.full_object_names() == [
            f"{backend.prefix}/blake3/{digest[:2]}/{digest[2:]}",
            f"{backend.prefix}/{MARKER_NAME}",
        ]
        assert re.fullmatch(r"prefix-[0-9a-f]{32}/blake3/[0-9a-f]{2}/[0-9a-f]{62}", backend.full_object_names()[0])
    else:
        assert (backend.root / "blobs" / digest[:2] / f"{digest[2:]}.zst").is_file()  # type: ignore[attr-defined]
    (stored_size,) = backend.rows("SELECT stored_size FROM blobs WHERE digest = ?", (digest,))[0]
    assert stored_size - len(large_content) <= 64  # incompressible: a few bytes of frame


def test_text_is_compressed(backend: Backend, open_store: StoreFactory) -> None:
    content = Path(__file__).read_text() * 5
    open_store(inline_max=0).write(key="source.txt", content=content)
    ((stored_size, stored_in),) = backend.rows("SELECT stored_size, stored_in FROM blobs")
    assert stored_in == backend.stored_elsewhere
    assert stored_size < len(content.encode()) / 3


def test_concurrent_writers_of_the_same_new_content_store_it_once(backend: Backend, open_store: StoreFactory) -> None:
    threads = 8
    stores = [open_store(namespace="A"), open_store(namespace="B")]  # two replicas, four threads each
    contents: list[str | bytes] = ["small and new\n" * 10, os.urandom(100_000), b"binary and new" * 10]
    barrier = threading.Barrier(threads)

    def write(number: int) -> list[str]:
        store = stores[number % 2]
        barrier.wait(30)
        return [store.write(key=f"{number}_{index}.txt", content=content) for index, content in enumerate(contents)]

    with ThreadPoolExecutor(threads) as pool:
        results = list(pool.map(write, range(threads)))
    assert all(result == results[0] for result in results)
    assert backend.count("writes") == threads * len(contents)
    digests = sorted(blake3_hex(content.encode() if isinstance(content, str) else content) for content in contents)
    assert blob_digests(backend) == digests
    assert backend.blob_names() == [backend.blob_name(blake3_hex(contents[1]))]  # type: ignore[arg-type]
    for store in stores:
        assert [store.read(reference) for reference in results[0]] == contents
    assert verify(stores[0]).clean


def test_namespaces_isolate_reads_but_share_blobs(backend: Backend, open_store: StoreFactory) -> None:
    alice, bob = open_store(namespace="alice"), open_store(namespace="bob")
    shared = "a result both users got\n" * 100
    assert alice.write(key="a.txt", content=shared) == bob.write(key="b.txt", content=shared)
    secret = bob.write(key="secret.txt", content="bob's secret")
    assert alice.read(bob.write(key="c.txt", content=shared)) == shared
    with pytest.raises(ReferenceNotFoundError) as foreign:
        alice.read(secret)
    never_written = f"blake3/{'1' * 2}/{'1' * 62}.txt"
    with pytest.raises(ReferenceNotFoundError) as nowhere:
        alice.read(never_written)
    assert str(foreign.value).replace(secret, "REF") == str(nowhere.value).replace(never_written, "REF")
    assert "'alice'" in str(foreign.value)
    assert backend.count("blobs") == 2
