"""`gc` racing real writer processes: a blob a writer references is never deleted."""

import json
import sqlite3
import subprocess
import sys
import threading
import time
from contextlib import closing
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from casstore import ContentAddressedToolResultStore, ReferenceNotFoundError, StorageError
from casstore.maintenance.checks import collect_garbage, verify
from tests.helpers import create_store
from tests.reliability_helpers import forget_hints

CONTENTS = [f"result {number}\n" * (30 + 700 * (number % 4)) for number in range(240)]

WRITER = """
import json, random, sys, time
from casstore import ContentAddressedToolResultStore
root, seconds, contents = sys.argv[1], float(sys.argv[2]), json.loads(open(sys.argv[3]).read())
order = list(range(len(contents)))
random.Random(int(sys.argv[4])).shuffle(order)
written, failures = [], 0
with ContentAddressedToolResultStore(root, namespace="live-" + sys.argv[4], inline_max=0) as store:
    for number in order:  # each content once, spread over the run, so most writes meet a blob gc may be deleting
        time.sleep(seconds / len(order))
        reference = store.write(key="live.txt", content=contents[number])
        if store.read(reference) != contents[number]:
            failures += 1
        written.append(reference)
print(json.dumps({"written": written, "failures": failures}))
"""


@pytest.mark.slow
@pytest.mark.parametrize("grace", [timedelta(0), timedelta(hours=1)], ids=["no-grace", "grace-1h-aged"])
def test_writers_racing_gc_lose_nothing(store_root: Path, grace: timedelta) -> None:
    """
    Writers write contents that gc keeps deleting: a churn namespace writes them all, and gc forgets it and collects
    every blob no writer references yet, over and over: with no grace period, the moment churn wrote them; with one,
    once every blob is made to look seen long ago (writers that find a blob meanwhile refresh it). Only the
    transaction protocol protects a writer that meets a blob in the middle of being deleted.
    """
    create_store(store_root)
    contents_file = store_root.parent / "contents.json"
    contents_file.write_text(json.dumps(CONTENTS))
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(store_root), "4", str(contents_file), str(seed)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for seed in range(2)
    ]
    collections = deleted = waited = 0
    with ContentAddressedToolResultStore(store_root, namespace="churn", inline_max=0) as churn:
        while any(writer.poll() is None for writer in writers):
            for content in CONTENTS:
                churn.write(key="churn.txt", content=content)
            if grace:
                _age_every_blob(store_root)
            report = collect_garbage(churn, namespace="churn", grace=grace)
            collections += 1
            deleted += report.blobs_deleted
            waited += report.blobs_waiting
    outcomes = [json.loads(writer.communicate(timeout=60)[0]) for writer in writers]
    print(f"gc race: {collections} collections deleted {deleted} blobs while 2 writers wrote {2 * len(CONTENTS)}")
    assert all(writer.returncode == 0 for writer in writers)
    assert sum(outcome["failures"] for outcome in outcomes) == 0
    assert collections >= 2 and deleted > len(CONTENTS) // 2  # gc really deleted, many times, while writers wrote
    if not grace:
        assert waited == 0  # each run took every blob churn had just written: none waited for a later one
    for seed, outcome in enumerate(outcomes):
        assert len(outcome["written"]) == len(CONTENTS)
        with ContentAddressedToolResultStore(store_root, namespace=f"live-{seed}") as live:
            by_reference = {live.prepare_write(key="x.txt", content=c).reference: c for c in CONTENTS}
            for reference in outcome["written"]:
                assert live.read(reference) == by_reference[reference]
            verified = verify(live)
        assert verified.ok, verified


def _age_every_blob(root: Path) -> None:
    """As if every blob was last seen long ago, so that gc with no grace period may take it at once."""
    with closing(sqlite3.connect(root / "index.db")) as connection, connection:
        connection.execute("UPDATE blobs SET last_seen = '2020-01-01 00:00:00.000'")


def test_a_blob_staged_before_gc_and_recorded_after_it_still_reads(store_root: Path) -> None:
    """The narrowest interleaving, made deterministic: gc runs between a writer's `stage` and its transaction."""
    with ContentAddressedToolResultStore(store_root, inline_max=0) as store:
        repository = store.repository
        stage_unknown = repository._writer._stage_unknown
        reports = []

        def stage_then_collect(writes: Any) -> Any:
            staged = stage_unknown(writes)
            reports.append(collect_garbage(store, grace=timedelta(0)))
            return staged

        repository._writer._stage_unknown = stage_then_collect  # type: ignore[method-assign]  # patched on purpose
        reference = store.write(key="a.txt", content=CONTENTS[1])
        assert [report.stray_files_removed for report in reports] == [1]  # the staged file had no row yet: gc took it
        assert store.read(reference) == CONTENTS[1]
        assert verify(store).ok


