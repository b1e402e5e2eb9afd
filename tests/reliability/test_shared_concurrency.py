"""
The shared store on real PostgreSQL and SeaweedFS, from several processes at once (as from several hosts): content
written by all of them is stored once and reads back everywhere, and writers racing gc lose nothing.
"""

import os
import random
import time
from pathlib import Path

import pytest

from casstore.blobs.location import MARKER_NAME
from casstore.maintenance.checks import verify
from tests.servers import S3Location
from tests.shared_helpers import (
    Config,
    blob_rows,
    digest_of,
    is_large,
    item,
    objects,
    open_store,
    query,
    read_reports,
    read_result,
    write_counts,
    zygote_with,
)

PROCESSES, THREADS = 3, 2
POOL = range(60)  # half small (inline), half large (objects)
WRITES_PER_THREAD = 50


@pytest.fixture
def config(postgres_url: str, s3_bucket_url: S3Location) -> Config:
    """A fresh shared store: its own database and prefix, the schema made by a first store."""
    made: Config = {"index_url": postgres_url, "blob_url": s3_bucket_url.url, "blob_options": s3_bucket_url.options}
    open_store(made, namespace="setup").close()
    return made


def _wait_for(paths: list[Path], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not all(path.exists() for path in paths) and time.monotonic() < deadline:
        time.sleep(0.02)


@pytest.mark.slow
def test_processes_writing_overlapping_content_store_it_once(
    config: Config, s3_bucket_url: S3Location, tmp_path: Path
) -> None:
    zygote = zygote_with(s3_bucket_url.env)
    plans = [
        [random.Random(process * 10 + thread).sample(POOL, 40) for thread in range(THREADS)]
        for process in range(PROCESSES)
    ]
    for plan in plans:  # and repeats of what the same thread wrote
        for numbers in plan:
            numbers.extend(numbers[: WRITES_PER_THREAD - len(numbers)])
    reports = [tmp_path / f"reports-{process}" for process in range(PROCESSES)]
    done = [tmp_path / f"done-{process}" for process in range(PROCESSES)]
    results = [tmp_path / f"result-{process}" for process in range(PROCESSES)]
    go = tmp_path / "go"
    started = time.monotonic()
    pids = [
        zygote.spawn(
            "write_pool",
            config=config,
            namespace="shared",
            plan=plans[process],
            reports=str(reports[process]),
            done=str(done[process]),
            go=str(go),
            others=[str(path) for path in reports],
            result=str(results[process]),
        )
        for process in range(PROCESSES)
    ]
    _wait_for(done, 90)
    go.touch()  # every writer is done: now each reads what all of them reported
    statuses = [zygote.wait(pid, timeout=90) for pid in pids]
    elapsed = time.monotonic() - started
    outcomes = [read_result(path) for path in results]
    assert statuses == [0] * PROCESSES
    assert [outcome["errors"] for outcome in outcomes] == [[]] * PROCESSES
    total = PROCESSES * THREADS * WRITES_PER_THREAD
    assert [outcome["writes"] for outcome in outcomes] == [THREADS * WRITES_PER_THREAD] * PROCESSES
    reported = [entry for path in reports for entry in read_reports(path)]
    assert len(reported) == total
    assert [outcome["reads"] for outcome in outcomes] == [total] * PROCESSES  # every reference, in every process

    written = {number for number, _ in reported}
    assert written == {number for plan in plans for numbers in plan for number in numbers}
    large = {digest_of(number) for number in written if is_large(number)}
    small = {digest_of(number) for number in written if not is_large(number)}
    assert write_counts(config["index_url"]) == {"shared": total}
    # One row per distinct content, each where its size says; one object per object-stored blob, and the marker.
    assert blob_rows(config["index_url"]) == {**dict.fromkeys(large, "object"), **dict.fromkeys(small, "index")}
    assert query(config["index_url"], "SELECT count(*) FROM blob_frames") == [(len(small),)]
    listed = objects(config)
    assert sorted(found.name for found in listed) == sorted([MARKER_NAME, *(f"blake3/{d[:2]}/{d[2:]}" for d in large)])
    with open_store(config, namespace="shared") as store:
        for number, reference in reported:
            assert store.read(reference) == item(number)
        report = verify(store)
    assert report.ok and report.stray_files == 0 and report.stale_rows == 0, report
    print(
        f"{PROCESSES} processes x {THREADS} threads: {total} writes of {len(written)} distinct contents "
        f"({len(large)} objects, {len(small)} inline) in {elapsed:.1f} s; {PROCESSES * total} cross-process reads"
    )


LIVE_WRITERS = 2
RACED = list(range(100, 220))  # 60 small, 60 large
SECONDS_OF_WRITING = 5.0


@pytest.mark.slow
@pytest.mark.parametrize("grace_seconds", [0.0, 3600.0], ids=["no-grace", "grace-1h-aged"])
def test_writers_racing_gc_across_processes_lose_nothing(
    config: Config, s3_bucket_url: S3Location, tmp_path: Path, grace_seconds: float
) -> None:
    """
    Writers on their own stores write contents that a gc process keeps collecting: each round it writes them all in
    a churn namespace, forgets the namespace and collects, with no grace period (what churn wrote a moment ago goes)
    or with one after aging every blob. Only the locking protocol protects a writer meeting a blob gc is deleting.
    """
    zygote = zygote_with(s3_bucket_url.env)
    stop = tmp_path / "stop"
    collector_result = tmp_path / "collector"
    collector = zygote.spawn(
        "churn_collector",
        config=config,
        numbers=RACED,
        stop=str(stop),
        seconds=25.0,
        grace_seconds=grace_seconds,
        result=str(collector_result),
    )
    time.sleep(0.5)  # the collector's first round is under way
    reports = [tmp_path / f"live-{writer}" for writer in range(LIVE_WRITERS)]
    results = [tmp_path / f"live-result-{writer}" for writer in range(LIVE_WRITERS)]
    writers = []
    for writer in range(LIVE_WRITERS):
        order = list(RACED)
        random.Random(writer).shuffle(order)
        writers.append(
            zygote.spawn(
                "live_writer",
                config=config,
                namespace=f"live-{writer}",
                numbers=order,
                seconds=SECONDS_OF_WRITING,
                reports=str(reports[writer]),
                result=str(results[writer]),
            )
        )
    statuses = [zygote.wait(pid, timeout=60) for pid in writers]
    stop.touch()
    assert zygote.wait(collector, timeout=60) == 0
    assert statuses == [0] * LIVE_WRITERS
    collected = read_result(collector_result)
    assert collected["errors"] == []
    assert [read_result(path)["failures"] for path in results] == [[]] * LIVE_WRITERS
    assert collected["collections"] >= 2 and collected["deleted"] > len(RACED) // 2  # gc really raced the writers
    if not grace_seconds:
        assert collected["waited"] == 0  # each run took every blob churn had just written
    counts = write_counts(config["index_url"])
    for writer in range(LIVE_WRITERS):
        reported = read_reports(reports[writer])
        assert sorted(number for number, _ in reported) == RACED
        assert counts[f"live-{writer}"] == len(RACED)
        with open_store(config, namespace=f"live-{writer}") as store:
            for number, reference in reported:
                assert store.read(reference) == item(number)
    with open_store(config, namespace="live-0") as store:
        report = verify(store)
    assert report.ok, report
    print(
        f"gc race: {collected['collections']} collections deleted {collected['deleted']} blobs while "
        f"{LIVE_WRITERS} writer processes wrote {LIVE_WRITERS * len(RACED)}; 0 lost (pid {os.getpid()})"
    )
