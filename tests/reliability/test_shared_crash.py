"""
The shared store on real PostgreSQL and SeaweedFS, with writers and gc killed (SIGKILL) at random points and at the
exact points between what the object store holds and what the index commits: nothing reported is lost, verify finds
no damage (orphan objects at most), and a later gc removes the orphans.
"""

import os
import random
import signal
import time
from datetime import timedelta
from pathlib import Path

import pytest

from casstore import ReferenceNotFoundError
from casstore.maintenance.checks import collect_garbage, verify
from tests.servers import S3Location
from tests.shared_helpers import (
    Config,
    Zygote,
    age_every_blob,
    blob_rows,
    digest_of,
    item,
    objects,
    open_store,
    read_reports,
    write_counts,
    zygote_with,
)

ROUNDS, WRITERS_PER_ROUND = 6, 2  # 12 kills
STREAM_START = 1000


@pytest.fixture
def config(postgres_url: str, s3_bucket_url: S3Location) -> Config:
    """A fresh shared store: its own database and prefix, the schema made by a first store."""
    made: Config = {"index_url": postgres_url, "blob_url": s3_bucket_url.url, "blob_options": s3_bucket_url.options}
    open_store(made, namespace="setup").close()
    return made


def _killed(status: int) -> bool:
    return os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL


def _object_digests(config: Config) -> set[str]:
    return {found.digest for found in objects(config) if found.digest is not None}


def _write_and_die(zygote: Zygote, config: Config, tmp_path: Path, number: int, die: str) -> list[tuple[int, str]]:
    reports = tmp_path / f"die-{die}"
    status = zygote.run(
        "write_items",
        config=config,
        namespace="writer",
        numbers=[number],
        reports=str(reports),
        die=die,
        result=str(tmp_path / f"die-{die}-result"),
    )
    assert _killed(status), f"the writer ({die}) ended with status {status}, not by its SIGKILL"
    return read_reports(reports)


@pytest.mark.slow
def test_sigkilled_writers_lose_nothing_and_leave_only_orphans(
    config: Config, s3_bucket_url: S3Location, tmp_path: Path
) -> None:
    zygote = zygote_with(s3_bucket_url.env)
    chooser = random.Random(20261201)
    reported: list[tuple[int, str]] = []
    kills = 0
    for round_number in range(ROUNDS):
        pids, paths = [], []
        for writer in range(WRITERS_PER_ROUND):
            path = tmp_path / f"reports-{round_number}-{writer}"
            # Far more than a writer gets through before its kill, from a pool that grows each round, so that kills
            # land in writes of new objects too, not only in duplicates.
            numbers = chooser.choices(range(STREAM_START, STREAM_START + 40 * (round_number + 1)), k=20_000)
            pids.append(
                zygote.spawn(
                    "write_items",
                    config=config,
                    namespace="writer",
                    numbers=numbers,
                    reports=str(path),
                    result=str(path.with_suffix(".result")),
                )
            )
            paths.append(path)
        started = time.monotonic()
        for pid, delay in sorted(zip(pids, (chooser.uniform(0.2, 1.0) for _ in pids), strict=True), key=lambda x: x[1]):
            time.sleep(max(0.0, started + delay - time.monotonic()))
            os.kill(pid, signal.SIGKILL)
        for pid in pids:
            status = zygote.wait(pid, timeout=30)
            assert _killed(status), f"a writer of round {round_number} ended on its own: {status}"
            kills += 1
        for path in paths:
            reported.extend(read_reports(path))
    assert len(reported) > kills  # the writers really wrote before they died
    recorded = write_counts(config["index_url"])["writer"]
    assert len(reported) <= recorded <= len(reported) + kills  # a kill between commit and report adds one
    # The narrowest points, made certain: killed with the object written and nothing committed.
    after_put = _write_and_die(zygote, config, tmp_path, 401, "after_object_put")
    before_commit = _write_and_die(zygote, config, tmp_path, 403, "before_commit")
    assert after_put == before_commit == []
    orphans = {digest_of(401), digest_of(403)}
    rows = blob_rows(config["index_url"])
    assert orphans <= _object_digests(config) and not orphans & rows.keys()

    with open_store(config, namespace="writer") as store:
        for number, reference in reported:
            assert store.read(reference) == item(number)
        report = verify(store)
        assert report.ok, report  # orphan objects are garbage, not damage
        assert report.stray_files >= len(orphans)
        age_every_blob(config["index_url"])
        collected = collect_garbage(store, grace=timedelta(0))
        assert collected.stray_files_removed >= len(orphans) and collected.blobs_deleted == 0
        after_gc = verify(store)
        assert after_gc.ok and after_gc.stray_files == 0 and after_gc.stale_rows == 0, after_gc
        for number, reference in reported:
            assert store.read(reference) == item(number)
        rows = blob_rows(config["index_url"])
        assert _object_digests(config) == {digest for digest, stored_in in rows.items() if stored_in == "object"}
        for number in (401, 403):  # the content a killed writer half-stored stores and reads again
            assert store.read(store.write(key="again.bin", content=item(number))) == item(number)
    print(
        f"{kills} random kills + 2 at the object/commit boundary; {len(reported)} writes reported and read back; "
        f"gc removed {collected.stray_files_removed} orphan objects"
    )


