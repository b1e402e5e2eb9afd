"""
`python -m benchmarks.gc_disk`: how long writers wait while gc deletes half of a large store and gives its disk back.

    python -m benchmarks.gc_disk                  # a 1 GB store, a few minutes
    python -m benchmarks.gc_disk --size-mb 64     # the same steps on 64 MB, about half a minute

It builds a local store of `--size-mb` megabytes (10^6) of stored blobs, all kept inside `index.db` (the default
`inline_max`; incompressible results of 4 to 48 KiB in two namespaces, interleaved), then, with a writer process
writing a small new result every `--pace-ms` milliseconds into a third namespace and timing each write:

1. `gc --namespace old --grace 0s` forgets one of the two namespaces (half the store), deletes its blobs and, as it
   deleted content, rebuilds `index.db` (docs/gc.md): how long each phase took and how long the writer waited,
   before gc (the baseline), in each phase, and at most;
2. `gc --namespace keep --max-size` half of what `keep` needs: its oldest writes go, and their blobs.

Prints a markdown table and writes the figures as JSON (`--json`, by default `benchmarks/results/gc_disk-<MB>.json`).
Every loop is bounded: the writer stops when told or after `--writer-limit-s` seconds, whichever comes first.
"""

import argparse
import json
import multiprocessing
import os
import platform
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import closing
from datetime import timedelta
from pathlib import Path
from typing import Any

from casstore import ContentAddressedToolResultStore
from casstore.disk import local_footprint
from casstore.index.database import FREE_SPACE_STEP_PAGES
from casstore.maintenance.checks import collect_garbage

LONG_AGO = "2020-01-01 00:00:00.000"
_BATCH = 50  # results per write transaction while building the store
_SIZES = (4096, 49152)  # each result's size is drawn between these


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gc_disk", description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mb", type=int, default=1000, help="stored megabytes to build (default: 1000)")
    parser.add_argument("--pace-ms", type=float, default=5.0, help="the writer's pause between writes (default: 5)")
    parser.add_argument("--writer-limit-s", type=float, default=900.0, help="the writer stops after this at most")
    parser.add_argument("--workdir", type=Path, default=None, help="folder for the stores (default: a temp folder)")
    parser.add_argument("--json", type=Path, default=None, help="where to write the JSON result")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    return parser


def build(root: Path, *, stored_bytes: int, seed: int = 0) -> dict[str, int]:
    """
    Write results until the blobs take `stored_bytes`, alternating batches between namespaces `old` and `keep`.

    :returns: How many results each namespace got, and the stored bytes.
    """
    randomness = random.Random(seed)
    counts = {"old": 0, "keep": 0}
    total = 0
    stores = {name: ContentAddressedToolResultStore(root, namespace=name) for name in counts}
    try:
        batch_number = 0
        while total < stored_bytes:
            name = "old" if batch_number % 2 == 0 else "keep"
            store = stores[name]
            prepared = []
            for _ in range(_BATCH):
                size = randomness.randint(*_SIZES)
                prepared.append(store.prepare_write(key=f"{counts[name]}.bin", content=os.urandom(size)))
                counts[name] += 1
                total += size
            store.write_prepared_many(prepared)
            batch_number += 1
    finally:
        for store in stores.values():
            store.close()
    return {**counts, "stored_bytes": total}


def _writer(*, root: str, ready: Any, stop: Any, limit_s: float, pace_s: float, out: str) -> None:
    """The writer process: small new results into `live`, each write's start time and latency into `out`."""
    deadline = time.monotonic() + limit_s
    samples: list[tuple[float, float, bool]] = []
    with ContentAddressedToolResultStore(root, namespace="live") as store:
        number = 0
        while not stop.is_set() and time.monotonic() < deadline:
            started = time.time()
            begun = time.perf_counter()
            try:
                store.write(key=f"{number}.txt", content=f"live result {number} {os.urandom(512).hex()}")
                ok = True
            except Exception:  # a failed write (a busy timeout) is a measurement here, not a crash
                ok = False
            samples.append((started, time.perf_counter() - begun, ok))
            ready.set()
            number += 1
            time.sleep(pace_s)
    Path(out).write_text(json.dumps(samples))


