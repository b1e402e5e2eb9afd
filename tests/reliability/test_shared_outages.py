"""
The shared store on real servers that go away: the S3 gateway stopped while writers run, then PostgreSQL. Every
call that needs the missing service fails within seconds with a `StorageError` naming it, nothing half-written is
recorded, what needs only the other service still works, and the same store object works again once it is back.
"""

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial

import pytest
from psycopg_pool.base import AttemptWithBackoff

from casstore import StorageError
from casstore.maintenance.checks import verify
from tests.servers import PostgresServer, S3Location
from tests.shared_helpers import Config, digest_of, item, open_store, query, write_counts

BOUND = 30.0
"""Seconds within which a call meeting an outage must fail."""


@dataclass(frozen=True)
class Outcome:
    """What one call did: its result or its error, and how long it took."""

    seconds: float
    value: object = None
    error: BaseException | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def _timed(call: Callable[[], object]) -> Outcome:
    started = time.monotonic()
    try:
        value = call()
    except Exception as error:
        return Outcome(time.monotonic() - started, error=error)
    return Outcome(time.monotonic() - started, value=value)


def _failed_with(outcome: Outcome, *words: str) -> bool:
    """:returns: Whether the call raised `StorageError` within the bound, with every one of `words` in its message."""
    return (
        isinstance(outcome.error, StorageError)
        and outcome.seconds < BOUND
        and all(word in str(outcome.error) for word in words)
    )


class _Writer(threading.Thread):
    """Writes new large content (objects) over and over on one store until told to stop, recording each outcome."""

    def __init__(self, write: Callable[[int], str]) -> None:
        super().__init__(daemon=True)
        self._write = write
        self.outcomes: list[tuple[int, Outcome]] = []
        self.halt = threading.Event()

    def run(self) -> None:
        for number in range(3001, 3001 + 2 * 400, 2):  # bounded: at most 400 writes
            if self.halt.is_set():
                return
            self.outcomes.append((number, _timed(partial(self._write, number))))
            time.sleep(0.01)

    def count(self, *, ok: bool, since: int = 0) -> int:
        return sum(1 for _, outcome in self.outcomes[since:] if outcome.ok == ok)


