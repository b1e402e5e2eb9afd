"""Threads and processes writing overlapping content to one root."""

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from casstore import ContentAddressedToolResultStore
from casstore.maintenance.checks import verify
from tests.helpers import count_rows

WRITER = """
import json, sys
from casstore import ContentAddressedToolResultStore
root, worker, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
written = []
with ContentAddressedToolResultStore(root, inline_max=int(sys.argv[4])) as store:
    for i in range(count):
        shared = f"shared result {i % 25}\\n" * (50 + 400 * (i % 3))
        own = f"worker {worker} result {i}\\n" * 300
        for content in (shared, own):
            written.append([store.write(key=f"{worker}_{i}.txt", content=content), content])
print(json.dumps(written))
"""


def _expected_blobs(written: list[tuple[str, str]]) -> int:
    return len({content for _, content in written})


def test_threads_share_one_store(store_root: Path) -> None:
    written: list[tuple[str, str]] = []
    lock = threading.Lock()
    with ContentAddressedToolResultStore(store_root, inline_max=2048) as store:

        def work(worker: int) -> None:
            for i in range(60):
                for content in (f"shared {i % 10}\n" * 500, f"thread {worker} item {i}\n" * 200):
                    reference = store.write(key=f"{worker}_{i}.txt", content=content)
                    assert store.read(reference) == content
                    with lock:
                        written.append((reference, content))

        threads = [threading.Thread(target=work, args=(worker,)) for worker in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for reference, content in written:
            assert store.read(reference) == content
    assert count_rows(store_root, "writes") == len(written) == 6 * 60 * 2
    assert count_rows(store_root, "blobs") == _expected_blobs(written)


@pytest.mark.slow
def test_processes_share_one_root(store_root: Path) -> None:
    workers, per_worker = 5, 40
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(store_root), str(worker), str(per_worker), "4096"],
            stdout=subprocess.PIPE,
            text=True,
        )
        for worker in range(workers)
    ]
    written: list[tuple[str, str]] = []
    for process in processes:
        out, _ = process.communicate(timeout=120)
        assert process.returncode == 0
        written.extend((reference, content) for reference, content in json.loads(out))
    with ContentAddressedToolResultStore(store_root) as store:
        for reference, content in written:
            assert store.read(reference) == content
    assert count_rows(store_root, "writes") == workers * per_worker * 2
    assert count_rows(store_root, "blobs") == _expected_blobs(written)
    with ContentAddressedToolResultStore(store_root) as store:
        report = verify(store)
    # Each blob is stored once: one row per digest, its frame or its file, no temporary or extra file beside them.
    assert report.ok and report.stray_files == 0
