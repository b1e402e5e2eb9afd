"""
`python -m benchmarks --shared`: the trace through `SharedToolResultStore` (PostgreSQL and SeaweedFS on loopback),
beside `ContentAddressedToolResultStore` and Haystack's `FileSystemToolResultStore`, with its floors measured in the
same run, and then with 1, 2 and 4 writer processes at once.

The servers are started here with the test suite's own classes (`tests/servers.py`: a PostgreSQL cluster and SeaweedFS
with its S3 gateway, on 127.0.0.1, in temporary folders) and stopped afterwards. The three stores write the same
chunks of the trace in turns (the order rotating by chunk), every write timed on its own.

The floors, timed in the same chunks on the same writes:

- commit floor (timed right after each duplicate write of the shared store): UTF-8 and BLAKE3 of the content, then
  one autocommit `INSERT` of one row through a psycopg_pool pool set up as the shared store's (one round trip that
  commits a row);
- PUT + commit floor: BLAKE3, zstd (level 3), one conditional object PUT through obstore (the store's own client
  library), then the commit floor's `INSERT`. The trace has few new blobs too large for the index, so these are timed
  after it: `LARGE_PROBE_WRITES` fresh incompressible contents per store and as many for the floor, in turns.

The shared store's bytes are what `casstore stats` reports for it (`disk_bytes`: its tables and its objects).

Object-store requests are counted by wrapping obstore's request functions in this process (`put`, `get`, `head`,
`delete`, `list`), so a duplicate write that touches the object store shows up as a count above zero.
"""

from __future__ import annotations

import gc
import json
import math
import multiprocessing
import os
import random
import shutil
import subprocess
import sys
import time
import uuid
from array import array
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import blake3
import obstore
import psycopg
import psycopg_pool
import zstandard
from obstore.store import from_url

from benchmarks.measure import BASELINE, CASSTORE, chunks, close_store, disk_usage, open_store, percentile
from benchmarks.trace import PackedTrace
from casstore import SharedToolResultStore
from tests.servers import PostgresServer, SeaweedServer, start_postgres, start_seaweed

SHARED = "shared"
STORES = (SHARED, CASSTORE, BASELINE)
LABELS = {
    SHARED: "SharedToolResultStore",
    CASSTORE: "ContentAddressedToolResultStore",
    BASELINE: "FileSystemToolResultStore",
}
_REQUESTS = ("put", "get", "head", "delete", "list")
# New large blobs, written after the trace to time them against the PUT+commit floor: incompressible, so each is an
# object (more than the default inline_max of 64 KiB once compressed).
LARGE_PROBE_WRITES = 40
LARGE_PROBE_BYTES = 192 * 1024
# Rounds of the writer-process runs; each number of processes is reported by its median round.
PROCESS_ROUNDS = 3


class Servers:
    """PostgreSQL and SeaweedFS for one benchmark run: a fresh database and object prefix per store opened."""

    def __init__(self, postgres: PostgresServer, seaweed: SeaweedServer) -> None:
        self.postgres = postgres
        self.seaweed = seaweed

    def database(self) -> str:
        """:returns: The URL of a new, empty database."""
        name = f"bench_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.postgres.url(), autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
        return self.postgres.url(name)

    def prefix(self) -> str:
        """:returns: A new `s3://bucket/prefix` URL."""
        return f"s3://{self.seaweed.bucket}/bench-{uuid.uuid4().hex[:12]}"

    def open_store(self, namespace: str = "bench") -> SharedToolResultStore:
        """:returns: A shared store on a new database and prefix."""
        return SharedToolResultStore(
            index_url=self.database(), blob_url=self.prefix(), blob_options=self.seaweed.options(), namespace=namespace
        )

    def disk_bytes(self, index_url: str, blob_url: str) -> int:
        """:returns: What `casstore stats` says a shared store takes: its tables and its objects."""
        command = [sys.executable, "-m", "casstore", "stats", "--json", "--index", index_url, "--blobs", blob_url]
        environment = {**os.environ, **self.seaweed.env()}
        done = subprocess.run(command, capture_output=True, text=True, check=True, env=environment, timeout=600)
        return int(json.loads(done.stdout)["disk_bytes"])


