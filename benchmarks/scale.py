"""
`python -m benchmarks.scale`: a million writes into one local store, and how long the store's commands then take.

    python -m benchmarks.scale                    # 1,000,000 writes (see docs/performance.md for how long)
    python -m benchmarks.scale --writes 100000    # a tenth of it

It writes `benchmarks.scale_workload`'s stream (40% repeats, new results near earlier ones, several namespaces) into
one `ContentAddressedToolResultStore` (its defaults: learned encodings on, no search index), timing every `write`, and
closes it. Then it measures, each command run as a real `python -m casstore ...` process:

- write p50 by tenth of the run (all writes, new content, repeats), and the last tenth over the first (target <= 1.3);
- the index's bytes per write (`index.db` and its `-wal` after close) and `du` of the whole root;
- `casstore stats`, `casstore log --limit 20`, `casstore verify`;
- `casstore search-index` (indexing every stored result), then one search through `make_search_tool` for a token
  only the last edited result holds, and one for a common word;
- `casstore gc --older-than 12h --grace 0s` after the older half of `writes` was dated a day back (with sqlite3).

Prints markdown tables and writes the figures as JSON (`--json`, by default `benchmarks/results/scale-<writes>.json`).
Bounded: a fixed number of writes, and every command is stopped after `--timeout` seconds (reported as timed out).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from array import array
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

from benchmarks.measure import disk_usage, percentile
from benchmarks.scale_workload import ScaleWorkload
from casstore import ContentAddressedToolResultStore
from casstore.compactor import make_search_tool

TARGET_GROWTH = 1.3
_EDITED = re.compile(r"value_[0-9a-f]+_0\b")
_COMMON_WORD = "return"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.scale", description=__doc__.split("\n\n")[0])
    parser.add_argument("--writes", type=int, default=1_000_000, help="how many writes (default: 1,000,000)")
    parser.add_argument("--namespaces", type=int, default=8, help="namespaces the sessions go to (default: 8)")
    parser.add_argument("--seed", type=int, default=0, help="the workload's seed (default: 0)")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds each command may take (default: 3600)")
    parser.add_argument("--no-search", action="store_true", help="skip building the search index and the searches")
    parser.add_argument("--workdir", type=Path, default=None, help="folder for the store (default: a temp folder)")
    parser.add_argument("--keep", action="store_true", help="keep the store afterwards (with --workdir)")
    parser.add_argument("--json", type=Path, default=None, help="where to write the JSON result")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    return parser


def write_workload(
    root: Path, workload: ScaleWorkload, progress: Callable[[str], None]
) -> tuple[dict[str, Any], array[int], array[int]]:
    """
    Write the workload into a store at `root`, one store object per namespace, timing each `write`.

    :returns: The write phase's figures, each write's nanoseconds, and each write's kind (0 new, 1 repeat, 2 near).
    """
    times, kinds = array("q"), array("b")
    stores: dict[str, ContentAddressedToolResultStore] = {}
    logical = 0
    last_edited: tuple[str, str] | None = None
    clock = time.perf_counter_ns
    began = time.perf_counter()
    step = max(1, workload.writes // 10)
    try:
        for number, item in enumerate(workload, 1):
            store = stores.get(item.namespace)
            if store is None:
                store = stores[item.namespace] = ContentAddressedToolResultStore(root, namespace=item.namespace)
            before = clock()
            store.write(key=item.key, content=item.content)
            times.append(clock() - before)
            kinds.append(1 if item.repeat else 2 if item.near else 0)
            logical += len(item.content.encode())
            if item.near:
                found = _EDITED.search(item.content)
                last_edited = (item.namespace, found.group()) if found else last_edited
            if number % step == 0:
                recent = percentile(times[-step:], 0.5) / 1e3
                progress(
                    f"wrote {number:,}/{workload.writes:,} ({time.perf_counter() - began:.0f} s; p50 {recent:.0f} µs)"
                )
    finally:
        for store in stores.values():
            store.close()
    figures = {
        "writes": len(times),
        "repeats": kinds.count(1),
        "near": kinds.count(2),
        "new": kinds.count(0) + kinds.count(2),
        "logical_bytes": logical,
        "wall_s": time.perf_counter() - began,
        "write_s": sum(times) / 1e9,
        "last_edited": last_edited,
    }
    return figures, times, kinds


def by_tenth(times: array[int], kinds: array[int]) -> list[dict[str, float]]:
    """:returns: Per tenth of the run, the write p50 of all writes, new content and repeats, and the p90, in µs."""
    rows = []
    count = len(times)
    for tenth in range(10):
        start, stop = tenth * count // 10, (tenth + 1) * count // 10
        part, part_kinds = times[start:stop], kinds[start:stop]
        rows.append(
            {
                "writes": float(stop - start),
                "p50_us": percentile(part, 0.5) / 1e3,
                "new_p50_us": percentile([t for t, k in zip(part, part_kinds, strict=True) if k != 1], 0.5) / 1e3,
                "repeat_p50_us": percentile([t for t, k in zip(part, part_kinds, strict=True) if k == 1], 0.5) / 1e3,
                "p90_us": percentile(part, 0.9) / 1e3,
            }
        )
    return rows


def footprint(root: Path) -> dict[str, Any]:
    """:returns: The index's bytes (`index.db` and `-wal`), `du` of the root, the blob files, and the blobs by place."""
    index = sum(path.stat().st_size for path in (root / "index.db", root / "index.db-wal") if path.exists())
    blob_files = [path for path in (root / "blobs").rglob("*") if path.is_file()] if (root / "blobs").exists() else []
    with closing(sqlite3.connect(f"file:{root / 'index.db'}?mode=ro", uri=True)) as connection:
        places = connection.execute(
            "SELECT stored_in, count(*), coalesce(sum(stored_size), 0) FROM blobs GROUP BY stored_in ORDER BY 1"
        ).fetchall()
        columns = {row[1] for row in connection.execute("PRAGMA table_info(blobs)")}
        # How each blob is encoded is a column of `blobs` in the plain schema; an index without it says nothing here.
        encodings = (
            connection.execute("SELECT encoding, count(*) FROM blobs GROUP BY encoding ORDER BY 1").fetchall()
            if "encoding" in columns
            else []
        )
    return {
        "index_bytes": index,
        "du_bytes": disk_usage(root).blocks_bytes,
        "blob_files": len(blob_files),
        "blob_file_bytes": sum(path.stat().st_size for path in blob_files),
        "blobs": {place: {"count": count, "stored_bytes": stored} for place, count, stored in places},
        "encodings": dict(encodings),
    }


