"""Crash safety: writer processes killed with SIGKILL at random points lose nothing they reported."""

import os
import random
import sqlite3
import time
from contextlib import closing
from datetime import timedelta
from pathlib import Path

import pytest

from casstore import ContentAddressedToolResultStore
from casstore.maintenance.checks import collect_garbage, verify
from tests.helpers import create_store
from tests.reliability_helpers import content_for, fork_writer, kill_after, read_reports

KILLS = 40


@pytest.mark.slow
def test_sigkilled_writers_lose_nothing_they_reported(store_root: Path) -> None:
    chooser = random.Random(20261130)
    create_store(store_root)
    reported_total = 0
    for kill in range(KILLS):
        seed = kill % 8  # seeds repeat, so later children rewrite content earlier children stored or half-stored
        pid, pipe = fork_writer(
            store_root,
            seed=seed,
            count=10_000,
            gc_every=7 if kill % 3 == 0 else 0,  # a third of the children also run gc, so kills land inside it
            inline_max=chooser.choice([0, 2048, 8192]),
        )
        status = kill_after(pid, chooser.uniform(0.005, 0.25), time.sleep)
        assert os.WIFSIGNALED(status), f"child {kill} ended on its own: {status}"
        reported = read_reports(pipe)
        reported_total += len(reported)
        with ContentAddressedToolResultStore(store_root, namespace="writer") as store:
            for number, reference in reported:
                assert store.read(reference) == content_for(seed, number)
            report = verify(store)
        assert report.ok, f"after kill {kill}: {report}"
    assert reported_total > KILLS  # the children really wrote before they died
    print(f"{KILLS} kills; {reported_total} writes reported before the kills, all read back")
    with closing(sqlite3.connect(store_root / "index.db")) as connection, connection:
        # As if seen long ago: gc adds `last_seen`'s resolution to any grace period, and need not wait it out here.
        connection.execute("UPDATE blobs SET last_seen = '2020-01-01 00:00:00.000'")
    with ContentAddressedToolResultStore(store_root) as store:
        collect_garbage(store, grace=timedelta(0))
        after_gc = verify(store)
    assert after_gc.ok and after_gc.stray_files == 0 and after_gc.stale_rows == 0
    assert not list((store_root / "blobs").rglob(".tmp-*"))
