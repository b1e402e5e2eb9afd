"""
`python -m benchmarks.new_writes --compare <tree>`: new-content writes of a `learn=True` store (`--learn-off`:
`learn=False`), this tree against another, on the same trace, by the encoding each result got.

    python -m benchmarks.new_writes --compare ../main --size medium --rounds 3

Each round starts one child process per tree (`PYTHONPATH` set to that tree, this file run as a script), each with a
fresh store, and has them take turns writing the trace in chunks of `--chunk` writes (ABBA...), so a change of the
machine's load falls on both alike (the tree that takes the first turn alternates by round). Every write is timed; a
write is new content when its reference was not returned before in that child. Since both write the same results in the
same order, each new result is written by both, and the figure to read is the median of the per-result differences (this
tree's time minus the other's), by the encoding the result got here (`blob_encodings`, read from the closed store's
index), beside each tree's p50. Only the store's public API and its index are used; the children read the trace's pack
with their own tree's `benchmarks.trace`.
Bounded: every loop runs over the trace's writes, a fixed number of rounds.
"""

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import closing
from pathlib import Path
from typing import IO, Any

_HERE = Path(__file__).resolve()
_THIS_TREE = _HERE.parent.parent
_CLASSES = ("dictionary", "delta", "plain")


def serve(*, root: Path, trace_dir: Path, chunk: int, learn: bool = True) -> None:
    """
    Answer lines on stdin: a chunk number writes that chunk of the trace and prints `[[index, ns, new, reference],
    ...]`; `done` closes the store and prints each blob's encoding, by digest.
    """
    from benchmarks.trace import PackedTrace  # the tree under test's, on its PYTHONPATH
    from casstore import ContentAddressedToolResultStore

    trace = PackedTrace.open_index(trace_dir / "trace-index.json")
    store = ContentAddressedToolResultStore(root, learn=learn)
    seen: set[str] = set()
    for line in sys.stdin:
        if line.strip() == "done":
            store.close()
            with closing(sqlite3.connect(root / "index.db")) as connection:
                encodings = dict(connection.execute("SELECT digest, encoding FROM blob_encodings").fetchall())
            print(json.dumps(encodings), flush=True)
            return
        number = int(line)
        times = []
        first = number * chunk
        for index, (key, content) in enumerate(trace.load(first, min(first + chunk, len(trace))), first):
            start = time.perf_counter_ns()
            reference = store.write(key=key, content=content)
            elapsed = time.perf_counter_ns() - start
            times.append((index, elapsed, reference not in seen, reference))
            seen.add(reference)
        print(json.dumps(times), flush=True)


def _ask(child: subprocess.Popen[str], line: str) -> Any:
    stdin, stdout = child.stdin, child.stdout
    assert stdin is not None and stdout is not None
    stdin.write(line + "\n")
    stdin.flush()
    answer = stdout.readline()
    if not answer:
        raise SystemExit(f"a child process ended early (exit status {child.wait()})")
    return json.loads(answer)


def _digest(reference: str) -> str:
    # blake3/[bin/]ab/cdef...[.ext]
    parts = reference.split("/")
    return parts[-2] + parts[-1].split(".")[0]