def _until(condition: Callable[[], bool], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert condition(), f"not reached within {seconds} s"


@pytest.mark.slow
def test_object_store_outage_while_writers_run(postgres_url: str, s3_bucket_url: S3Location) -> None:
    config: Config = {"index_url": postgres_url, "blob_url": s3_bucket_url.url, "blob_options": s3_bucket_url.options}
    gateway = s3_bucket_url.server
    with open_store(config, namespace="outage") as store:
        large = store.write(key="large.bin", content=item(1))
        small = store.write(key="small.txt", content=item(0))
        writer = _Writer(lambda number: store.write(key=f"{number}.bin", content=item(number)))
        writer.start()
        try:
            _until(lambda: writer.count(ok=True) >= 3, 30)
            gateway.stop_gateway()
            stopped_at = len(writer.outcomes)
            try:
                new_large = _timed(lambda: store.write(key="new.bin", content=item(3)))
                duplicate = _timed(lambda: store.write(key="again.bin", content=item(1)))
                new_small = _timed(lambda: store.write(key="new.txt", content=item(2)))
                with open_store(config, namespace="outage") as other:  # knows nothing: asks the index
                    other_duplicate = _timed(lambda: other.write(key="other.bin", content=item(1)))
                read_small = _timed(lambda: store.read(small))
                read_large = _timed(lambda: store.read(large))
                _until(lambda: writer.count(ok=False, since=stopped_at) >= 2, BOUND)
            finally:
                gateway.start_gateway()
            restarted_at = len(writer.outcomes)
            _until(lambda: writer.count(ok=True, since=restarted_at + 1) >= 3, 30)  # the same store, not reopened
        finally:
            writer.halt.set()
            writer.join(60)
        assert not writer.is_alive()
        after = _timed(lambda: store.read(store.write(key="new.bin", content=item(3))))
        read_again = _timed(lambda: store.read(large))

        object_store = f"object store {s3_bucket_url.url}"
        assert _failed_with(new_large, object_store, "failed to"), new_large
        assert duplicate.ok and other_duplicate.ok and new_small.ok, (duplicate, other_duplicate, new_small)
        assert read_small.ok and read_small.value == item(0)
        assert _failed_with(read_large, object_store), read_large  # an outage, not a corrupt blob
        failed = [(number, outcome) for number, outcome in writer.outcomes if not outcome.ok]
        assert failed and all(_failed_with(outcome, object_store) for _, outcome in failed), failed
        assert after.ok and after.value == item(3) and read_again.ok and read_again.value == item(1)

        # Nothing of a failed write was recorded: no writes row, and the index has exactly the writes that returned.
        for number, _ in failed:
            assert query(postgres_url, "SELECT count(*) FROM writes WHERE digest = %s", (digest_of(number),)) == [(0,)]
        written = 2 + writer.count(ok=True) + 3 + 1  # the first two, the writer's, the three that worked, `after`
        assert write_counts(postgres_url) == {"outage": written}
        for number, outcome in writer.outcomes:
            if outcome.ok:
                assert store.read(str(outcome.value)) == item(number)
        assert verify(store).ok
    print(
        f"S3 gateway down: new object write failed in {new_large.seconds:.2f} s, read in {read_large.seconds:.2f} s; "
        f"duplicate and inline writes worked; background writer: {writer.count(ok=True)} written, {len(failed)} "
        f"failed, working again without reopening"
    )


@pytest.mark.slow
def test_postgres_outage(
    postgres_url: str, s3_bucket_url: S3Location, postgres_server: PostgresServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """
    PostgreSQL stopped: every call fails within the bound, nothing is recorded, and after `start()` the very next call
    of the same store works. psycopg_pool's reconnection attempts back off 1, 2, 4, 8 s from the first failure (with a
    random 10% jitter, set to none here so that the run is the same every time); the store stops them after
    `RECONNECT_TIMEOUT_SECONDS`, so a call after the outage starts a fresh attempt instead of waiting for the next
    scheduled one. The server is started 8 s into the outage, past that timeout and between two attempts.
    """
    monkeypatch.setattr(AttemptWithBackoff, "DELAY_JITTER", 0.0)
    config: Config = {"index_url": postgres_url, "blob_url": s3_bucket_url.url, "blob_options": s3_bucket_url.options}
    with open_store(config, namespace="outage") as store:
        large = store.write(key="large.bin", content=item(1))
        small = store.write(key="small.txt", content=item(0))
        before = write_counts(postgres_url)
        calls: dict[str, Callable[[], object]] = {
            "new large write": lambda: store.write(key="new.bin", content=item(5)),
            "duplicate write": lambda: store.write(key="again.bin", content=item(1)),
            "new small write": lambda: store.write(key="new.txt", content=item(4)),
            "read small": lambda: store.read(small),
            "read large": lambda: store.read(large),
        }
        postgres_server.stop()
        stopped = time.monotonic()
        try:
            with ThreadPoolExecutor(len(calls)) as pool:
                futures = {name: pool.submit(_timed, call) for name, call in calls.items()}
                during = {name: future.result() for name, future in futures.items()}
            time.sleep(max(0.0, stopped + 8 - time.monotonic()))
        finally:
            postgres_server.start()
        after = [_timed(partial(store.write, key="back.txt", content=item(number))) for number in (6, 8)]
        again = {name: _timed(call) for name, call in calls.items()}

        assert all(isinstance(outcome.error, StorageError) for outcome in during.values()), during
        slowest = max(outcome.seconds for outcome in during.values())
        assert slowest < BOUND, during
        # Once the server is back, the next call works: the pool checks a connection before handing it out and
        # reconnects at once instead of waiting for its next scheduled attempt.
        assert after[0].ok and after[1].ok, after
        assert all(outcome.ok for outcome in again.values()), again
        assert again["read small"].value == item(0) and again["read large"].value == item(1)
        # Nothing of the failed calls was recorded: only the writes that worked after the server came back.
        assert write_counts(postgres_url) == {"outage": before["outage"] + 2 + 3}
        assert verify(store).ok
        print(
            f"PostgreSQL down: {len(during)} calls failed within {slowest:.1f} s; after start(): the first call worked "
            f"({after[0].seconds:.2f} s)"
        )
        # Each message says which service failed: PostgreSQL, not the object store beside it.
        for name, outcome in during.items():
            assert "PostgreSQL" in str(outcome.error), f"{name}: {outcome.error}"
