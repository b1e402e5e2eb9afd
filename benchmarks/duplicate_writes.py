"""
`python -m benchmarks.duplicate_writes`: the local store's duplicate-write and read latency, alone, against any tree.

    python -m benchmarks.duplicate_writes                              # one run of this tree: p50/p90 in µs
    python -m benchmarks.duplicate_writes --compare ../other-tree      # this tree and others, alternating
    python -m benchmarks.duplicate_writes --compare ../other --instructions   # also count instructions (callgrind)

One run opens a fresh store, writes `--contents` distinct results once, warms up, then times `--writes` duplicate
writes (each content again under a new key) and `--reads` reads, one call at a time. Only the store's public API
(`ContentAddressedToolResultStore(root)`, `write`, `read`) is used and nothing else of casstore, so the same file
measures any commit: `--compare` runs it as a script in child processes with `PYTHONPATH` set to each tree in turn,
the trees alternating (ABBA...) so drift on a shared machine falls on both, and reports the minimum and median of
the per-run medians.

`--instructions` also runs each tree once under `valgrind --tool=callgrind` and reports the instructions per write and
per read spent in the timed loops (timing calls included, the same in every tree): instructions do not move with the
machine's load, microseconds do.
Bounded: every loop runs a fixed number of times.
"""

import argparse
import gc
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve()
_THIS_TREE = _HERE.parent.parent


# What `_mark_phase` calls: callgrind dumps its counts before each call (`--dump-before`).
_MARK_FUNCTION = "crc32"


def _mark_phase() -> None:
    # Where one part of a callgrind count ends and the next begins; a no-op otherwise.
    zlib.crc32(b"")