def test_a_write_that_goes_again_after_gc_took_a_part_still_refreshes_the_others(store_root: Path) -> None:
    """A refresh rolled back with the first try must not count: the grace period protects what was just written."""
    with ContentAddressedToolResultStore(store_root) as store:
        kept = store.prepare_write(key="a.txt", content=CONTENTS[4])
        collected = store.prepare_write(key="b.txt", content=CONTENTS[5])
        store.write_prepared(kept)
        store.write_prepared(collected)  # the store now knows both blobs, so it will not stage b again by itself
        with closing(sqlite3.connect(store_root / "index.db")) as connection, connection:  # both written long ago
            connection.execute("UPDATE blobs SET last_seen = '2020-01-01 00:00:00.000'")
            connection.execute(
                "UPDATE write_rows SET written_at = '2020-01-01 00:00:00.000' "
                "WHERE blob_id = (SELECT id FROM blobs WHERE digest = ?)",
                [collected.digest],
            )
        assert collect_garbage(store, older_than=timedelta(days=1), grace=timedelta(0)).blobs_deleted == 1
        forget_hints(store)  # so the store looks a up again
        store.write_prepared_many([kept, collected])  # a is refreshed, b is missing: rolled back, staged, again
        # Written a moment ago: a one-hour grace period keeps a even once its namespace is forgotten.
        assert collect_garbage(store, namespace="default", grace=timedelta(hours=1)).blobs_deleted == 0
        assert verify(store).ok


def test_a_write_that_failed_leaves_nothing_trusted(store_root: Path) -> None:
    with ContentAddressedToolResultStore(store_root) as store:
        kept = store.prepare_write(key="a.txt", content=CONTENTS[6])
        store.write_prepared(kept)
        _age_every_blob(store_root)
        # An error inside the write transaction, after a has been refreshed, as a full disk would raise. A temporary
        # trigger lives on the connection that made it: the store's own.
        with store.repository._core.database.transaction() as work:
            work.connection.execute(
                "CREATE TEMP TRIGGER fail_boom BEFORE INSERT ON write_rows WHEN NEW.key = 'boom.txt' "
                "BEGIN SELECT RAISE(ABORT, 'no space left'); END"
            )
        forget_hints(store)  # so the write looks a up again, and refreshes it in the transaction that fails
        boom = store.prepare_write(key="boom.txt", content=CONTENTS[7])
        with pytest.raises(StorageError):
            store.write_prepared_many([kept, boom])
        store.write(key="c.txt", content=CONTENTS[8])  # an unrelated write commits
        store.write_prepared(kept)  # must still refresh a: its refresh above was rolled back
        assert collect_garbage(store, namespace="default", grace=timedelta(hours=1)).blobs_deleted == 0


@pytest.mark.slow
def test_a_reference_forgotten_and_collected_during_a_read_reads_as_not_found(store_root: Path) -> None:
    """Readers racing `gc --namespace`: each read returns the content or `ReferenceNotFoundError`, never corruption."""
    content = CONTENTS[3]
    outcomes: dict[str, int] = {"read": 0, "not found": 0}
    unexpected: list[BaseException] = []
    stop = threading.Event()
    with ContentAddressedToolResultStore(store_root, namespace="reader", inline_max=0) as store:
        reference = store.write(key="r.txt", content=content)

        def read_continuously() -> None:
            while not stop.is_set():
                try:
                    assert store.read(reference) == content
                    outcomes["read"] += 1
                except ReferenceNotFoundError:
                    outcomes["not found"] += 1
                except BaseException as error:
                    unexpected.append(error)
                    return

        readers = [threading.Thread(target=read_continuously) for _ in range(2)]
        for reader in readers:
            reader.start()
        started = time.monotonic()
        # Two seconds, and on until both outcomes were seen (a slow machine may need longer to meet both).
        while time.monotonic() < started + 2 or (min(outcomes.values()) == 0 and time.monotonic() < started + 30):
            collect_garbage(store, namespace="reader", grace=timedelta(0))
            store.write(key="r.txt", content=content)
        stop.set()
        for reader in readers:
            reader.join()
    assert unexpected == []
    assert outcomes["read"] > 0 and outcomes["not found"] > 0


def test_a_read_whose_blob_was_collected_and_stored_again_meanwhile_returns_the_content(store_root: Path) -> None:
    """
    The interleaving the race test above meets now and then, made to happen at every chance: each time a read has looked
    its blob up without the write lock, gc collects the blob before the file is opened, and a writer stores the same
    content again before the read looks back. The read still returns the content (its look under the write lock, where
    gc cannot run, is final), and never reports a healthy store as corrupt.
    """
    content = CONTENTS[3]
    with ContentAddressedToolResultStore(store_root, namespace="reader", inline_max=0) as store:
        reference = store.write(key="r.txt", content=content)
        blobs = store.repository._core.blobs
        load = blobs.load
        collections: list[int] = []

        def collect_and_store_again_around_unlocked_loads(
            location: Any, *, guarded: bool = True, fresh: bool = False
        ) -> bytes:
            if not guarded:  # the read's look under the write lock: gc would wait
                return load(location, guarded=guarded, fresh=fresh)
            collections.append(collect_garbage(store, namespace="reader", grace=timedelta(0)).blobs_deleted)
            try:
                return load(location, guarded=guarded, fresh=fresh)
            finally:
                store.write(key="r.txt", content=content)

        blobs.load = collect_and_store_again_around_unlocked_loads  # patched on purpose
        for _ in range(3):
            assert store.read(reference) == content
        assert collections == [1, 1, 1]