@contextmanager
def servers(progress: Callable[[str], None]) -> Iterator[Servers]:
    """Start PostgreSQL and SeaweedFS on loopback (S3 credentials in this process's environment); stop both after."""
    progress("starting PostgreSQL and SeaweedFS on 127.0.0.1 ...")
    postgres = start_postgres()
    try:
        seaweed = start_seaweed()
        saved = {name: os.environ.get(name) for name in seaweed.env()}
        os.environ.update(seaweed.env())
        try:
            yield Servers(postgres, seaweed)
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
            seaweed.close()
    finally:
        postgres.close()


class RequestCounter:
    """Counts obstore requests made in this process while installed."""

    def __init__(self) -> None:
        self.count = 0
        self._originals: dict[str, Callable[..., Any]] = {}

    def _wrap(self, request: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any, **kwargs: Any) -> Any:
            self.count += 1
            return request(*args, **kwargs)

        return counted

    def install(self) -> None:
        for name in _REQUESTS:
            self._originals[name] = getattr(obstore, name)
            setattr(obstore, name, self._wrap(self._originals[name]))

    def remove(self) -> None:
        for name, request in self._originals.items():
            setattr(obstore, name, request)
        self._originals.clear()


class SharedFloors:
    """The two floors, on a database and prefix of their own, through the same client libraries as the store."""

    def __init__(self, shared: Servers) -> None:
        self._pool = psycopg_pool.ConnectionPool(
            shared.database(), min_size=1, max_size=4, kwargs={"autocommit": True}, open=True, name="floor"
        )
        self._pool.wait()
        with self._pool.connection() as connection:
            connection.execute(
                "CREATE TABLE floor (id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, key TEXT NOT NULL, "
                "digest TEXT NOT NULL, size BIGINT NOT NULL)"
            )
        self._objects: Any = from_url(
            shared.prefix(),
            config={"endpoint": shared.seaweed.endpoint, "region": shared.seaweed.region},
            client_options={"allow_http": True},
        )
        self._compressor = zstandard.ZstdCompressor(level=3, write_checksum=True, write_content_size=True)
        self._puts = 0

    def frame_size(self, data: bytes) -> int:
        """:returns: The size of `data`'s zstd frame (to tell a blob bound for an object from one kept inline)."""
        return len(self._compressor.compress(data))

    def commit(self, key: str, content: str | bytes) -> str:
        """UTF-8 and BLAKE3 of `content`, then one autocommit INSERT of one row through the pool: one round trip."""
        data = _as_bytes(content)
        digest = blake3.blake3(data).hexdigest()
        with self._pool.connection() as connection:
            connection.execute("INSERT INTO floor (key, digest, size) VALUES (%s, %s, %s)", (key, digest, len(data)))
        return digest

    def put_commit(self, key: str, content: str | bytes) -> str:
        """BLAKE3, zstd, one object PUT of the frame (a fresh name), then the commit floor's INSERT."""
        data = _as_bytes(content)
        digest = blake3.blake3(data).hexdigest()
        frame = self._compressor.compress(data)
        self._puts += 1
        name = blake3.blake3(f"{digest}/{self._puts}".encode()).hexdigest()
        obstore.put(self._objects, f"blake3/{name[:2]}/{name[2:]}", frame, mode="create", use_multipart=False)
        with self._pool.connection() as connection:
            connection.execute("INSERT INTO floor (key, digest, size) VALUES (%s, %s, %s)", (key, digest, len(data)))
        return digest

    def close(self) -> None:
        self._pool.close()


@dataclass(slots=True)
class _Timings:
    write_ns: array[int]
    requests: array[int]
    read_ns: array[int]
    mismatches: int = 0


def _as_bytes(content: str | bytes) -> bytes:
    return content.encode("utf-8") if isinstance(content, str) else content


def _same(expected: str | bytes, got: str | bytes) -> bool:
    return _as_bytes(expected) == _as_bytes(got)


def _p(values: list[int] | array[int], fraction: float) -> float:
    return percentile(values, fraction) / 1e3