DOOMED = list(range(500, 520))  # 10 small, 10 large
KEPT = [501, 503, 504]  # written in another namespace too: gc must keep these


@pytest.mark.slow
@pytest.mark.parametrize("die_before_remove", [0, 3], ids=["after-commit", "mid-batch"])
def test_gc_killed_between_commit_and_object_deletion_loses_nothing(
    config: Config, s3_bucket_url: S3Location, tmp_path: Path, die_before_remove: int
) -> None:
    zygote = zygote_with(s3_bucket_url.env)
    with open_store(config, namespace="doomed") as doomed, open_store(config, namespace="kept") as kept:
        doomed_references = {number: doomed.write(key=f"{number}.txt", content=item(number)) for number in DOOMED}
        kept_references = {number: kept.write(key=f"{number}.txt", content=item(number)) for number in KEPT}
        age_every_blob(config["index_url"])
        status = zygote.run(
            "collect",
            config=config,
            namespace="doomed",
            die_before_remove=die_before_remove,
            result=str(tmp_path / "collect-result"),
        )
        assert _killed(status), f"gc ended with status {status}, not by its SIGKILL"
        collected = {digest_of(number) for number in DOOMED if number not in KEPT}
        large = {digest_of(number) for number in DOOMED if number % 2 == 1 and number not in KEPT}
        rows = blob_rows(config["index_url"])
        assert not collected & rows.keys()  # gc committed its row deletions ...
        left = large & _object_digests(config)
        assert len(left) == len(large) - die_before_remove  # ... and died before deleting the rest of the objects
        assert {digest_of(number) for number in KEPT} <= rows.keys()

        for number, reference in kept_references.items():  # every visible reference's blob is there
            assert kept.read(reference) == item(number)
        for reference in doomed_references.values():
            with pytest.raises(ReferenceNotFoundError):
                doomed.read(reference)
        report = verify(kept)
        assert report.ok, report
        assert report.stray_files == len(left) and report.stale_rows == 0

        # The same store (which remembers having stored it) and another write the content again: stored, readable.
        again = 505 if digest_of(505) in left else 519
        assert doomed.read(doomed.write(key="again.bin", content=item(again))) == item(again)
        with open_store(config, namespace="other") as other:
            assert other.read(other.write(key="again.bin", content=item(again))) == item(again)
        assert verify(kept).ok

        age_every_blob(config["index_url"])
        later = collect_garbage(kept, grace=timedelta(0))
        assert later.stray_files_removed == len(left - {digest_of(again)})
        after_gc = verify(kept)
        assert after_gc.ok and after_gc.stray_files == 0 and after_gc.stale_rows == 0, after_gc
        rows = blob_rows(config["index_url"])
        assert _object_digests(config) == {digest for digest, stored_in in rows.items() if stored_in == "object"}
        for number in DOOMED:  # everything gc took stores and reads again
            assert doomed.read(doomed.write(key="third.txt", content=item(number))) == item(number)
        for number, reference in kept_references.items():
            assert kept.read(reference) == item(number)
