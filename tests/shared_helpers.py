"""
Helpers for the shared store's reliability tests: content, a zygote that forks worker processes, the workers' jobs,
and looking at what PostgreSQL and the object store hold.

Workers are forked from a zygote (`python -m tests.shared_helpers`), a process of its own that has imported casstore
but never opened a store: the pytest process runs obstore's and psycopg's threads, which a fork must not inherit, and
a zygote pays for importing Haystack once instead of once per worker. A worker reports `number reference` lines on a
report file, one `os.write` each (a line cut by a kill is dropped), and its outcome as JSON on a result file.
"""

import atexit
import contextlib
import ctypes
import json
import os
import random
import select
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg

from casstore import SharedToolResultStore
from casstore.blobs.objects import BlobObject, ObjectBlobs
from casstore.maintenance.checks import collect_garbage

ROOT = Path(__file__).resolve().parent.parent
INLINE_MAX = 8192
"""Frames of at most this many bytes are kept in PostgreSQL; `item` makes small ones below it, large ones above."""
AGED = "2020-01-01 00:00:00.000"

Config = dict[str, Any]
"""`index_url`, `blob_url`, `blob_options`: what a worker needs to open the shared store."""


# --- Content --------------------------------------------------------------------------------------------------------


def is_large(number: int) -> bool:
    """:returns: Whether `item(number)` is stored as an object (odd numbers) rather than inside PostgreSQL."""
    return number % 2 == 1


def item(number: int) -> str | bytes:
    """
    Content number `number`: even numbers are small text (kept inline), odd ones incompressible bytes of 12 to 42 KB
    (kept as objects). The same number always gives the same content, so a parent can check what a child wrote.
    """
    if not is_large(number):
        return f"small result {number}: " + " ".join(f"w{(number * 31 + i) % 997}" for i in range(40 + number % 90))
    return random.Random(number).randbytes(12_000 + (number % 7) * 5_000)


def open_store(config: Config, *, namespace: str, inline_max: int = INLINE_MAX) -> SharedToolResultStore:
    """:returns: A store of its own on the shared index and bucket, as another host would open it."""
    return SharedToolResultStore(
        index_url=config["index_url"],
        blob_url=config["blob_url"],
        blob_options=config["blob_options"],
        namespace=namespace,
        inline_max=inline_max,
    )


def digest_of(number: int) -> str:
    """:returns: The BLAKE3 digest of `item(number)`, as the store names its blob."""
    from casstore.index.prepared import prepare

    return prepare(key="x.txt", content=item(number)).digest


# --- Looking at the servers -----------------------------------------------------------------------------------------


