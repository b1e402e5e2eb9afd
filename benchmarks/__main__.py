"""
`python -m benchmarks`: casstore against Haystack's FileSystemToolResultStore on a realistic agent trace.

    python -m benchmarks                       # small trace (~2k results), under a minute
    python -m benchmarks --size medium         # ~20k results, ~150 MB logical: the README's table
    python -m benchmarks --size scale          # 120k results, mostly small: does per-write cost stay flat?
    python -m benchmarks --shared              # SharedToolResultStore (PostgreSQL + SeaweedFS on loopback), a few min
    python -m benchmarks --search --size medium  # the search index: latency against grep -rF, recall, size
    python -m benchmarks --search --shared --size medium  # the same on the shared store (PostgreSQL's pg_trgm)

Prints the trace's figures first, then a markdown table, and writes everything as JSON (`--json`, by default
`benchmarks/results/<size>-seed<seed>.json`).
"""

import argparse
import gc
import inspect
import os
import platform
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from importlib.metadata import version
from pathlib import Path
from typing import Any

from benchmarks import compaction, memory
from benchmarks.measure import BASELINE, CASSTORE, PLAIN, chunk_series, run_repetition, summarize
from benchmarks.report import aggregate, median, table, targets, write_json
from benchmarks.trace import SIZES, Corpus, PackedTrace, materialize
from casstore import ContentAddressedToolResultStore

_DEFAULT_REPETITIONS = {"small": 3, "medium": 3, "scale": 1}
# The compactors see one conversation of this many tool results, whatever the trace's size: long enough for many
# compactions in a 400k-token window, short enough that the references left behind never fill the window themselves.
_COMPACTOR_RESULTS = 1_000


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="small", help="which trace (default: small)")
    parser.add_argument("--seed", type=int, default=0, help="the trace's seed (default: 0)")
    parser.add_argument(
        "--repetitions", type=int, default=None, help="repetitions of the timed run (default: 3; 1 for scale)"
    )
    parser.add_argument("--chunk", type=int, default=250, help="writes per chunk; the stores alternate by chunk")
    parser.add_argument("--reads", type=int, default=2000, help="random reads per store and repetition")
    parser.add_argument("--json", type=Path, default=None, help="where to write the JSON result")
    parser.add_argument("--workdir", type=Path, default=None, help="folder for the stores (default: a temp folder)")
    parser.add_argument("--inline-max", type=int, default=None, help="casstore's inline_max (default: its default)")
    parser.add_argument("--no-memory", action="store_true", help="skip the peak-memory child processes")
    parser.add_argument("--no-compactor", action="store_true", help="skip the compactor comparison")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    parser.add_argument(
        "--shared",
        action="store_true",
        help="benchmark SharedToolResultStore (PostgreSQL and SeaweedFS started on loopback) beside both local stores",
    )
    parser.add_argument(
        "--processes", default="1,2,4", help="with --shared: numbers of writer processes at once (default: 1,2,4)"
    )
    parser.add_argument(
        "--process-rounds", type=int, default=3, help="with --shared: rounds of the writer-process runs (default: 3)"
    )
    parser.add_argument("--results", type=int, default=None, help="cut the trace to its first N results")
    parser.add_argument(
        "--search",
        action="store_true",
        help="benchmark the search index: search latency against grep -rF, recall at 3, index size, write p50 on/off",
    )
    parser.add_argument(
        "--search-queries", type=int, default=200, help="with --search: known-answer queries (default: 200)"
    )
    return parser


def _default_inline_max() -> int:
    """:returns: The `inline_max` a store gets when none is given (its constructor's default)."""
    default: int = inspect.signature(ContentAddressedToolResultStore).parameters["inline_max"].default
    return default


