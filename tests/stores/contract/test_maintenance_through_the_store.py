"""
`verify` and `collect_garbage` through an opened store: stray blobs, forgotten namespaces and their blobs, and
the grace period a repeated write renews.
"""

import os
from datetime import timedelta

import pytest

from casstore import ReferenceNotFoundError
from casstore.maintenance.checks import collect_garbage, verify
from tests.helpers import blake3_hex
from tests.store_backends import LONG_AGO, TIMESTAMP, Backend, StoreFactory, age_every_blob, blob_digests


def test_verify_a_healthy_store_and_its_stray_blobs(backend: Backend, open_store: StoreFactory) -> None:
    store = open_store(inline_max=1024)
    store.write(key="a.txt", content="small")
    store.write(key="b.bin", content=os.urandom(20_000))
    report = verify(store)
    assert (report.ok, report.clean, report.blobs_checked, report.unreferenced_blobs) == (True, True, 2, 0)
    stray = blake3_hex(b"nothing points at me")
    backend.put_raw(backend.blob_name(stray), b"a blob nobody recorded")
    report = verify(store)
    assert (report.ok, report.clean, report.stray_files, report.stray_bytes) == (True, False, 1, 22)
    removed = collect_garbage(store, grace=timedelta(0))
    assert (removed.stray_files_removed, removed.stray_bytes_freed, removed.blobs_deleted) == (1, 22, 0)
    assert backend.blob_name(stray) not in backend.blob_names()
    assert verify(store).clean


def test_collect_garbage_forgets_a_namespace_and_then_its_blobs(backend: Backend, open_store: StoreFactory) -> None:
    alice, bob = open_store(namespace="A", inline_max=1024), open_store(namespace="B", inline_max=1024)
    only_alice = alice.write(key="x.txt", content="only A wrote this")
    large = os.urandom(30_000)
    only_alice_large = alice.write(key="z.bin", content=large)
    both = alice.write(key="y.txt", content="both wrote this")
    assert bob.write(key="y.txt", content="both wrote this") == both
    sizes = dict(backend.rows("SELECT digest, stored_size FROM blobs"))
    gone = [blake3_hex(b"only A wrote this"), blake3_hex(large)]

    preview = collect_garbage(alice, namespace="A", grace=timedelta(0), dry_run=True)
    assert (preview.dry_run, preview.writes_forgotten) == (True, 3)
    assert backend.count("writes") == 4  # a dry run changes nothing

    # Forgotten, but seen a moment ago: the grace period keeps every blob.
    first = collect_garbage(alice, namespace="A")
    assert (first.writes_forgotten, first.blobs_deleted, first.offloads_forgotten) == (3, 0, 0)
    assert backend.count("blobs") == 3
    for reference in (only_alice, only_alice_large, both):
        with pytest.raises(ReferenceNotFoundError):
            alice.read(reference)
    assert bob.read(both) == "both wrote this"

    age_every_blob(backend)
    preview = collect_garbage(bob, grace=timedelta(0), dry_run=True)
    assert (preview.blobs_deleted, preview.blob_bytes_freed) == (2, sum(sizes[digest] for digest in gone))
    assert backend.count("blobs") == 3
    second = collect_garbage(bob, grace=timedelta(0))
    assert (second.writes_forgotten, second.blobs_deleted) == (0, 2)
    assert second.blob_bytes_freed == sum(sizes[digest] for digest in gone)
    assert blob_digests(backend) == [blake3_hex(b"both wrote this")]
    assert backend.blob_names() == []  # the large blob's file or object went with its row
    assert bob.read(both) == "both wrote this"
    assert verify(bob).clean
    # Written again, the collected content is stored again.
    assert alice.write(key="z.bin", content=large) == only_alice_large
    assert open_store(namespace="A").read(only_alice_large) == large
    assert backend.blob_names() == [backend.blob_name(blake3_hex(large))]


def test_a_repeated_write_refreshes_last_seen_so_gc_keeps_the_blob(backend: Backend, open_store: StoreFactory) -> None:
    store = open_store(namespace="A")
    store.write(key="a.txt", content="read again")
    age_every_blob(backend)
    other = open_store(namespace="B")  # another store object: it has no memory of the blob
    other.write(key="b.txt", content="read again")
    (last_seen,) = backend.rows("SELECT last_seen FROM blobs")[0]
    assert TIMESTAMP.match(last_seen) and last_seen > LONG_AGO
    report = collect_garbage(store, namespace="B", grace=timedelta(hours=1))
    assert (report.writes_forgotten, report.blobs_deleted) == (1, 0)