def query(index_url: str, sql: str, parameters: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """:returns: The rows of one statement on the index, run on a connection of its own."""
    with psycopg.connect(index_url, autocommit=True, connect_timeout=10) as connection:
        cursor = connection.execute(sql, parameters)
        return list(cursor.fetchall()) if cursor.description else []


def age_every_blob(index_url: str) -> None:
    """As if every blob was last seen long ago, so gc with no grace period may take any unreferenced one at once."""
    query(index_url, "UPDATE blobs SET last_seen = %s", (AGED,))


def blob_rows(index_url: str) -> dict[str, str]:
    """:returns: `stored_in` of every blob row, by digest."""
    return {digest: stored_in for digest, stored_in in query(index_url, "SELECT digest, stored_in FROM blobs")}


def write_counts(index_url: str) -> dict[str, int]:
    """:returns: How many `writes` rows each namespace has."""
    return {
        namespace: int(count)
        for namespace, count in query(index_url, "SELECT namespace, count(*) FROM writes GROUP BY namespace")
    }


def objects(config: Config) -> list[BlobObject]:
    """:returns: Every object under the store's prefix, as the object store lists them."""
    blobs = ObjectBlobs(config["blob_url"], options=config["blob_options"])
    try:
        return list(blobs.objects())
    finally:
        blobs.close()


def read_reports(path: Path) -> list[tuple[int, str]]:
    """:returns: Every `number reference` line a worker reported; a last line cut by a kill is dropped."""
    if not path.exists():
        return []
    lines = path.read_bytes().decode().split("\n")
    return [(int(number), reference) for number, reference in (line.split(" ") for line in lines[:-1])]


def read_result(path: Path) -> dict[str, Any]:
    """:returns: The outcome a worker wrote; fails if it crashed or wrote none."""
    assert path.exists(), f"the worker wrote no result at {path}"
    outcome: dict[str, Any] = json.loads(path.read_text())
    assert "crashed" not in outcome, outcome["crashed"]
    return outcome


# --- The zygote -----------------------------------------------------------------------------------------------------


def _die_with_parent() -> None:
    """Have the kernel kill this process when its parent dies (Linux only)."""
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class Zygote:
    """The parent's end of the zygote: `spawn` a job in a fresh fork, `kill` it, `wait` for it."""

    def __init__(self, env: dict[str, str]) -> None:
        self._process = subprocess.Popen(
            [sys.executable, "-m", "tests.shared_helpers"],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={**os.environ, **env},
            preexec_fn=_die_with_parent,  # noqa: PLW1509 - only prctl runs between fork and exec
        )
        self._buffer = b""
        self._ask({"op": "ping"}, timeout=120)

    def _ask(self, request: dict[str, Any], *, timeout: float = 30) -> dict[str, Any]:
        assert self._process.stdin is not None and self._process.stdout is not None
        self._process.stdin.write(json.dumps(request).encode() + b"\n")
        self._process.stdin.flush()
        deadline = time.monotonic() + timeout
        descriptor = self._process.stdout.fileno()
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            ready, _, _ = select.select([descriptor], [], [], max(0.0, remaining))
            if not ready:
                raise AssertionError(f"the zygote did not answer {request['op']} within {timeout} s")
            chunk = os.read(descriptor, 1 << 16)
            if not chunk:
                raise AssertionError(f"the zygote ended (status {self._process.wait(5)})")
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def spawn(self, job: str, **arguments: Any) -> int:
        """:returns: The pid of a fresh fork running `JOBS[job](**arguments)`."""
        return int(self._ask({"op": "spawn", "job": job, "arguments": arguments})["pid"])

    def wait(self, pid: int, *, timeout: float = 60) -> int:
        """:returns: The wait status of `pid`; a worker still running after `timeout` seconds is killed and fails."""
        answer = self._ask({"op": "wait", "pid": pid, "timeout": timeout}, timeout=timeout + 30)
        assert not answer["timed_out"], f"worker {pid} did not finish within {timeout} s (killed)"
        return int(answer["status"])

    def run(self, job: str, *, timeout: float = 60, **arguments: Any) -> int:
        """Run a job to its end. :returns: Its wait status."""
        return self.wait(self.spawn(job, **arguments), timeout=timeout)

    def close(self) -> None:
        """End the zygote (its workers die with it)."""
        if self._process.stdin is not None:
            with contextlib.suppress(OSError):
                self._process.stdin.close()
        try:
            self._process.wait(10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait(10)
        if self._process.stdout is not None:
            self._process.stdout.close()


def _zygote_main() -> None:
    _die_with_parent()
    replies = sys.stdout.buffer
    for line in sys.stdin.buffer:
        request = json.loads(line)
        answer: dict[str, Any] = {}
        if request["op"] == "spawn":
            pid = os.fork()
            if pid == 0:
                _worker_main(request["job"], request["arguments"])
            answer = {"pid": pid}
        elif request["op"] == "wait":
            answer = _wait(int(request["pid"]), float(request["timeout"]))
        replies.write(json.dumps(answer).encode() + b"\n")
        replies.flush()


def _wait(pid: int, timeout: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return {"status": status, "timed_out": False}
        time.sleep(0.01)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    return {"status": os.waitpid(pid, 0)[1], "timed_out": True}


def _worker_main(job: str, arguments: dict[str, Any]) -> None:
    status = 1
    try:
        _die_with_parent()
        os.dup2(2, 1)  # the zygote's replies go on its stdout: a worker's prints must not
        result = Path(arguments.pop("result"))
        try:
            outcome = JOBS[job](**arguments)
        except BaseException:
            outcome = {"crashed": traceback.format_exc()}
        temporary = result.with_suffix(".tmp")
        temporary.write_text(json.dumps(outcome))
        temporary.rename(result)
        status = 0
    finally:
        os._exit(status)


# --- Jobs, run in workers -------------------------------------------------------------------------------------------


class _Reporter:
    """Appends `number reference` lines to a report file, one `os.write` each, so a kill cuts at most the last."""

    def __init__(self, path: str) -> None:
        self._descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._lock = threading.Lock()

    def report(self, number: int, reference: str) -> None:
        with self._lock:
            os.write(self._descriptor, f"{number} {reference}\n".encode())


def kill_myself() -> None:
    """SIGKILL this process, now: nothing after it runs, no `finally`, no exit handler."""
    os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(60)  # pragma: no cover - the signal arrives first


def job_write_pool(
    *, config: Config, namespace: str, plan: list[list[int]], reports: str, done: str, go: str, others: list[str]
) -> dict[str, Any]:
    """
    Write `plan[thread]` from one thread each on one store, reading every write back, and make the file `done`;
    then, once the file `go` exists (every writer is done), read every reference in the report files `others`.
    """
    reporter = _Reporter(reports)
    errors: list[str] = []
    writes = reads = 0
    lock = threading.Lock()
    with open_store(config, namespace=namespace) as store:

        def write(numbers: list[int], thread: int) -> None:
            nonlocal writes
            for position, number in enumerate(numbers):
                try:
                    reference = store.write(key=f"t{thread}_{position}.txt", content=item(number))
                    if store.read(reference) != item(number):
                        raise AssertionError(f"{reference} read back other content")
                    reporter.report(number, reference)
                    with lock:
                        writes += 1
                except Exception:
                    with lock:
                        errors.append(traceback.format_exc())

        threads = [threading.Thread(target=write, args=(numbers, thread)) for thread, numbers in enumerate(plan)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        Path(done).touch()
        deadline = time.monotonic() + 60
        while not Path(go).exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        for path in others:
            for number, reference in read_reports(Path(path)):
                try:
                    if store.read(reference) != item(number):
                        raise AssertionError(f"{reference} of {path} read back other content")
                    reads += 1
                except Exception:
                    errors.append(traceback.format_exc())
    return {"writes": writes, "reads": reads, "errors": errors}


def job_write_items(
    *, config: Config, namespace: str, numbers: list[int], reports: str, die: str = ""
) -> dict[str, Any]:
    """
    Write `numbers` in order, reporting each write once it returned.

    :param die: `after_object_put`: SIGKILL this process as soon as the first object was written (before the
        write's transaction begins); `before_commit`: as soon as the first object's blob row is in the write's
        transaction, before it commits.
    """
    reporter = _Reporter(reports)
    with open_store(config, namespace=namespace) as store:
        repository = store.repository
        if die == "after_object_put":
            backend: Any = repository._core.blobs._files
            write_object = backend.write

            def write_then_die(digest: str, frame: bytes) -> object:
                write_object(digest, frame)
                kill_myself()
                return True  # pragma: no cover

            backend.write = write_then_die
        elif die == "before_commit":
            blobs: Any = repository._core.blobs
            put = blobs.put

            def put_then_die(work: Any, staged: Any, **options: Any) -> None:
                put(work, staged, **options)
                if not staged.in_index:
                    kill_myself()

            blobs.put = put_then_die
        for position, number in enumerate(numbers):
            reporter.report(number, store.write(key=f"{position}.txt", content=item(number)))
    return {"writes": len(numbers)}


def job_collect(*, config: Config, namespace: str, die_before_remove: int = -1) -> dict[str, Any]:
    """
    Forget `namespace` and collect with no grace period; with `die_before_remove` = n, SIGKILL this process when gc,
    having committed its row deletions, is about to delete its (n+1)th object (0: before any of them).
    """
    with open_store(config, namespace=namespace) as store:
        if die_before_remove >= 0:
            backend: Any = store.repository._core.blobs._files
            remove = backend.remove
            removed = 0

            def remove_or_die(digest: str) -> None:
                nonlocal removed
                if removed == die_before_remove:
                    kill_myself()
                remove(digest)
                removed += 1

            backend.remove = remove_or_die
        report = collect_garbage(store, namespace=namespace, grace=timedelta(0))
    return {"blobs_deleted": report.blobs_deleted, "stray_files_removed": report.stray_files_removed}


def job_live_writer(
    *, config: Config, namespace: str, numbers: list[int], seconds: float, reports: str
) -> dict[str, Any]:
    """Write each of `numbers` once, spread over `seconds`, reading each back at once."""
    reporter = _Reporter(reports)
    failures: list[str] = []
    with open_store(config, namespace=namespace) as store:
        for position, number in enumerate(numbers):
            time.sleep(seconds / len(numbers))
            try:
                reference = store.write(key=f"{position}.txt", content=item(number))
                if store.read(reference) != item(number):
                    raise AssertionError(f"{reference} read back other content")
                reporter.report(number, reference)
            except Exception:
                failures.append(traceback.format_exc())
    return {"failures": failures}


def job_churn_collector(
    *, config: Config, numbers: list[int], stop: str, seconds: float, grace_seconds: float = 0.0
) -> dict[str, Any]:
    """
    Until the file `stop` exists (at most `seconds`): write every one of `numbers` in namespace `churn`, then forget
    `churn` and collect with a grace period of `grace_seconds`, so gc deletes whatever no live writer references yet:
    with none, at once; with one, after every blob is aged as if seen long ago.
    """
    grace = timedelta(seconds=grace_seconds)
    collections = deleted = waited = 0
    errors: list[str] = []
    deadline = time.monotonic() + seconds
    with open_store(config, namespace="churn") as churn:
        while not Path(stop).exists() and time.monotonic() < deadline:
            try:
                for number in numbers:
                    churn.write(key="churn.txt", content=item(number))
                if grace:
                    age_every_blob(config["index_url"])
                report = collect_garbage(churn, namespace="churn", grace=grace)
                deleted, waited = deleted + report.blobs_deleted, waited + report.blobs_waiting
                collections += 1
            except Exception:
                errors.append(traceback.format_exc())
    return {"collections": collections, "deleted": deleted, "waited": waited, "errors": errors}


JOBS: dict[str, Callable[..., dict[str, Any]]] = {
    "write_pool": job_write_pool,
    "write_items": job_write_items,
    "collect": job_collect,
    "live_writer": job_live_writer,
    "churn_collector": job_churn_collector,
}


_ZYGOTES: dict[str, Zygote] = {}


def zygote_with(env: dict[str, str]) -> Zygote:
    """:returns: The zygote whose workers run with `env` (the object store's credentials), started on first use."""
    key = json.dumps(env, sort_keys=True)
    if key not in _ZYGOTES:
        started = Zygote(env)
        atexit.register(started.close)
        _ZYGOTES[key] = started
    return _ZYGOTES[key]


if __name__ == "__main__":
    _zygote_main()