class _Phases:
    """Wall-clock start and end of each repository step gc runs, recorded by wrapping the repository's methods."""

    def __init__(self) -> None:
        self.spans: list[tuple[str, float, float]] = []

    def wrap(self, target: Any, name: str) -> None:
        method: Callable[..., Any] = getattr(target, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.time()
            try:
                return method(*args, **kwargs)
            finally:
                self.spans.append((name, started, time.time()))

        setattr(target, name, timed)


def _measure(
    root: Path, *, pace_ms: float, limit_s: float, gc: Callable[[ContentAddressedToolResultStore, _Phases], Any]
) -> dict[str, Any]:
    """Run `gc` on `root` while a writer process writes; :returns: the phases and the writer's waits in each."""
    context = multiprocessing.get_context("spawn")
    ready, stop = context.Event(), context.Event()
    samples_path = root.parent / f"{root.name}-writer.json"
    writer = context.Process(
        target=_writer,
        kwargs={
            "root": str(root),
            "ready": ready,
            "stop": stop,
            "limit_s": limit_s,
            "pace_s": pace_ms / 1000,
            "out": str(samples_path),
        },
    )
    writer.start()
    phases = _Phases()
    try:
        if not ready.wait(timeout=120):
            raise RuntimeError("the writer process did not write within 2 minutes")
        time.sleep(3.0)  # the baseline: the writer alone
        with ContentAddressedToolResultStore(root) as store:
            retention = store.repository.retention
            for name in (
                "forget",
                "delete_collectable_blobs",
                "remove_stray_files",
                "return_free_space",
                "rebuild_index",
            ):
                phases.wrap(retention, name)
            before = local_footprint(root)
            started = time.time()
            report = gc(store, phases)
            ended = time.time()
            after = local_footprint(root)
        time.sleep(1.0)
    finally:
        stop.set()
        writer.join(timeout=limit_s + 60)
        if writer.is_alive():
            writer.kill()
    samples = json.loads(samples_path.read_text())
    windows = {"before gc": (0.0, started), **{name: (start, end) for name, start, end in phases.spans}}
    windows["whole gc"] = (started, ended)
    return {
        "gc_seconds": round(ended - started, 3),
        "phases": {name: round(end - start, 3) for name, start, end in phases.spans},
        "writer": {name: _waits(samples, start, end) for name, (start, end) in windows.items()},
        "index_bytes": [before[0], after[0]],
        "blob_bytes": [before[1], after[1]],
        "report": {key: value for key, value in vars(report).items()},
    }


def _waits(samples: list[list[Any]], start: float, end: float) -> dict[str, Any]:
    """The latencies (ms) of writes that started in [start, end], or were waiting at start."""
    inside = [
        latency * 1000 for began, latency, _ in samples if start <= began <= end or began < start < began + latency
    ]
    failed = sum(1 for began, _, ok in samples if start <= began <= end and not ok)
    if not inside:
        return {"writes": 0, "failed": failed}
    ordered = sorted(inside)
    return {
        "writes": len(inside),
        "failed": failed,
        "median_ms": round(statistics.median(ordered), 2),
        "p99_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))], 2),
        "max_ms": round(ordered[-1], 2),
    }


def _age_blobs(root: Path) -> None:
    with closing(sqlite3.connect(root / "index.db")) as connection, connection:
        connection.execute("UPDATE blobs SET last_seen = ?", (LONG_AGO,))


def _checkpoint(root: Path) -> None:
    with closing(sqlite3.connect(root / "index.db", isolation_level=None)) as connection:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark. :returns: The exit status."""
    arguments = _parser().parse_args(argv)

    def say(text: str) -> None:
        if not arguments.quiet:
            print(text, file=sys.stderr, flush=True)

    own_workdir = arguments.workdir is None
    workdir = Path(tempfile.mkdtemp(prefix="casstore-gc-disk-")) if own_workdir else arguments.workdir
    workdir.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_average_at_start": os.getloadavg(),
        },
        "sqlite": sqlite3.sqlite_version,
        "size_mb": arguments.size_mb,
        "pace_ms": arguments.pace_ms,
        "step_pages": FREE_SPACE_STEP_PAGES,
    }
    try:
        root = workdir / "store"
        say(f"building a store of {arguments.size_mb} MB ...")
        started = time.perf_counter()
        result["built"] = build(root, stored_bytes=arguments.size_mb * 10**6)
        _checkpoint(root)
        result["build_seconds"] = round(time.perf_counter() - started, 1)
        result["index_file_bytes"] = (root / "index.db").stat().st_size
        _age_blobs(root)
        say("gc --namespace old --grace 0s, beside a writer ...")
        result["gc"] = _measure(
            root,
            pace_ms=arguments.pace_ms,
            limit_s=arguments.writer_limit_s,
            gc=lambda store, _: collect_garbage(store, namespace="old", grace=timedelta(0)),
        )
        with ContentAddressedToolResultStore(root) as store:
            half = store.repository.retention.needed_bytes(namespace="keep") // 2
        _age_blobs(root)
        say(f"gc --namespace keep --max-size {half}B --grace 0s (half of what is left), beside a writer ...")
        result["max_size"] = _measure(
            root,
            pace_ms=arguments.pace_ms,
            limit_s=arguments.writer_limit_s,
            gc=lambda store, _: collect_garbage(store, namespace="keep", max_size=half, grace=timedelta(0)),
        )
    finally:
        if own_workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    path = arguments.json or Path(__file__).parent / "results" / f"gc_disk-{arguments.size_mb}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2, default=str) + "\n")
    print(_table(result))
    say(f"wrote {path}")
    return 0


def _table(result: dict[str, Any]) -> str:
    lines = [
        f"gc on a store of {result['size_mb']} MB stored ({result['index_file_bytes'] / 10**6:,.0f} MB index.db), "
        f"writer every {result['pace_ms']} ms, {result['step_pages']} pages per step",
        "",
        "| run | phase | seconds | writes | median ms | p99 ms | max ms | failed |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for run in ("gc", "max_size"):
        if run not in result:
            continue
        measured = result[run]
        for phase, waits in measured["writer"].items():
            seconds = measured["phases"].get(phase, measured["gc_seconds"] if phase == "whole gc" else "")
            lines.append(
                f"| {run} | {phase} | {seconds} | {waits['writes']} | {waits.get('median_ms', '-')} | "
                f"{waits.get('p99_ms', '-')} | {waits.get('max_ms', '-')} | {waits['failed']} |"
            )
        index_before, index_after = measured["index_bytes"]
        lines.append(f"| {run} | index bytes | {index_before:,} before, {index_after:,} after | | | | | |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