def _contents(count: int, size: int) -> list[str]:
    # Distinct, compressible text of about `size` characters: what a tool result looks like, small enough for a frame
    # kept in the index (the default `inline_max`), as most results are.
    line = "drwxr-xr-x  2 agent agent 4096 Dec  1 11:00 {index:06d}_{part:04d}.txt\n"
    return ["".join(line.format(index=index, part=part) for part in range(size // 50)) for index in range(count)]


def _percentile(values: list[int], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] / 1e3


def run_once(*, writes: int, reads: int, contents: int, size: int, warmup: int, still_clock: bool) -> dict[str, Any]:
    """
    Time duplicate writes and reads on a fresh store in a temporary folder.

    :param still_clock: Stop `time.monotonic` (what the store's hints are timed by) once the store is open. Under
        callgrind a run is some fifty times slower, so the hints' one-second window would run out mid-run and every
        write would take the look-up path a native run never takes; stopped, the paths are those of a native run.
    :returns: `write_p50_us`, `write_p90_us`, `read_p50_us`, `read_p90_us` (None for a loop of zero calls).
    """
    from casstore import ContentAddressedToolResultStore

    texts = _contents(contents, size)
    clock = time.perf_counter_ns
    with tempfile.TemporaryDirectory(prefix="casstore-dup-") as folder:
        store = ContentAddressedToolResultStore(Path(folder) / "store", namespace="bench")
        if still_clock:
            time.monotonic = itertools.repeat(time.monotonic()).__next__
        try:
            references = [store.write(key=f"first_{index}.txt", content=text) for index, text in enumerate(texts)]
            for index in range(warmup):
                store.write(key=f"warm_{index}.txt", content=texts[index % contents])
                store.read(references[index % contents])
            gc.collect()
            _mark_phase()
            write_times = []
            for index in range(writes):
                text = texts[index % contents]
                key = f"{index}_tool_call.txt"
                started = clock()
                store.write(key=key, content=text)
                write_times.append(clock() - started)
            _mark_phase()
            read_times = []
            for index in range(reads):
                reference = references[index % contents]
                started = clock()
                store.read(reference)
                read_times.append(clock() - started)
            _mark_phase()
        finally:
            store.close()
    return {
        "write_p50_us": _percentile(write_times, 0.5) if write_times else None,
        "write_p90_us": _percentile(write_times, 0.9) if write_times else None,
        "read_p50_us": _percentile(read_times, 0.5) if read_times else None,
        "read_p90_us": _percentile(read_times, 0.9) if read_times else None,
    }


def _child(tree: Path, arguments: list[str], *, prefix: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "PYTHONPATH": str(tree), "PYTHONHASHSEED": "0"}
    command = [*(prefix or []), sys.executable, str(_HERE), "--json", *arguments]
    return subprocess.run(command, env=environment, capture_output=True, text=True, check=True, cwd=tree)


def _run_args(options: argparse.Namespace, *, writes: int, reads: int) -> list[str]:
    return [
        f"--writes={writes}",
        f"--reads={reads}",
        f"--contents={options.contents}",
        f"--size={options.size}",
        f"--warmup={options.warmup}",
    ]


def _instructions(tree: Path, options: argparse.Namespace) -> tuple[float, float]:
    """:returns: Instructions per duplicate write and per read in `tree`, counted by callgrind over the timed loops."""
    with tempfile.TemporaryDirectory(prefix="casstore-callgrind-") as folder:
        out = Path(folder) / "callgrind.out"
        # A dump before each call of zlib's `crc32` (which `_mark_phase` calls, and nothing else on these paths) cuts
        # the count in parts: before the writes, the writes, the reads, after.
        prefix = [
            "valgrind",
            "--tool=callgrind",
            f"--callgrind-out-file={out}",
            f"--dump-before={_MARK_FUNCTION}",
            "--cache-sim=no",
            "--branch-sim=no",
        ]
        _child(tree, [*_run_args(options, writes=options.writes, reads=options.reads), "--still-clock"], prefix=prefix)
        parts = {}
        for path in Path(folder).glob("callgrind.out*"):
            fields = dict(
                line.split(": ", 1) for line in path.read_text().splitlines() if line[:6] in ("part: ", "summar")
            )
            parts[int(fields["part"])] = int(fields["summary"])
    if sorted(parts) != [1, 2, 3, 4]:
        raise RuntimeError(
            f"callgrind cut the run of {tree} in parts {sorted(parts)}, not 4: something else calls crc32"
        )
    return parts[2] / max(options.writes, 1), parts[3] / max(options.reads, 1)


def compare(options: argparse.Namespace) -> dict[str, Any]:
    """Alternate this tree and those of `options.compare`, `options.rounds` runs each; :returns: figures per tree."""
    trees = {"this": _THIS_TREE}
    for other in options.compare:
        trees[other.resolve().name if other.resolve().name not in trees else str(other.resolve())] = other.resolve()
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
    arguments = _run_args(options, writes=options.writes, reads=options.reads)
    for round_number in range(options.rounds):
        # ABBA...: each tree goes first and last as often, so a trend in the machine's load falls on all alike.
        order = list(trees) if round_number % 2 == 0 else list(reversed(trees))
        for name in order:
            runs[name].append(json.loads(_child(trees[name], arguments).stdout))
        if not options.quiet:
            latest = {name: runs[name][-1] for name in trees}
            print(
                f"round {round_number + 1}/{options.rounds}: "
                + "; ".join(
                    f"{name} write {figures['write_p50_us']:.1f} read {figures['read_p50_us']:.1f}"
                    for name, figures in latest.items()
                ),
                file=sys.stderr,
            )
    result: dict[str, Any] = {"trees": {name: str(path) for name, path in trees.items()}, "rounds": options.rounds}
    for name in trees if options.rounds else ():
        for figure in ("write_p50_us", "read_p50_us"):
            values = [run[figure] for run in runs[name]]
            result[f"{name}_{figure}_min"] = min(values)
            result[f"{name}_{figure}_median"] = statistics.median(values)
    if options.instructions:
        for name, tree in trees.items():
            per_write, per_read = _instructions(tree, options)
            result[f"{name}_write_instructions"] = round(per_write)
            result[f"{name}_read_instructions"] = round(per_read)
            if not options.quiet:
                print(f"{name}: {per_write:,.0f} instructions a write, {per_read:,.0f} a read", file=sys.stderr)
    return result


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.duplicate_writes", description=__doc__.split("\n\n")[0])
    parser.add_argument("--writes", type=int, default=2000, help="timed duplicate writes per run (default: 2000)")
    parser.add_argument("--reads", type=int, default=2000, help="timed reads per run (default: 2000)")
    parser.add_argument("--contents", type=int, default=200, help="distinct contents written first (default: 200)")
    parser.add_argument("--size", type=int, default=2000, help="characters per content (default: 2000)")
    parser.add_argument("--warmup", type=int, default=200, help="untimed writes and reads first (default: 200)")
    parser.add_argument(
        "--compare", type=Path, nargs="+", default=None, help="other trees (checkouts) to alternate with this one"
    )
    parser.add_argument("--rounds", type=int, default=10, help="runs of each tree with --compare (default: 10)")
    parser.add_argument("--instructions", action="store_true", help="with --compare: also count instructions")
    parser.add_argument("--still-clock", action="store_true", help="stop the hints' clock (for callgrind runs)")
    parser.add_argument("--json", action="store_true", help="print only the JSON result")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    return parser


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run as the command line says; :returns: the figures printed."""
    options = _parser().parse_args(argv)
    if options.contents < 1 or min(options.writes, options.reads, options.warmup, options.rounds) < 0:
        raise SystemExit("--contents must be at least 1; --writes, --reads, --warmup and --rounds at least 0.")
    if options.compare is not None:
        result = compare(options)
    else:
        result = run_once(
            writes=options.writes,
            reads=options.reads,
            contents=options.contents,
            size=options.size,
            warmup=options.warmup,
            still_clock=options.still_clock,
        )
    print(json.dumps(result) if options.json else json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