def run_command(root: Path, *arguments: str, timeout: float) -> dict[str, Any]:
    """
    Run `python -m casstore <arguments> --root <root>` and time it.

    :returns: Its wall time in seconds (None when it timed out), exit status, and its output parsed as JSON when
        `--json` was passed.
    """
    command = [sys.executable, "-m", "casstore", *arguments]
    if arguments[0] != "--help":
        command += ["--root", str(root)]
    began = time.perf_counter()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return {"command": " ".join(["casstore", *arguments]), "seconds": None, "status": None, "json": None}
    seconds = time.perf_counter() - began
    parsed = json.loads(done.stdout) if "--json" in arguments and done.returncode in (0, 3) else None
    if done.returncode not in (0, 3):
        print(f"casstore {' '.join(arguments)} exited with {done.returncode}: {done.stderr.strip()}", file=sys.stderr)
    return {
        "command": " ".join(["casstore", *arguments]),
        "seconds": seconds,
        "status": done.returncode,
        "json": parsed,
    }


def age_older_half(root: Path) -> dict[str, Any]:
    """Date the older half of `writes` (by id) a day back, as sqlite3 would. :returns: How many, how long it took."""
    began = time.perf_counter()
    with closing(sqlite3.connect(root / "index.db", isolation_level=None)) as connection:
        (total,) = connection.execute("SELECT count(*) FROM write_rows").fetchone()
        connection.execute("BEGIN IMMEDIATE")
        connection.execute(
            "UPDATE write_rows SET written_at = strftime('%Y-%m-%d %H:%M:%f', written_at, '-1 day') "
            "WHERE id IN (SELECT id FROM write_rows ORDER BY id LIMIT ?)",
            (total // 2,),
        )
        connection.execute("COMMIT")
        (aged,) = connection.execute(
            "SELECT count(*) FROM writes WHERE written_at < strftime('%Y-%m-%d %H:%M:%f', 'now', '-12 hours')"
        ).fetchone()
    return {"writes_aged": aged, "seconds": time.perf_counter() - began}


def search(root: Path, namespace: str, query: str) -> dict[str, Any]:
    """Open the store with its search index and time one search tool call. :returns: Its time and what it found."""
    with ContentAddressedToolResultStore(root, namespace=namespace, search_index=True) as store:
        tool = make_search_tool(store)
        began = time.perf_counter()
        answer = tool.invoke(query=query)
        seconds = time.perf_counter() - began
        hits = len(store.search(terms=[query], limit=3).hits)
    return {"query": query, "namespace": namespace, "seconds": seconds, "hits": hits, "answer_chars": len(str(answer))}


def run(arguments: argparse.Namespace) -> dict[str, Any]:
    """Run the scale benchmark as `arguments` say. :returns: Its figures (also printed by `main`)."""

    def progress(message: str) -> None:
        if not arguments.quiet:
            print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)

    own = arguments.workdir is None
    workdir = Path(tempfile.mkdtemp(prefix="casstore-scale-")) if own else arguments.workdir
    root = workdir / "store"
    shutil.rmtree(root, ignore_errors=True)
    try:
        workload = ScaleWorkload(writes=arguments.writes, namespaces=arguments.namespaces, seed=arguments.seed)
        progress(f"writing {arguments.writes:,} results into {root} ...")
        written, times, kinds = write_workload(root, workload, progress)
        result: dict[str, Any] = {
            "meta": {
                "command": " ".join(["python -m benchmarks.scale", *sys.argv[1:]]),
                "cpus": os.cpu_count(),
                "sqlite": sqlite3.sqlite_version,
                "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
                "load_before": os.getloadavg()[0],
            },
            "writes": written,
            "tenths": by_tenth(times, kinds),
            "footprint": footprint(root),
            "commands": {},
        }
        commands = result["commands"]
        timeout = arguments.timeout
        progress("timing the commands ...")
        commands["startup"] = run_command(root, "--help", timeout=timeout)
        commands["stats"] = run_command(root, "stats", "--json", timeout=timeout)
        commands["log"] = run_command(root, "log", "--limit", "20", timeout=timeout)
        commands["verify"] = run_command(root, "verify", "--json", timeout=timeout)
        if not arguments.no_search:
            progress("building the search index ...")
            commands["search_index"] = run_command(root, "search-index", "--json", timeout=timeout)
            result["footprint_with_search"] = footprint(root)
            # Searches of an index that was not built would time nothing worth reporting.
            if commands["search_index"]["status"] == 0:
                namespace, token = written["last_edited"] or (workload.namespaces[0], _COMMON_WORD)
                result["searches"] = [search(root, namespace, token), search(root, namespace, _COMMON_WORD)]
        progress("gc of the older half ...")
        result["aging"] = age_older_half(root)
        commands["gc"] = run_command(root, "gc", "--older-than", "12h", "--grace", "0s", "--json", timeout=timeout)
        result["footprint_after_gc"] = footprint(root)
        result["meta"]["load_after"] = os.getloadavg()[0]
        return result
    finally:
        if own or not arguments.keep:
            shutil.rmtree(root, ignore_errors=True)
        if own:
            shutil.rmtree(workdir, ignore_errors=True)