def run_round(
    trees: list[Path], *, trace_dir: Path, chunk: int, writes: int, first: int = 0, learn: bool = True
) -> dict[str, Any]:
    """
    :param first: Which tree takes the first turn (0: this one); rounds alternate it, so that neither child is always
        the one that runs right after the other's turn.
    :returns: For each encoding (and `new`, all new content): count, each tree's p50 and the median difference.
    """
    with tempfile.TemporaryDirectory(prefix="casstore-new-writes-") as folder:
        children = [
            subprocess.Popen(
                [
                    *(sys.executable, str(_HERE), "--serve", "--root", f"{folder}/store{number}"),
                    *("--trace-dir", str(trace_dir), "--chunk", str(chunk)),
                    *(() if learn else ("--learn-off",)),
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                env=dict(os.environ, PYTHONPATH=str(tree)),
                cwd=tree,
            )
            for number, tree in enumerate(trees)
        ]
        timed: list[dict[int, tuple[int, bool, str]]] = [{} for _ in trees]
        try:
            for number in range((writes + chunk - 1) // chunk):
                for which in (0, 1) if (number + first) % 2 == 0 else (1, 0):
                    for index, elapsed, new, reference in _ask(children[which], str(number)):
                        timed[which][index] = (elapsed, new, reference)
            encodings = _ask(children[0], "done")
            _ask(children[1], "done")
        finally:
            for child in children:
                for stream in (child.stdin, child.stdout):
                    if stream is not None:
                        stream.close()
                child.wait(timeout=60)
    figures: dict[str, Any] = {}
    for kind in (*_CLASSES, "new"):
        ours, theirs, differences = [], [], []
        for index, (elapsed, new, reference) in timed[0].items():
            if not new or (kind != "new" and encodings.get(_digest(reference)) != kind):
                continue
            other = timed[1][index][0]
            ours.append(elapsed / 1000)
            theirs.append(other / 1000)
            differences.append((elapsed - other) / 1000)
        figures[kind] = {
            "count": len(differences),
            "this_p50_us": statistics.median(ours) if ours else None,
            "other_p50_us": statistics.median(theirs) if theirs else None,
            "median_difference_us": statistics.median(differences) if differences else None,
        }
    return figures


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.new_writes", description=__doc__.split("\n\n")[0])
    parser.add_argument("--compare", type=Path, help="the other tree (a checkout whose casstore/migrations exists)")
    parser.add_argument("--size", default="small", help="which trace (default: small)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--trace-dir", type=Path, default=None, help="where the trace's pack is kept and reused")
    parser.add_argument("--rounds", type=int, default=3, help="rounds, each with fresh children (default: 3)")
    parser.add_argument("--chunk", type=int, default=250, help="writes per turn (default: 250)")
    parser.add_argument("--serve", action="store_true", help="answer chunk numbers on stdin (what --compare runs)")
    parser.add_argument("--root", type=Path, help="with --serve: the store's folder")
    parser.add_argument("--learn-off", action="store_true", help="stores with learn=False (every result plain)")
    parser.add_argument("--json", action="store_true", help="print only the JSON result")
    return parser


def _report(figures: dict[str, Any], out: IO[str]) -> None:
    for kind in (*_CLASSES, "new"):
        row = figures[kind]
        if not row["count"]:
            print(f"  {kind}: none", file=out)
            continue
        print(
            f"  {kind} ({row['count']:,}): p50 {row['this_p50_us']:.1f} µs here, {row['other_p50_us']:.1f} µs there; "
            f"median difference {row['median_difference_us']:+.1f} µs",
            file=out,
        )


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the comparison (or, with `--serve`, be one of its children). :returns: The JSON result."""
    options = _parser().parse_args(argv)
    if options.chunk < 1 or options.rounds < 0:
        raise SystemExit("--chunk must be at least 1 and --rounds at least 0")
    if options.serve:
        serve(root=options.root, trace_dir=options.trace_dir, chunk=options.chunk, learn=not options.learn_off)
        return {}
    if options.compare is None:
        raise SystemExit("--compare <tree> is required: the tree to measure this one against")
    from benchmarks.trace import SIZES, PackedTrace, materialize

    with tempfile.TemporaryDirectory(prefix="casstore-new-writes-trace-") as scratch:
        trace_dir = options.trace_dir or Path(scratch)
        if (trace_dir / "trace.pack").exists():
            trace = PackedTrace.open_index(trace_dir / "trace-index.json")
        else:
            trace = materialize(SIZES[options.size], options.seed, trace_dir)
            trace.save_index(trace_dir / "trace-index.json")
        trees = [_THIS_TREE, options.compare.resolve()]
        result: dict[str, Any] = {
            "trees": {"this": str(trees[0]), "other": str(trees[1])},
            "fingerprint": trace.fingerprint,
            "writes": len(trace),
            "learn": not options.learn_off,
            "rounds": [],
        }
        for number in range(options.rounds):
            figures = run_round(
                trees,
                trace_dir=trace_dir,
                chunk=options.chunk,
                writes=len(trace),
                first=number % 2,
                learn=not options.learn_off,
            )
            result["rounds"].append(figures)
            if not options.json:
                print(f"round {number + 1} (trace {trace.fingerprint}, {len(trace):,} writes):", file=sys.stderr)
                _report(figures, sys.stderr)
    print(json.dumps(result, indent=None if options.json else 2))
    return result


if __name__ == "__main__":
    main()