def run_shared(
    trace: PackedTrace,
    workdir: Path,
    *,
    chunk_writes: int,
    reads: int,
    seed: int,
    processes: tuple[int, ...],
    progress: Callable[[str], None],
    process_rounds: int = PROCESS_ROUNDS,
) -> dict[str, Any]:
    """
    Run the shared-store benchmark: start the servers, time the three stores and the floors, then the writer
    processes; stop the servers.

    :returns: The figures, as `report_shared` prints them and the JSON keeps them.
    """
    with servers(progress) as shared:
        result = _timed_run(
            trace, workdir, shared, chunk_writes=chunk_writes, reads=reads, seed=seed, progress=progress
        )
        result["processes"] = _process_runs(trace, workdir, shared, processes, progress, rounds=process_rounds)
    result["targets"] = _targets(result)
    return result


def _timed_run(
    trace: PackedTrace,
    workdir: Path,
    shared: Servers,
    *,
    chunk_writes: int,
    reads: int,
    seed: int,
    progress: Callable[[str], None],
) -> dict[str, Any]:
    total = len(trace)
    roots = {name: workdir / f"shared-run-{name}" for name in (CASSTORE, BASELINE)}
    for root in roots.values():
        shutil.rmtree(root, ignore_errors=True)
    index_url, blob_url = shared.database(), shared.prefix()
    stores: dict[str, Any] = {
        SHARED: SharedToolResultStore(
            index_url=index_url, blob_url=blob_url, blob_options=shared.seaweed.options(), namespace="bench"
        )
    }
    stores.update({name: open_store(name, root) for name, root in roots.items()})
    floors = SharedFloors(shared)
    counter = RequestCounter()
    timings = {
        name: _Timings(array("q", bytes(8 * total)), array("q", bytes(8 * total)), array("q")) for name in STORES
    }
    references = {name: [""] * total for name in STORES}
    commit_floor: list[int] = []
    large_new: list[int] = []  # write indices of new content whose frame goes to the object store
    clock = time.perf_counter_ns
    counter.install()
    try:
        for number, start, stop in chunks(total, chunk_writes):
            items = trace.load(start, stop)
            gc.collect()
            order = STORES[number % 3 :] + STORES[: number % 3]
            for name in order:
                write = stores[name].write
                measured, refs = timings[name], references[name]
                for offset, (key, content) in enumerate(items):
                    before_requests = counter.count
                    before = clock()
                    refs[start + offset] = write(key=key, content=content)
                    measured.write_ns[start + offset] = clock() - before
                    measured.requests[start + offset] = counter.count - before_requests
                    if name == SHARED and not trace.is_new[start + offset]:
                        # The commit floor right after the duplicate write it is compared with, in the same state.
                        before = clock()
                        floors.commit(key, content)
                        commit_floor.append(clock() - before)
            for offset, (_, content) in enumerate(items):
                if trace.is_new[start + offset] and floors.frame_size(_as_bytes(content)) > stores[SHARED].inline_max:
                    large_new.append(start + offset)
            if number % 4 == 0:
                progress(f"shared benchmark: wrote {stop}/{total}")
        _timed_reads(trace, stores, references, timings, reads=reads, seed=seed)
        stored = {
            SHARED: shared.disk_bytes(index_url, blob_url),
            **{name: disk_usage(root).blocks_bytes for name, root in roots.items()},
        }
        probe = _large_blob_probe(stores, floors, seed=seed)
    finally:
        counter.remove()
        floors.close()
        for store in stores.values():
            close_store(store)
        for root in roots.values():
            shutil.rmtree(root, ignore_errors=True)
    result = _figures(
        trace, timings=timings, stored=stored, large_new=large_new, commit_floor=commit_floor, put_floor=probe[1]
    )
    result["large_blob_probe"] = {"writes": LARGE_PROBE_WRITES, "bytes": LARGE_PROBE_BYTES}
    for name in STORES:
        result["figures"][name]["write_new_large_p50_us"] = _p(probe[0][name], 0.5)
        result["figures"][name]["write_new_large_p90_us"] = _p(probe[0][name], 0.9)
    result["floors"]["put_commit_p90_us"] = _p(probe[1], 0.9)
    return result