def _filesystem(path: Path) -> str:
    """:returns: The type of the file system `path` is on, from /proc/mounts (`unknown` elsewhere)."""
    best, kind = "", "unknown"
    try:
        resolved = str(path.resolve())
        for line in Path("/proc/mounts").read_text().splitlines():
            fields = line.split()
            if len(fields) >= 3 and resolved.startswith(fields[1]) and len(fields[1]) >= len(best):
                best, kind = fields[1], fields[2]
    except OSError:
        pass
    return kind


def _source_state() -> str:
    """:returns: The repository's commit, marked `+dirty` when the store's code differs from it (or `unknown`)."""
    root = Path(__file__).resolve().parent.parent
    try:
        commit = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--", "casstore", "migrations", "compactor"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{commit}+dirty" if dirty else commit


def run(arguments: argparse.Namespace) -> dict[str, Any]:
    """Run the whole benchmark as `arguments` say and return the result (also printed and written as JSON)."""
    size = (
        SIZES[arguments.size]
        if arguments.results is None
        else replace(SIZES[arguments.size], results=arguments.results)
    )
    repetitions = arguments.repetitions or _DEFAULT_REPETITIONS[size.name]

    def progress(message: str) -> None:
        if not arguments.quiet:
            print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)

    own_workdir = arguments.workdir is None
    workdir = Path(tempfile.mkdtemp(prefix="casstore-bench-")) if own_workdir else arguments.workdir
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        progress(f"building the {size.name} trace (seed {arguments.seed}) ...")
        corpus = Corpus.discover()
        trace = materialize(size, arguments.seed, workdir, corpus)
        stats = trace.stats
        print(
            f"trace {size.name}: {stats.results:,} results, {stats.writes:,} writes, "
            f"logical {stats.logical_bytes / 1e6:,.1f} MB, unique {stats.unique_bytes / 1e6:,.1f} MB, "
            f"duplicate ratio {stats.duplicate_ratio:.1%} ({stats.duplicate_writes:,} duplicate writes); "
            f"fingerprint {trace.fingerprint}; built in {trace.generation_seconds:.1f} s",
            flush=True,
        )
        gc.collect()
        gc.freeze()
        if arguments.shared or arguments.search:  # modes of their own (--search --shared: search on the shared store)
            return (_run_search if arguments.search else _run_shared)(arguments, trace, workdir, progress)
        summaries = []
        series = []
        for index in range(repetitions):
            repetition = run_repetition(
                trace,
                workdir,
                index=index,
                chunk_writes=arguments.chunk,
                reads=arguments.reads,
                seed=arguments.seed,
                inline_max=arguments.inline_max,
                progress=progress,
            )
            summaries.append(summarize(repetition, trace))
            series.append(chunk_series(repetition))
            figures = summaries[-1]
            progress(
                f"repetition {index + 1}/{repetitions}: write time casstore "
                f"{figures[CASSTORE]['write_total_s']:.2f} s, baseline {figures[BASELINE]['write_total_s']:.2f} s"
            )
        for name in (CASSTORE, BASELINE, PLAIN):
            mismatches = sum(summary[name]["read_mismatches"] for summary in summaries)
            if mismatches:
                raise AssertionError(f"{name} returned {mismatches:.0f} reads that differ from what was written.")
        result = _result(arguments, trace, repetitions, workdir, summaries)
        result["meta"]["corpus"] = corpus.describe()
        result["chunk_series_ms"] = series
        if not arguments.no_memory:
            progress("peak memory: one child process per store ...")
            index_path = workdir / "trace-index.json"
            trace.save_index(index_path)
            result["memory"] = {}
            for name in (CASSTORE, BASELINE):
                root = workdir / f"memory-{name}"
                result["memory"][name] = memory.measure(index_path, name, root, arguments.inline_max)
                shutil.rmtree(root, ignore_errors=True)
        if not arguments.no_compactor:
            progress("compactors ...")
            result["compactor"] = compaction.compare(
                trace,
                workdir,
                results=min(_COMPACTOR_RESULTS, stats.results),
                repetitions=min(repetitions, 3),
            )
        result["targets"] = targets(result)
        return result
    finally:
        if own_workdir:
            shutil.rmtree(workdir, ignore_errors=True)