def growth(result: dict[str, Any], field: str = "p50_us") -> float:
    """:returns: The last tenth's figure over the first's."""
    return float(result["tenths"][-1][field] / result["tenths"][0][field])


def _mb(count: float) -> str:
    return f"{count / 1e6:,.1f} MB"


def _count(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else "?"


def _seconds(entry: dict[str, Any] | None) -> str:
    if entry is None:
        return "not run"
    return "timed out" if entry["seconds"] is None else f"{entry['seconds']:.2f} s (exit {entry['status']})"


def report(result: dict[str, Any]) -> str:
    """:returns: The figures as markdown tables."""
    written, space, after = result["writes"], result["footprint"], result["footprint_after_gc"]
    count = written["writes"]
    commands = result["commands"]
    ratio = growth(result)
    met = "met" if ratio <= TARGET_GROWTH else "MISSED"
    lines = [
        "| figure | value |",
        "| --- | --- |",
        f"| writes | {count:,} ({written['repeats']:,} repeats, {written['new']:,} new of which {written['near']:,} "
        f"edits of earlier results), {_mb(written['logical_bytes'])} logical |",
        f"| write time | {written['write_s']:.1f} s in `write` ({written['wall_s']:.1f} s wall, generation included) |",
        f"| write p50, last tenth / first tenth | {ratio:.2f}x (new {growth(result, 'new_p50_us'):.2f}x, repeats "
        f"{growth(result, 'repeat_p50_us'):.2f}x; target <= {TARGET_GROWTH}: {met}) |",
        f"| index bytes per write | {space['index_bytes'] / max(count, 1):,.0f} B (`index.db` + `-wal` after close: "
        f"{_mb(space['index_bytes'])}) |",
        f"| `du` of the root | {_mb(space['du_bytes'])} ({space['du_bytes'] / max(count, 1):,.0f} B per write; "
        f"{space['blob_files']:,} blob files, {_mb(space['blob_file_bytes'])}) |",
        "| blobs by place | "
        + ", ".join(f"{place} {v['count']:,} ({_mb(v['stored_bytes'])})" for place, v in space["blobs"].items())
        + " |",
    ]
    if space["encodings"]:
        encodings = ", ".join(f"{name} {count:,}" for name, count in space["encodings"].items())
        lines.append(f"| blobs by encoding | {encodings} |")
    lines.append(
        f"| `python -m casstore --help` (start-up, in every command below) | {_seconds(commands['startup'])} |"
    )
    for name, label in (("stats", "stats"), ("log", "log --limit 20"), ("verify", "verify")):
        lines.append(f"| `casstore {label}` | {_seconds(commands[name])} |")
    if "search_index" in commands:
        built = result["footprint_with_search"]["index_bytes"]
        lines.append(
            f"| `casstore search-index` (index every result) | {_seconds(commands['search_index'])}; index then "
            f"{_mb(built)} |"
        )
        for found in result.get("searches", []):
            lines.append(
                f"| search tool, `{found['query']}` | {found['seconds'] * 1e3:.1f} ms ({found['hits']} hits in "
                f"{found['namespace']}) |"
            )
    aging = result["aging"]
    gc_report = commands["gc"]["json"] or {}
    lines += [
        f"| `casstore gc --older-than 12h --grace 0s` ({aging['writes_aged']:,} writes dated a day back in "
        f"{aging['seconds']:.1f} s) | {_seconds(commands['gc'])}: {_count(gc_report.get('writes_forgotten'))} writes "
        f"forgotten, {_count(gc_report.get('blobs_deleted'))} blobs deleted |",
        f"| after gc: index, `du` (search index included when built) | {_mb(after['index_bytes'])}, "
        f"{_mb(after['du_bytes'])} |",
        "",
        "| tenth | write p50 | new p50 | repeat p50 | p90 |",
        "| ---: | ---: | ---: | ---: | ---: |",
        *(
            f"| {number} | {row['p50_us']:.1f} µs | {row['new_p50_us']:.1f} µs | {row['repeat_p50_us']:.1f} µs | "
            f"{row['p90_us']:.1f} µs |"
            for number, row in enumerate(result["tenths"], 1)
        ),
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """The command line: run, print the tables, write the JSON. :returns: The exit status."""
    parser = _parser()
    arguments = parser.parse_args(argv)
    if arguments.writes < 10 or arguments.namespaces < 1 or arguments.timeout <= 0:
        parser.error("--writes must be at least 10, --namespaces at least 1, and --timeout positive")
    result = run(arguments)
    print(report(result))
    path = arguments.json or Path(__file__).resolve().parent / "results" / f"scale-{arguments.writes}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2, default=str))
    print(f"\nJSON: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