def _figures(
    trace: PackedTrace,
    *,
    timings: dict[str, _Timings],
    stored: dict[str, int],
    large_new: list[int],
    commit_floor: list[int],
    put_floor: list[int],
) -> dict[str, Any]:
    total = len(trace)
    new = [index for index in range(total) if trace.is_new[index]]
    duplicate = [index for index in range(total) if not trace.is_new[index]]
    figures: dict[str, dict[str, float]] = {}
    for name in STORES:
        measured = timings[name]
        ns = measured.write_ns
        figures[name] = {
            "write_new_p50_us": _p([ns[i] for i in new], 0.5),
            "write_new_p90_us": _p([ns[i] for i in new], 0.9),
            "write_duplicate_p50_us": _p([ns[i] for i in duplicate], 0.5),
            "write_duplicate_p90_us": _p([ns[i] for i in duplicate], 0.9),
            "write_new_large_p50_us": _p([ns[i] for i in large_new], 0.5),
            "read_p50_us": _p(measured.read_ns, 0.5),
            "write_total_s": sum(ns) / 1e9,
            "stored_bytes": float(stored[name]),
            "reads_checked": float(len(measured.read_ns)),
            "read_mismatches": float(measured.mismatches),
            "object_requests_duplicate": float(sum(measured.requests[i] for i in duplicate)),
            "object_requests_new": float(sum(measured.requests[i] for i in new)),
        }
    return {
        "writes": total,
        "new_writes": len(new),
        "duplicate_writes": len(duplicate),
        "new_large_writes": len(large_new),
        "figures": figures,
        "floors": {
            "commit_p50_us": _p(commit_floor, 0.5),
            "commit_p90_us": _p(commit_floor, 0.9),
            "put_commit_p50_us": _p(put_floor, 0.5),
            "put_commit_p90_us": _p(put_floor, 0.9),
        },
    }


@dataclass(frozen=True, slots=True)
class _WriterJob:
    index_path: str
    url: str
    blob_url: str
    options: dict[str, str]
    positions: list[int]
    namespace: str


def _writer(job: _WriterJob, barrier: Any, results: Any) -> None:
    """One writer process: open the store, wait for the others, write its share of the trace, report its times."""
    trace = PackedTrace.open_index(Path(job.index_path))
    items = [trace.load(position, position + 1)[0] for position in job.positions]
    with SharedToolResultStore(
        index_url=job.url, blob_url=job.blob_url, blob_options=job.options, namespace=job.namespace
    ) as store:
        barrier.wait()
        began = time.monotonic()
        for key, content in items:
            store.write(key=key, content=content)
        ended = time.monotonic()
    results.put((len(items), began, ended))


def _large_blob_probe(
    stores: dict[str, Any], floors: SharedFloors, *, seed: int
) -> tuple[dict[str, list[int]], list[int]]:
    """
    Time writes of new large blobs (the trace has few): `LARGE_PROBE_WRITES` fresh incompressible contents of
    `LARGE_PROBE_BYTES` per store, each beside one PUT+commit floor of a content of its own, the order rotating.

    :returns: Each store's times, and the floor's.
    """
    rng = random.Random(f"large-blobs/{seed}")
    clock = time.perf_counter_ns
    times: dict[str, list[int]] = {name: [] for name in STORES}
    floor: list[int] = []
    for number in range(LARGE_PROBE_WRITES):
        turns = [*STORES, "floor"]
        turns = turns[number % 4 :] + turns[: number % 4]
        for name in turns:
            content = rng.randbytes(LARGE_PROBE_BYTES)
            before = clock()
            if name == "floor":
                floors.put_commit(f"large{number}.bin", content)
                floor.append(clock() - before)
            else:
                stores[name].write(key=f"large{number}.bin", content=content)
                times[name].append(clock() - before)
    return times, floor