def _run_shared(
    arguments: argparse.Namespace, trace: PackedTrace, workdir: Path, progress: Callable[[str], None]
) -> dict[str, Any]:
    from benchmarks.shared import run_shared

    processes = tuple(int(count) for count in arguments.processes.split(",") if count.strip())
    result = run_shared(
        trace,
        workdir,
        chunk_writes=arguments.chunk,
        reads=arguments.reads,
        seed=arguments.seed,
        processes=processes,
        progress=progress,
        process_rounds=arguments.process_rounds,
    )
    result["meta"] = {
        "command": " ".join(["python -m benchmarks", *sys.argv[1:]]),
        "size": trace.size,
        "results": trace.stats.results,
        "seed": trace.seed,
        "fingerprint": trace.fingerprint,
        "cpus": os.cpu_count(),
        "casstore_source": _source_state(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
    }
    result["trace"] = trace.stats.to_dict()
    return result


def _run_search(
    arguments: argparse.Namespace, trace: PackedTrace, workdir: Path, progress: Callable[[str], None]
) -> dict[str, Any]:
    from benchmarks.search import run_search, run_search_shared

    result = (run_search_shared if arguments.shared else run_search)(
        trace,
        workdir,
        chunk_writes=arguments.chunk,
        seed=arguments.seed,
        queries=arguments.search_queries,
        rounds=arguments.repetitions or 3,
        progress=progress,
    )
    result["meta"] = {
        "command": " ".join(["python -m benchmarks", *sys.argv[1:]]),
        "size": trace.size,
        "results": trace.stats.results,
        "seed": trace.seed,
        "fingerprint": trace.fingerprint,
        "cpus": os.cpu_count(),
        "filesystem": _filesystem(workdir),
        "sqlite": sqlite3.sqlite_version,
        "casstore_source": _source_state(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
    }
    result["trace"] = trace.stats.to_dict()
    return result


def _result(
    arguments: argparse.Namespace,
    trace: PackedTrace,
    repetitions: int,
    workdir: Path,
    summaries: list[dict[str, dict[str, float]]],
) -> dict[str, Any]:
    figures = aggregate(summaries)
    floor_p50 = median([summary["floor"]["write_duplicate_p50_us"] for summary in summaries])
    growth = {
        name: {
            label: median([summary[name][f"growth_{label}"] for summary in summaries])
            for label in ("all", "new", "duplicate")
        }
        for name in (CASSTORE, BASELINE, PLAIN)
    }
    for values in growth.values():
        values["worst"] = max(values.values())
    # The same divided by the floors' growth in the same run (see `measure.summarize`): the store's own growth.
    for name in (CASSTORE, BASELINE, PLAIN):
        over_floor = {
            label: median([summary[name][f"growth_{label}_over_floor"] for summary in summaries])
            for label in ("all", "new", "duplicate")
        }
        growth[name].update({f"{label}_over_floor": value for label, value in over_floor.items()})
        growth[name]["worst_over_floor"] = max(over_floor.values())
    growth["floor"] = {
        label: median([summary["floor"][f"growth_{label}"] for summary in summaries])
        for label in ("all", "new", "duplicate")
    }
    return {
        "meta": {
            "command": " ".join(["python -m benchmarks", *sys.argv[1:]]),
            "size": trace.size,
            "seed": trace.seed,
            "fingerprint": trace.fingerprint,
            "repetitions": repetitions,
            "chunk_writes": arguments.chunk,
            "reads": min(arguments.reads, len(trace)),
            "inline_max": arguments.inline_max if arguments.inline_max is not None else _default_inline_max(),
            "cpus": os.cpu_count(),
            "filesystem": _filesystem(workdir),
            "workdir": str(workdir.parent if arguments.workdir is None else workdir),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "haystack_ai": version("haystack-ai"),
            "casstore": version("casstore"),
            "casstore_source": _source_state(),
            "trace_generation_s": round(trace.generation_seconds, 2),
            "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        },
        "trace": trace.stats.to_dict(),
        "figures": figures,
        "floor": {
            "floor_p50_us": floor_p50,
            "casstore_p50_us": median([summary[CASSTORE]["write_floor_items_p50_us"] for summary in summaries]),
            "baseline_p50_us": median([summary[BASELINE]["write_floor_items_p50_us"] for summary in summaries]),
            "casstore_over_floor": median(
                [
                    summary[CASSTORE]["write_floor_items_p50_us"] / summary["floor"]["write_duplicate_p50_us"]
                    for summary in summaries
                ]
            ),
            "floor_over_baseline": median(
                [
                    summary["floor"]["write_duplicate_p50_us"] / summary[BASELINE]["write_floor_items_p50_us"]
                    for summary in summaries
                ]
            ),
            "new_floor_p50_us": median([summary["floor"]["write_new_p50_us"] for summary in summaries]),
            "new_casstore_p50_us": median([summary[CASSTORE]["write_floor_new_items_p50_us"] for summary in summaries]),
            "new_baseline_p50_us": median([summary[BASELINE]["write_floor_new_items_p50_us"] for summary in summaries]),
            "new_floor_over_baseline": median(
                [
                    summary["floor"]["write_new_p50_us"] / summary[BASELINE]["write_floor_new_items_p50_us"]
                    for summary in summaries
                ]
            ),
            "read_floor_p50_us": median([summary["floor"]["read_p50_us"] for summary in summaries]),
            "read_floor_over_baseline": median(
                [summary["floor"]["read_p50_us"] / summary[BASELINE]["read_p50_us"] for summary in summaries]
            ),
            "frame_bytes": median([summary["floor"]["frame_bytes"] for summary in summaries]),
            "frames_over_baseline_du": median(
                [summary["floor"]["frame_bytes"] / summary[BASELINE]["du_closed_bytes"] for summary in summaries]
            ),
            "whole_trace_floor_s": median([summary["floor"]["write_total_s"] for summary in summaries]),
            "whole_trace_floor_over_baseline": median(
                [summary["floor"]["write_total_s"] / summary[BASELINE]["write_total_s"] for summary in summaries]
            ),
        },
        "learned": {key: median([summary["learned"][key] for summary in summaries]) for key in summaries[0]["learned"]},
        "learn_off": {
            key: median([summary[PLAIN][key] for summary in summaries])
            for key in ("read_p50_us", "read_p90_us", "write_new_p50_us", "write_new_p99_us", "du_closed_bytes")
        },
        "chunks": {key: median([summary["chunks"][key] for summary in summaries]) for key in summaries[0]["chunks"]},
        "growth": growth,
        "repetitions": summaries,
    }


def main(argv: list[str] | None = None) -> int:
    """The command line: run, print the table, write the JSON. :returns: The exit status."""
    arguments = _parser().parse_args(argv)
    result = run(arguments)
    print()
    if arguments.shared and not arguments.search:
        from benchmarks.shared import report_shared, write_result

        print(report_shared(result))
        name = f"shared-{arguments.size}-seed{arguments.seed}.json"
        path = arguments.json or Path(__file__).resolve().parent / "results" / name
        write_result(result, path)
        print(f"\nJSON: {path}")
        return 0
    if arguments.search:
        from benchmarks.search import report_search

        print(report_search(result))
        flavour = "search-shared" if arguments.shared else "search"
        path = arguments.json or Path(__file__).resolve().parent / "results" / f"{flavour}-{arguments.size}.json"
        write_json(result, path)
        print(f"\nJSON: {path}")
        return 0
    print(table(result))
    path = arguments.json or Path(__file__).resolve().parent / "results" / f"{arguments.size}-seed{arguments.seed}.json"
    write_json(result, path)
    print(f"\nJSON: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
