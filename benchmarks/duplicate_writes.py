"""
`python -m benchmarks.duplicate_writes`: the local store's duplicate-write and read latency, alone, against any tree.

    python -m benchmarks.duplicate_writes                              # one run of this tree: p50/p90 in µs
    python -m benchmarks.duplicate_writes --compare ../other-tree      # this tree and others, alternating

One run opens a fresh store, writes `--contents` distinct results once, warms up, then times `--writes` duplicate
writes (each content again under a new key) and `--reads` reads, one call at a time. Only the store's public API
(`ContentAddressedToolResultStore(root)`, `write`, `read`) is used and nothing else of casstore, so the same file
measures any commit. `--compare` runs it as a script in one child process per tree (`PYTHONPATH` set to that tree),
all open at once, and has them take turns in chunks of `--chunk` calls (ABBA...), so a change of load on a shared
machine falls on every tree alike; each round is a run with fresh children, and it reports the minimum and median
of the per-run medians, and the median of this tree's per-round difference from each other tree.

Bounded: every loop runs a fixed number of times.
"""

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve()
_THIS_TREE = _HERE.parent.parent


def _contents(count: int, size: int) -> list[str]:
    # Distinct, compressible text of about `size` characters: what a tool result looks like, small enough for a frame
    # kept in the index (the default `inline_max`), as most results are.
    line = "drwxr-xr-x  2 agent agent 4096 Dec  1 11:00 {index:06d}_{part:04d}.txt\n"
    return ["".join(line.format(index=index, part=part) for part in range(size // 50)) for index in range(count)]


def _percentile(values: list[int], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] / 1e3


class _Bench:
    """A fresh store in a temporary folder, its contents written once and warmed up, timing calls on demand."""

    def __init__(self, *, contents: int, size: int, warmup: int) -> None:
        from casstore import ContentAddressedToolResultStore

        self._folder = tempfile.TemporaryDirectory(prefix="casstore-dup-")
        self._store = ContentAddressedToolResultStore(Path(self._folder.name) / "store", namespace="bench")
        self._texts = _contents(contents, size)
        write = self._store.write
        self._references = [write(key=f"first_{index}.txt", content=text) for index, text in enumerate(self._texts)]
        self._writes = 0
        for index in range(warmup):
            write(key=f"warm_{index}.txt", content=self._texts[index % contents])
            self._store.read(self._references[index % contents])
        gc.collect()

    def writes(self, count: int) -> list[int]:
        """:returns: The nanoseconds of each of `count` duplicate writes, the contents in turn, each under a new key."""
        clock, write, texts = time.perf_counter_ns, self._store.write, self._texts
        times = []
        for index in range(self._writes, self._writes + count):
            text = texts[index % len(texts)]
            key = f"{index}_tool_call.txt"
            started = clock()
            write(key=key, content=text)
            times.append(clock() - started)
        self._writes += count
        return times

    def reads(self, count: int) -> list[int]:
        """:returns: The nanoseconds of each of `count` reads, the references in turn."""
        clock, read, references = time.perf_counter_ns, self._store.read, self._references
        times = []
        for index in range(count):
            reference = references[index % len(references)]
            started = clock()
            read(reference)
            times.append(clock() - started)
        return times

    def close(self) -> None:
        """Close the store and remove its folder."""
        self._store.close()
        self._folder.cleanup()


def _figures(write_times: list[int], read_times: list[int]) -> dict[str, Any]:
    return {
        "write_p50_us": _percentile(write_times, 0.5) if write_times else None,
        "write_p90_us": _percentile(write_times, 0.9) if write_times else None,
        "read_p50_us": _percentile(read_times, 0.5) if read_times else None,
        "read_p90_us": _percentile(read_times, 0.9) if read_times else None,
    }


def run_once(*, writes: int, reads: int, contents: int, size: int, warmup: int) -> dict[str, Any]:
    """
    Time `writes` duplicate writes, then `reads` reads, on a fresh store (see `_Bench`).

    :returns: `write_p50_us`, `write_p90_us`, `read_p50_us`, `read_p90_us` (None for a loop of zero calls).
    """
    bench = _Bench(contents=contents, size=size, warmup=warmup)
    try:
        write_times = bench.writes(writes)
        read_times = bench.reads(reads)
    finally:
        bench.close()
    return _figures(write_times, read_times)


def serve(*, contents: int, size: int, warmup: int) -> None:
    """
    Open a bench and answer commands on stdin, one a line: `writes N` or `reads N` (one JSON list of nanoseconds on
    stdout), `quit`. `--compare` drives one such child per tree, so their calls alternate in chunks.
    """
    bench = _Bench(contents=contents, size=size, warmup=warmup)
    try:
        print("ready", flush=True)
        for line in sys.stdin:
            command, _, count = line.strip().partition(" ")
            if command == "quit":
                break
            times = bench.writes(int(count)) if command == "writes" else bench.reads(int(count))
            print(json.dumps(times), flush=True)
    finally:
        bench.close()


class _Server:
    """A `serve` child of one tree."""

    def __init__(self, tree: Path, arguments: list[str]) -> None:
        environment = {**os.environ, "PYTHONPATH": str(tree), "PYTHONHASHSEED": "0"}
        self._process = subprocess.Popen(
            [sys.executable, str(_HERE), "--serve", *arguments],
            env=environment,
            cwd=tree,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        if self._answer() != "ready":
            raise RuntimeError(f"the benchmark child of {tree} did not start")

    def _answer(self) -> str:
        assert self._process.stdout is not None
        return self._process.stdout.readline().strip()

    def ask(self, command: str, count: int) -> list[int]:
        """:returns: The nanoseconds of each call the child timed."""
        assert self._process.stdin is not None
        self._process.stdin.write(f"{command} {count}\n")
        self._process.stdin.flush()
        times: list[int] = json.loads(self._answer())
        return times

    def close(self) -> None:
        """Tell the child to quit and wait for it (bounded)."""
        assert self._process.stdin is not None
        self._process.stdin.write("quit\n")
        self._process.stdin.close()
        self._process.wait(timeout=60)


def _run_args(options: argparse.Namespace, *, writes: int, reads: int) -> list[str]:
    return [
        f"--writes={writes}",
        f"--reads={reads}",
        f"--contents={options.contents}",
        f"--size={options.size}",
        f"--warmup={options.warmup}",
    ]


def compare(options: argparse.Namespace) -> dict[str, Any]:
    """Alternate this tree and those of `options.compare`, `options.rounds` runs each; :returns: figures per tree."""
    trees = {"this": _THIS_TREE}
    for other in options.compare:
        trees[other.resolve().name if other.resolve().name not in trees else str(other.resolve())] = other.resolve()
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
    arguments = _run_args(options, writes=options.writes, reads=options.reads)
    for round_number in range(options.rounds):
        # One child per tree, all open at once; their calls alternate in chunks of `--chunk`, in ABBA order, so a
        # change of the machine's load (other processes, a core taken) falls on every tree alike.
        servers = {name: _Server(tree, arguments) for name, tree in trees.items()}
        try:
            times: dict[str, dict[str, list[int]]] = {name: {"writes": [], "reads": []} for name in trees}
            for command, total in (("writes", options.writes), ("reads", options.reads)):
                for chunk_number, start in enumerate(range(0, total, options.chunk)):
                    order = list(trees) if (round_number + chunk_number) % 2 == 0 else list(reversed(trees))
                    for name in order:
                        times[name][command] += servers[name].ask(command, min(options.chunk, total - start))
        finally:
            for server in servers.values():
                server.close()
        for name in trees:
            runs[name].append(_figures(times[name]["writes"], times[name]["reads"]))
        if not options.quiet:
            print(
                f"round {round_number + 1}/{options.rounds}: "
                + "; ".join(
                    f"{name} write {runs[name][-1]['write_p50_us']:.1f} read {runs[name][-1]['read_p50_us']:.1f}"
                    for name in trees
                ),
                file=sys.stderr,
            )
    result: dict[str, Any] = {"trees": {name: str(path) for name, path in trees.items()}, "rounds": options.rounds}
    for name in trees if options.rounds else ():
        for figure in ("write_p50_us", "read_p50_us"):
            values = [run[figure] for run in runs[name]]
            result[f"{name}_{figure}_min"] = min(values)
            result[f"{name}_{figure}_median"] = statistics.median(values)
            if name != "this":
                # Paired by round: both trees ran side by side, so the difference cancels what the round's load added.
                differences = [
                    mine[figure] - theirs[figure] for mine, theirs in zip(runs["this"], runs[name], strict=True)
                ]
                result[f"this_minus_{name}_{figure}_median"] = statistics.median(differences)
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
    parser.add_argument("--chunk", type=int, default=100, help="calls per turn with --compare (default: 100)")
    parser.add_argument("--serve", action="store_true", help="answer commands on stdin (what --compare runs)")
    parser.add_argument("--json", action="store_true", help="print only the JSON result")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    return parser


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run as the command line says; :returns: the figures printed."""
    options = _parser().parse_args(argv)
    if (
        min(options.contents, options.chunk) < 1
        or min(options.writes, options.reads, options.warmup, options.rounds) < 0
    ):
        raise SystemExit("--contents and --chunk must be at least 1; --writes, --reads, --warmup, --rounds at least 0.")
    if options.serve:
        serve(contents=options.contents, size=options.size, warmup=options.warmup)
        return {}
    if options.compare is not None:
        result = compare(options)
    else:
        result = run_once(
            writes=options.writes,
            reads=options.reads,
            contents=options.contents,
            size=options.size,
            warmup=options.warmup,
        )
    print(json.dumps(result) if options.json else json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