def _timed_reads(
    trace: PackedTrace,
    stores: dict[str, Any],
    references: dict[str, list[str]],
    timings: dict[str, _Timings],
    *,
    reads: int,
    seed: int,
) -> None:
    """Read random references back from every store, in turns by chunk, each timed and checked equal."""
    clock = time.perf_counter_ns
    picked = random.Random(f"shared-reads/{seed}").choices(range(len(trace)), k=min(reads, len(trace)))
    for number, start, stop in chunks(len(picked), 200):
        positions = picked[start:stop]
        expected = [trace.load(position, position + 1)[0][1] for position in positions]
        order = STORES[number % 3 :] + STORES[: number % 3]
        for name in order:
            read, measured = stores[name].read, timings[name]
            for position, content in zip(positions, expected, strict=True):
                before = clock()
                got = read(references[name][position])
                measured.read_ns.append(clock() - before)
                if not _same(content, got):
                    measured.mismatches += 1


def _process_runs(
    trace: PackedTrace,
    workdir: Path,
    shared: Servers,
    processes: tuple[int, ...],
    progress: Callable[[str], None],
    *,
    rounds: int = PROCESS_ROUNDS,
) -> list[dict[str, Any]]:
    """
    Write the whole trace with each number of processes at once (each its share, on a fresh database and prefix),
    `rounds` times, the order of the counts reversed every other round so that a drift in the machine's load falls on
    all of them alike.

    :returns: Per number of processes: the median aggregate writes/s over the rounds, with each round's.
    """
    index_path = workdir / "shared-trace-index.json"
    trace.save_index(index_path)
    measured: dict[int, list[dict[str, float]]] = {count: [] for count in processes}
    try:
        for round_number in range(rounds):
            order = processes if round_number % 2 == 0 else processes[::-1]
            for count in order:
                progress(f"shared benchmark: {count} writer process(es) at once (round {round_number + 1}/{rounds})")
                measured[count].append(_one_process_run(trace, index_path, shared, count))
    finally:
        index_path.unlink(missing_ok=True)
    rows = []
    for count in processes:
        rates = sorted(run["writes_per_s"] for run in measured[count])
        middle = sorted(measured[count], key=lambda run: run["writes_per_s"])[len(rates) // 2]
        rows.append(
            {
                "processes": count,
                "writes": middle["writes"],
                "seconds": middle["seconds"],
                "writes_per_s": middle["writes_per_s"],
                "writes_per_s_rounds": [run["writes_per_s"] for run in measured[count]],
            }
        )
    return rows


def _one_process_run(trace: PackedTrace, index_path: Path, shared: Servers, count: int) -> dict[str, float]:
    context = multiprocessing.get_context("spawn")
    url, blob_url = shared.database(), shared.prefix()
    SharedToolResultStore(index_url=url, blob_url=blob_url, blob_options=shared.seaweed.options()).close()
    barrier = context.Barrier(count)
    results = context.Queue()
    children = [
        context.Process(
            target=_writer,
            args=(
                _WriterJob(
                    index_path=str(index_path),
                    url=url,
                    blob_url=blob_url,
                    options=shared.seaweed.options(),
                    positions=list(range(number, len(trace), count)),
                    namespace=f"writer{number}",
                ),
                barrier,
                results,
            ),
        )
        for number in range(count)
    ]
    for child in children:
        child.start()
    reports = [results.get(timeout=600) for _ in children]
    for child in children:
        child.join(timeout=60)
        if child.exitcode != 0:
            raise RuntimeError(f"A writer process failed (exit status {child.exitcode}).")
    writes = sum(report[0] for report in reports)
    seconds = max(report[2] for report in reports) - min(report[1] for report in reports)
    return {"writes": writes, "seconds": seconds, "writes_per_s": writes / seconds}


def _targets(result: dict[str, Any]) -> list[dict[str, Any]]:
    shared, floors = result["figures"][SHARED], result["floors"]
    duplicate_ratio = shared["write_duplicate_p50_us"] / floors["commit_p50_us"]
    checks = [
        {
            "name": "duplicate write p50 / commit floor p50",
            "value": duplicate_ratio,
            "target": "<= 2x",
            "met": duplicate_ratio <= 2,
        },
        {
            "name": "object-store requests during duplicate writes",
            "value": shared["object_requests_duplicate"],
            "target": "0",
            "met": shared["object_requests_duplicate"] == 0,
        },
    ]
    if not math.isnan(floors["put_commit_p50_us"]):
        large_ratio = shared["write_new_large_p50_us"] / floors["put_commit_p50_us"]
        checks.append(
            {
                "name": "new large blob write p50 / PUT+commit floor p50",
                "value": large_ratio,
                "target": "<= 1.5x",
                "met": large_ratio <= 1.5,
            }
        )
    by_count = {row["processes"]: row["writes_per_s"] for row in result["processes"]}
    if 1 in by_count and 4 in by_count:
        checks.append(
            {
                "name": "4-process writes/s / 1-process writes/s",
                "value": by_count[4] / by_count[1],
                "target": ">= 1x",
                "met": by_count[4] >= by_count[1],
            }
        )
    return checks


def report_shared(result: dict[str, Any]) -> str:
    """:returns: The run as markdown: the stores beside the floors, the processes, then the targets."""
    figures, floors = result["figures"], result["floors"]
    lines = [
        f"Shared store: {result['writes']:,} writes ({result['new_writes']:,} new, of which "
        f"{result['new_large_writes']:,} large enough for an object; {result['duplicate_writes']:,} duplicate), "
        "PostgreSQL and SeaweedFS on 127.0.0.1; new large blobs timed after the trace on "
        f"{result['large_blob_probe']['writes']} fresh incompressible contents of "
        f"{result['large_blob_probe']['bytes'] // 1024} KiB each (per store, and for the floor).",
        "",
        f"| figure | {' | '.join(LABELS[name] for name in STORES)} | floor |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    rows = [
        ("write, new, p50", "write_new_p50_us", "us", ""),
        ("write, new, p90", "write_new_p90_us", "us", ""),
        (
            "write, new large blob, p50",
            "write_new_large_p50_us",
            "us",
            f"{_us(floors['put_commit_p50_us'])} (PUT+commit)",
        ),
        ("write, duplicate, p50", "write_duplicate_p50_us", "us", f"{_us(floors['commit_p50_us'])} (commit)"),
        ("write, duplicate, p90", "write_duplicate_p90_us", "us", f"{_us(floors['commit_p90_us'])} (commit)"),
        ("read, p50 (checked equal)", "read_p50_us", "us", ""),
        ("whole-trace write time", "write_total_s", "s", ""),
        ("stored bytes", "stored_bytes", "bytes", ""),
        ("object-store requests, duplicate writes", "object_requests_duplicate", "count", ""),
        ("object-store requests, new writes", "object_requests_new", "count", ""),
    ]
    for label, key, unit, floor in rows:
        values = []
        for name in STORES:
            value = figures[name][key]
            if unit == "us":
                values.append(_us(value))
            elif unit == "s":
                values.append(f"{value:,.2f} s")
            elif unit == "bytes":
                values.append(f"{value / 1e6:,.2f} MB")
            else:
                values.append(f"{value:,.0f}" if name == SHARED else "-")
        lines.append(f"| {label} | {' | '.join(values)} | {floor} |")
    lines += [
        "",
        "| writer processes | writes | seconds (median round) | aggregate writes/s (median) | each round |",
        "| ---: | ---: | ---: | ---: | --- |",
    ]
    for row in result["processes"]:
        rounds = ", ".join(f"{rate:,.0f}" for rate in row["writes_per_s_rounds"])
        lines.append(
            f"| {row['processes']} | {row['writes']:,} | {row['seconds']:.2f} | {row['writes_per_s']:,.0f} | {rounds} |"
        )
    lines += ["", "| target | value | target | met |", "| --- | ---: | --- | --- |"]
    for check in result["targets"]:
        lines.append(
            f"| {check['name']} | {check['value']:.2f} | {check['target']} | {'yes' if check['met'] else 'NO'} |"
        )
    return "\n".join(lines)


def _us(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:,.0f} us"


def write_result(result: dict[str, Any], path: Path) -> None:
    """Write the result as JSON."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2, default=float) + "\n")
