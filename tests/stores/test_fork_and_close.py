"""A store's lifetime: shared across fork(), and closed while other threads are using it."""

import os
import threading
from pathlib import Path
from typing import Any

from casstore import ContentAddressedToolResultStore, StoreClosedError
from casstore.maintenance.checks import verify
from tests.reliability_helpers import collect, fork_job


def test_a_forked_child_can_use_its_parents_store(store_root: Path) -> None:
    """Even when another thread of the parent held the store's lock at the moment of fork() (here, while reading)."""
    with ContentAddressedToolResultStore(store_root, inline_max=0) as store:
        before = store.write(key="before.txt", content="written before fork\n" * 100)
        inside, release = threading.Event(), threading.Event()

        def hold_the_lock() -> None:
            with store.repository._core.database.snapshot():  # the lock every read takes, held
                inside.set()
                release.wait(timeout=30)

        holder = threading.Thread(target=hold_the_lock)
        holder.start()
        inside.wait(timeout=30)

        def child() -> dict[str, Any]:
            # The holder thread does not exist here, but the lock it held was copied: the child must not wait on it.
            reference = store.write(key="child.txt", content="written by the child\n" * 100)
            return {"reference": reference, "before": store.read(before)}

        try:
            outcome = collect(*fork_job(child))  # still holding: a child that waited for the lock would never end
        finally:
            release.set()
            holder.join()
        assert outcome["before"] == "written before fork\n" * 100
        assert store.read(outcome["reference"]) == "written by the child\n" * 100
        assert (
            store.write(key="after.txt", content="parent again")
            == store.prepare_write(key="x.txt", content="parent again").reference
        )
        assert verify(store).ok


def test_closing_while_threads_write_and_read_loses_nothing(store_root: Path) -> None:
    store = ContentAddressedToolResultStore(store_root, inline_max=0)
    written: list[tuple[str, str]] = []
    unexpected: list[BaseException] = []
    lock = threading.Lock()

    def work(worker: int) -> None:
        for number in range(10_000):
            content = f"worker {worker} result {number}\n" * 2000  # ~50 KB: a blob file each time
            try:
                reference = store.write(key="r.txt", content=content)
                assert store.read(reference) == content
            except StoreClosedError:
                return
            except BaseException as error:  # anything but StoreClosedError is a defect
                unexpected.append(error)
                return
            with lock:
                written.append((reference, content))

    threads = [threading.Thread(target=work, args=(worker,)) for worker in range(4)]
    for thread in threads:
        thread.start()
    while len(written) < 20:
        threading.Event().wait(0.01)
    store.close()
    for thread in threads:
        thread.join()
    assert unexpected == []
    assert not [path for path in store_root.parent.iterdir() if path.name != store_root.name]
    with ContentAddressedToolResultStore(store_root) as reopened:
        for reference, content in written:
            assert reopened.read(reference) == content
        report = verify(reopened)
    assert report.ok and report.stray_files == 0
    assert os.path.isdir(store_root / "blobs")


def test_closing_while_threads_read_blob_files_gives_content_or_store_closed(store_root: Path) -> None:
    contents = [f"file blob {number}\n" * 5000 for number in range(3)]  # each well over inline_max
    with ContentAddressedToolResultStore(store_root, inline_max=0) as store:
        references = [store.write(key="f.txt", content=content) for content in contents]
    unexpected: list[BaseException] = []
    reads: list[int] = []

    def read_until_closed(store: ContentAddressedToolResultStore, started: threading.Barrier) -> None:
        started.wait()
        for number in range(1_000_000):
            try:
                assert store.read(references[number % 3]) == contents[number % 3]
            except StoreClosedError:
                reads.append(number)
                return
            except BaseException as error:  # a read through a closed or reused descriptor would land here
                unexpected.append(error)
                return

    for _ in range(80):
        store = ContentAddressedToolResultStore(store_root, inline_max=0)
        started = threading.Barrier(5)
        readers = [threading.Thread(target=read_until_closed, args=(store, started)) for _ in range(4)]
        for reader in readers:
            reader.start()
        started.wait()
        threading.Event().wait(0.01)
        store.close()
        for reader in readers:
            reader.join()
    assert unexpected == []
    assert sum(reads) > 100  # the readers really read before each close
