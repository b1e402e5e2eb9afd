"""`gc` racing real writer processes: a blob a writer references is never deleted."""

import json
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

from casstore import ContentAddressedToolResultStore
from casstore.index import record_write
from casstore.maintenance import collect_garbage, verify

CONTENTS = [f"result {number}\n" * (30 + 700 * (number % 4)) for number in range(12)]

WRITER = """
import json, random, sys, time
from casstore import ContentAddressedToolResultStore
root, seconds = sys.argv[1], float(sys.argv[2])
contents = json.loads(open(sys.argv[3]).read())
written, failures = [], 0
deadline = time.monotonic() + seconds
with ContentAddressedToolResultStore(root, namespace="live", inline_max=0) as store:
    while time.monotonic() < deadline:
        content = random.choice(contents)
        reference = store.write(key="live.txt", content=content)
        if store.read(reference) != content:
            failures += 1
        written.append(reference)
print(json.dumps({"written": written, "failures": failures}))
"""


def test_writers_racing_gc_lose_nothing(store_root: Path) -> None:
    ContentAddressedToolResultStore(store_root).close()
    contents_file = store_root.parent / "contents.json"
    contents_file.write_text(json.dumps(CONTENTS))
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(store_root), "4", str(contents_file)], stdout=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    collections = deleted = 0
    deadline = time.monotonic() + 4
    with ContentAddressedToolResultStore(store_root, namespace="churn", inline_max=0) as churn:
        while time.monotonic() < deadline:
            for content in CONTENTS:
                churn.write(key="churn.txt", content=content)
            # Forget the churn namespace and collect at once, with no grace: only the transaction protocol
            # protects what the writers are referencing.
            report = collect_garbage(churn, namespace="churn", grace=timedelta(0))
            collections += 1
            deleted += report.blobs_deleted
    outcomes = [json.loads(writer.communicate(timeout=60)[0]) for writer in writers]
    assert all(writer.returncode == 0 for writer in writers)
    assert sum(outcome["failures"] for outcome in outcomes) == 0
    written = {reference for outcome in outcomes for reference in outcome["written"]}
    assert collections > 5 and deleted > 0  # gc really ran and really deleted while the writers wrote
    with ContentAddressedToolResultStore(store_root, namespace="live") as live:
        by_reference = {live.prepare_write(key="x.txt", content=c).reference: c for c in CONTENTS}
        for reference in written:
            assert live.read(reference) == by_reference[reference]
        report = verify(live)
    assert report.ok, report


def test_a_blob_staged_before_gc_and_recorded_after_it_still_reads(store_root: Path) -> None:
    """The narrowest interleaving, made deterministic: gc runs between a writer's `stage` and its `put`."""
    with ContentAddressedToolResultStore(store_root, inline_max=0) as store:
        prepared = store.prepare_write(key="a.txt", content=CONTENTS[1])
        staged = store.blobs.stage(prepared.digest, prepared.data)
        report = collect_garbage(store, grace=timedelta(0))
        assert report.stray_files_removed == 1  # the staged file had no row yet, so gc took it
        with store.database.transaction() as connection:
            store.blobs.put(connection, staged)
            record_write(
                connection,
                namespace="default",
                key="a.txt",
                digest=prepared.digest,
                is_text=True,
                size=len(prepared.data),
                reference=prepared.reference,
            )
        assert store.read(prepared.reference) == CONTENTS[1]
        assert verify(store).ok


def test_a_write_after_gc_deleted_its_blob_stores_it_again(store_root: Path) -> None:
    with ContentAddressedToolResultStore(store_root, inline_max=0) as store:
        store.write(key="a.txt", content=CONTENTS[2])
        collect_garbage(store, namespace="default", grace=timedelta(0))
        assert not list((store_root / "blobs").rglob("*.zst"))
        reference = store.write(key="b.txt", content=CONTENTS[2])
        assert store.read(reference) == CONTENTS[2]
