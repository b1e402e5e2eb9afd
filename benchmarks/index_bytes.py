"""
Where the bytes of a store go: the trace written once into one casstore root, then `du` and SQLite's `dbstat` per
table and index of `index.db` (the store closed, so the write-ahead log is folded in).

    python -m benchmarks.index_bytes --size medium                    # the medium trace, learned encodings on
    python -m benchmarks.index_bytes --size medium --trace-dir T --root R  # keep the trace (reused) and the root

Cheaper than `python -m benchmarks` (one store, one pass, no baseline, no timing): what the schema costs, table by
table. With `--baseline`, the same trace is also written into Haystack's `FileSystemToolResultStore`, for the ratio of
the two `du`s.
"""

import argparse
import json
import sqlite3
import sys
import tempfile
from contextlib import closing
from pathlib import Path

from haystack.hooks.tool_result_offloading import FileSystemToolResultStore

from benchmarks.measure import HISTORY, disk_usage
from benchmarks.trace import SIZES, PackedTrace, materialize
from casstore import ContentAddressedToolResultStore


def page_bytes(index_path: Path) -> dict[str, int]:
    """:returns: The bytes of the pages of each table and index of `index_path`, by name, largest first."""
    with closing(sqlite3.connect(f"file:{index_path}?mode=ro", uri=True)) as connection:
        rows = connection.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC").fetchall()
    return {str(name): int(size) for name, size in rows}


def baseline_du(root: Path, trace_dir: Path) -> int:
    """:returns: `du` of the trace (packed in `trace_dir`) written into a FileSystemToolResultStore at `root`."""
    trace = PackedTrace.open_index(trace_dir / "trace-index.json")
    store = FileSystemToolResultStore(root)
    for start in range(0, len(trace), 500):
        for key, content in trace.load(start, min(start + 500, len(trace))):
            store.write(key=key, content=content)
    return disk_usage(root).blocks_bytes


def measure(root: Path, trace_dir: Path, *, size: str, seed: int, learn: bool) -> dict[str, object]:
    """
    Write the trace into a fresh store at `root` (its pack made in `trace_dir` unless there already), close it, and
    count.

    :returns: The trace's fingerprint, `du` of the root, the frames' bytes, the history's and every table's pages.
    """
    pack = trace_dir / "trace.pack"
    trace = materialize(SIZES[size], seed, trace_dir) if not pack.exists() else None
    if trace is None:
        trace = PackedTrace.open_index(trace_dir / "trace-index.json")
    else:
        trace.save_index(trace_dir / "trace-index.json")
    with ContentAddressedToolResultStore(root, learn=learn) as store:
        for start in range(0, len(trace), 500):
            for key, content in trace.load(start, min(start + 500, len(trace))):
                store.write(key=key, content=content)
    pages = page_bytes(root / "index.db")
    with closing(sqlite3.connect(f"file:{root / 'index.db'}?mode=ro", uri=True)) as connection:
        (frames,) = connection.execute("SELECT coalesce(sum(stored_size), 0) FROM blobs").fetchone()
        (writes,) = connection.execute("SELECT count(*) FROM writes").fetchone()
        (blobs,) = connection.execute("SELECT count(*) FROM blobs").fetchone()
    return {
        "fingerprint": trace.fingerprint,
        "writes": int(writes),
        "blobs": int(blobs),
        "du_bytes": disk_usage(root).blocks_bytes,
        "frame_bytes": int(frames),
        "index_bytes": sum(pages.values()),
        "history_bytes": sum(pages.get(name, 0) for name in HISTORY),
        "pages": pages,
    }


def main(argv: list[str] | None = None) -> None:
    """Run from the command line; prints the figures as JSON."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.index_bytes", description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="small")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--learn-off", action="store_true", help="plain frames only (learn=False)")
    parser.add_argument("--trace-dir", type=Path, default=None, help="where the trace's pack is kept and reused")
    parser.add_argument("--baseline", action="store_true", help="also measure FileSystemToolResultStore's du")
    parser.add_argument("--root", type=Path, default=None, help="where the store is written (a new folder), kept")
    arguments = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="casstore-index-bytes-") as scratch:
        trace_dir = arguments.trace_dir or Path(scratch)
        trace_dir.mkdir(parents=True, exist_ok=True)
        root = arguments.root or Path(scratch) / "root"
        if root.exists():
            sys.exit(f"{root} exists already: give --root a folder that does not exist yet.")
        figures = measure(root, trace_dir, size=arguments.size, seed=arguments.seed, learn=not arguments.learn_off)
        if arguments.baseline:
            figures["baseline_du_bytes"] = baseline_du(Path(scratch) / "baseline", trace_dir)
            figures["du_over_baseline"] = int(figures["du_bytes"]) / figures["baseline_du_bytes"]  # type: ignore[call-overload]
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
