"""Writers (processes with threads), readers and gc on one root at once: nothing escapes, nothing is lost."""

import sqlite3
import threading
import time
import traceback
from contextlib import closing
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from casstore import ContentAddressedToolResultStore
from casstore.maintenance.checks import collect_garbage, verify
from tests.helpers import create_store
from tests.reliability_helpers import collect, content_for, fork_job

WRITER_PROCESSES, THREADS, WRITES_PER_THREAD = 3, 3, 120
SECONDS_OF_BACKGROUND = 3.0


def _writer(root: Path, process: int) -> dict[str, Any]:
    written: list[tuple[int, int, str]] = []
    errors: list[str] = []
    lock = threading.Lock()
    with ContentAddressedToolResultStore(root, namespace=f"writer-{process}", inline_max=4096) as store:

        def work(thread: int) -> None:
            seed = (process * THREADS + thread) % 4  # seeds overlap across threads and processes
            for number in range(WRITES_PER_THREAD):
                try:
                    reference = store.write(key=f"{thread}_{number}.txt", content=content_for(seed, number))
                    if store.read(reference) != content_for(seed, number):
                        raise AssertionError(f"{reference} read back different bytes")
                    with lock:
                        written.append((seed, number, reference))
                except Exception:
                    with lock:
                        errors.append(traceback.format_exc())

        threads = [threading.Thread(target=work, args=(thread,)) for thread in range(THREADS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    return {"written": written, "errors": errors}


_AT_LEAST = 20


def _reader(root: Path, until: float) -> dict[str, Any]:
    reads = 0
    errors: list[str] = []
    stores: dict[str, ContentAddressedToolResultStore] = {}
    # At least some reads however slowly the machine forked us: `until` was set before the processes started.
    while reads + len(errors) < _AT_LEAST or time.monotonic() < until:
        with closing(sqlite3.connect(root / "index.db")) as connection:
            rows = connection.execute(
                "SELECT namespace, reference FROM writes WHERE namespace LIKE 'writer-%' ORDER BY random() LIMIT 20"
            ).fetchall()
        for namespace, reference in rows:
            store = stores.setdefault(namespace, ContentAddressedToolResultStore(root, namespace=namespace))
            try:
                store.read(reference)
                reads += 1
            except Exception:
                errors.append(traceback.format_exc())
    for store in stores.values():
        store.close()
    return {"reads": reads, "errors": errors}


def _collector(root: Path, until: float, grace: timedelta) -> dict[str, Any]:
    collections = deleted = waited = 0
    errors: list[str] = []
    with ContentAddressedToolResultStore(root, namespace="churn", inline_max=4096) as churn:
        number = 0
        while collections + len(errors) < 2 or time.monotonic() < until:
            try:
                for _ in range(10):
                    churn.write(key="churn.txt", content=content_for(100 + number % 4, number))
                    number += 1
                if grace:
                    with closing(sqlite3.connect(root / "index.db")) as connection, connection:
                        # As if churn's blobs were seen long ago, so gc may take them (the protocol needs no clock).
                        connection.execute(
                            "UPDATE blobs SET last_seen = '2020-01-01 00:00:00.000' "
                            "WHERE digest IN (SELECT digest FROM writes WHERE namespace = 'churn')"
                        )
                time.sleep(0.05)  # paces the collector, so the writers are not starved of the write lock
                report = collect_garbage(churn, namespace="churn", grace=grace)
                deleted, waited = deleted + report.blobs_deleted, waited + report.blobs_waiting
                collections += 1
            except Exception:
                errors.append(traceback.format_exc())
    return {"collections": collections, "deleted": deleted, "waited": waited, "errors": errors}


@pytest.mark.slow
@pytest.mark.parametrize("grace", [timedelta(0), timedelta(hours=1)], ids=["no-grace", "grace-1h-aged"])
def test_writers_readers_and_gc_at_once(store_root: Path, grace: timedelta) -> None:
    create_store(store_root)
    writers = [fork_job(partial(_writer, store_root, process)) for process in range(WRITER_PROCESSES)]
    until = time.monotonic() + SECONDS_OF_BACKGROUND
    reader = fork_job(lambda: _reader(store_root, until))
    collector = fork_job(lambda: _collector(store_root, until, grace))
    writer_outcomes = [collect(*writer) for writer in writers]
    reader_outcome, collector_outcome = collect(*reader), collect(*collector)

    for outcome in [*writer_outcomes, reader_outcome, collector_outcome]:
        assert outcome["errors"] == []  # no `database is locked`, no failed read, nothing else
    assert reader_outcome["reads"] > 0 and collector_outcome["deleted"] > 0
    if not grace:
        assert collector_outcome["waited"] == 0  # each run took every blob churn had just written
    with ContentAddressedToolResultStore(store_root) as store:
        with closing(sqlite3.connect(store_root / "index.db")) as connection:
            counts = dict(connection.execute("SELECT namespace, count(*) FROM writes GROUP BY namespace").fetchall())
        assert counts == {f"writer-{p}": THREADS * WRITES_PER_THREAD for p in range(WRITER_PROCESSES)}
        assert verify(store).ok
    distinct: set[str] = set()
    for process, outcome in enumerate(writer_outcomes):
        assert len(outcome["written"]) == THREADS * WRITES_PER_THREAD
        with ContentAddressedToolResultStore(store_root, namespace=f"writer-{process}") as store:
            for seed, number, reference in outcome["written"]:
                assert store.read(reference) == content_for(seed, number)
                distinct.add(store.prepare_write(key="x", content=content_for(seed, number)).digest)
    with closing(sqlite3.connect(store_root / "index.db")) as connection:
        blobs = {row[0] for row in connection.execute("SELECT digest FROM blobs")}
    assert distinct <= blobs
    print(
        f"{WRITER_PROCESSES} writer processes x {THREADS} threads: {WRITER_PROCESSES * THREADS * WRITES_PER_THREAD} "
        f"writes; {reader_outcome['reads']} concurrent reads; {collector_outcome['collections']} gc runs deleting "
        f"{collector_outcome['deleted']} blobs; errors: 0"
    )
    with ContentAddressedToolResultStore(store_root) as store:
        report = verify(store)
    # Each blob is stored once: one row per digest (the key), its frame or its file, and no file beside them.
    assert report.ok and report.stray_files == 0 and report.stale_rows == 0
