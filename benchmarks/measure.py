"""
Timing the two stores on the same trace: writes, reads, bytes on disk, and the floors (`benchmarks.floors`) beside them.

Both stores start from fresh roots in every repetition and write the same slices of the trace with the same keys
(`{step}_{tool}_{call_id}.txt`, as Haystack's offload hook makes them). Slices ("chunks") alternate which store goes
first, so a burst of slow file creation or a page-cache flush lands on both alike. Every write and read is timed on
its own with `time.perf_counter_ns`; each read is checked to return exactly what was written.

The floor of a duplicate write is measured in the same run, on the same duplicate contents: encode the text, hash it
with BLAKE3, and insert one row into a WAL-mode SQLite table with `synchronous=NORMAL`, committing it. No store that
records every write in SQLite can do less. The floor of a new write adds what storing new content must do: compress
it with zstd (level 3, a reused context) and put the frame in that committed row.
"""

from __future__ import annotations

import gc
import os
import random
import shutil
import sqlite3
import stat
import time
from array import array
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import blake3
from haystack.hooks.tool_result_offloading import FileSystemToolResultStore

from benchmarks.floors import Floor
from benchmarks.trace import PackedTrace
from casstore import ContentAddressedToolResultStore

CASSTORE = "casstore"
BASELINE = "baseline"
PLAIN = "casstore_learn_off"
"""The same store with `learn=False` (plain zstd frames), in the same run: what the learned encodings cost."""
STORES = (CASSTORE, BASELINE, PLAIN)


class _Store(Protocol):
    def write(self, *, key: str, content: str | bytes) -> str: ...

    def read(self, reference: str) -> str | bytes: ...


def open_store(name: str, root: Path, *, inline_max: int | None = None) -> _Store:
    """
    Open a fresh store of either kind at `root`.

    :param name: `CASSTORE` or `BASELINE`.
    :param root: An empty folder (created if missing).
    :param inline_max: casstore's `inline_max`; its default when `None`.
    :returns: The store.
    """
    root.mkdir(parents=True, exist_ok=True)
    if name in (CASSTORE, PLAIN):
        learn = name == CASSTORE
        if inline_max is None:
            return ContentAddressedToolResultStore(root, learn=learn)
        return ContentAddressedToolResultStore(root, inline_max=inline_max, learn=learn)
    if name == BASELINE:
        return FileSystemToolResultStore(root)
    raise ValueError(f"Unknown store {name!r}.")


def close_store(store: object) -> None:
    """Close a store if it has anything to close (Haystack's file store has not)."""
    close: Callable[[], None] | None = getattr(store, "close", None)
    if close is not None:
        close()


@dataclass(frozen=True, slots=True)
class DiskUsage:
    """What a store left on disk: allocated blocks (as `du` counts them), file bytes, and how many files."""

    blocks_bytes: int
    file_bytes: int
    files: int
    directories: int

    def to_dict(self) -> dict[str, int]:
        """:returns: The figures as JSON values."""
        return {
            "blocks_bytes": self.blocks_bytes,
            "file_bytes": self.file_bytes,
            "files": self.files,
            "directories": self.directories,
        }


def disk_usage(root: Path) -> DiskUsage:
    """
    Sum `st_blocks * 512` and `st_size` over every file and folder under `root` (`index.db`, `-wal`, `-shm` included).

    :param root: A store's root.
    :returns: The usage; folders count toward blocks but not toward file bytes.
    """
    blocks = size = files = directories = 0
    for folder, subfolders, names in os.walk(root):
        for name in (*subfolders, *names):
            status = os.lstat(os.path.join(folder, name))
            blocks += status.st_blocks * 512
            if stat.S_ISDIR(status.st_mode):
                directories += 1
            else:
                files += 1
                size += status.st_size
    return DiskUsage(blocks_bytes=blocks, file_bytes=size, files=files, directories=directories)


@dataclass(slots=True)
class StoreRepetition:
    """One store's raw measurements in one repetition."""

    write_ns: array[int] = field(default_factory=lambda: array("q"))
    read_ns: array[int] = field(default_factory=lambda: array("q"))
    chunk_ns: list[int] = field(default_factory=list)
    disk_open: DiskUsage | None = None
    disk_closed: DiskUsage | None = None
    read_mismatches: int = 0


@dataclass(slots=True)
class Repetition:
    """Both stores' measurements in one repetition, and the duplicate floor's."""

    index: int
    stores: dict[str, StoreRepetition]
    floor_ns: array[int]
    floor_indices: array[int]
    floor_new_ns: array[int]
    floor_new_indices: array[int]
    floor_read_ns: array[int]
    frame_bytes: int
    read_indices: list[int]
    learned: dict[str, float] = field(default_factory=dict)


def percentile(values: Sequence[int] | array[int], fraction: float) -> float:
    """:returns: The value below which `fraction` of `values` lie (nearest rank; NaN when empty)."""
    if len(values) == 0:
        return float("nan")
    ordered = sorted(values)
    return float(ordered[min(len(ordered) - 1, int(fraction * len(ordered)))])


def summarize(repetition: Repetition, trace: PackedTrace) -> dict[str, dict[str, float]]:
    """
    Reduce one repetition to its figures, per store (and `floor`).

    :returns: `{store: {figure: value}}`; times in microseconds (whole-trace time in seconds), sizes in bytes.
    """
    new = [index for index in range(len(trace)) if trace.is_new[index]]
    duplicate = [index for index in range(len(trace)) if not trace.is_new[index]]
    tenth = max(1, len(trace) // 10)
    first, last = range(tenth), range(len(trace) - tenth, len(trace))
    figures: dict[str, dict[str, float]] = {}
    for name, measured in repetition.stores.items():
        ns = measured.write_ns
        values: dict[str, float] = {"write_total_s": sum(ns) / 1e9}
        for label, indices in (("new", new), ("duplicate", duplicate)):
            picked = [ns[index] for index in indices]
            for fraction in (0.5, 0.9, 0.99):
                values[f"write_{label}_p{round(fraction * 100)}_us"] = percentile(picked, fraction) / 1e3
        values["write_all_p50_us"] = percentile(ns, 0.5) / 1e3
        for label, selection in (("all", None), ("new", True), ("duplicate", False)):
            early = [ns[i] for i in first if selection is None or trace.is_new[i] == selection]
            late = [ns[i] for i in last if selection is None or trace.is_new[i] == selection]
            values[f"first10_{label}_p50_us"] = percentile(early, 0.5) / 1e3
            values[f"last10_{label}_p50_us"] = percentile(late, 0.5) / 1e3
            values[f"growth_{label}"] = values[f"last10_{label}_p50_us"] / values[f"first10_{label}_p50_us"]
        values["read_p50_us"] = percentile(measured.read_ns, 0.5) / 1e3
        values["read_p90_us"] = percentile(measured.read_ns, 0.9) / 1e3
        values["read_mismatches"] = float(measured.read_mismatches)
        values["reads_checked"] = float(len(measured.read_ns))
        for state, usage in (("open", measured.disk_open), ("closed", measured.disk_closed)):
            if usage is not None:
                values[f"du_{state}_bytes"] = float(usage.blocks_bytes)
                values[f"file_bytes_{state}"] = float(usage.file_bytes)
                values[f"files_{state}"] = float(usage.files)
                values[f"directories_{state}"] = float(usage.directories)
        figures[name] = values
    floor = repetition.floor_ns
    figures["floor"] = {
        "write_duplicate_p50_us": percentile(floor, 0.5) / 1e3,
        "write_duplicate_p90_us": percentile(floor, 0.9) / 1e3,
        "write_new_p50_us": percentile(repetition.floor_new_ns, 0.5) / 1e3,
        "write_new_p90_us": percentile(repetition.floor_new_ns, 0.9) / 1e3,
        "write_total_s": (sum(floor) + sum(repetition.floor_new_ns)) / 1e9,
    }
    # The same writes, timed in the stores: each floor is compared with exactly the writes it was measured on.
    for name, measured in repetition.stores.items():
        picked = [measured.write_ns[index] for index in repetition.floor_indices]
        figures[name]["write_floor_items_p50_us"] = percentile(picked, 0.5) / 1e3
        picked = [measured.write_ns[index] for index in repetition.floor_new_indices]
        figures[name]["write_floor_new_items_p50_us"] = percentile(picked, 0.5) / 1e3
    # The floors' own growth, on the same items, timed right after the stores in each chunk: what the machine's load
    # and the trace's mix do to the first and last 10% alike. A store's growth divided by it is what is left of the
    # store's own (its index growing), which a change of load between the two ends of a long run no longer moves.
    floor_times = dict(zip(repetition.floor_indices, repetition.floor_ns, strict=True))
    floor_times.update(zip(repetition.floor_new_indices, repetition.floor_new_ns, strict=True))
    for label, selection in (("all", None), ("new", True), ("duplicate", False)):
        early = [floor_times[i] for i in first if selection is None or trace.is_new[i] == selection]
        late = [floor_times[i] for i in last if selection is None or trace.is_new[i] == selection]
        figures["floor"][f"growth_{label}"] = percentile(late, 0.5) / percentile(early, 0.5)
        for name in repetition.stores:
            figures[name][f"growth_{label}_over_floor"] = (
                figures[name][f"growth_{label}"] / figures["floor"][f"growth_{label}"]
            )
    figures["learned"] = dict(repetition.learned)
    for key, figure in (
        ("read_p50_over_learn_off", "read_p50_us"),
        ("read_p90_over_learn_off", "read_p90_us"),
        ("write_new_p50_over_learn_off", "write_new_p50_us"),
        ("write_new_p99_over_learn_off", "write_new_p99_us"),
    ):
        figures["learned"][key] = figures[CASSTORE][figure] / figures[PLAIN][figure]
    figures["learned"]["du_over_floor"] = figures[CASSTORE]["du_closed_bytes"] / repetition.learned["frame_bytes"]
    figures["learned"]["du_over_baseline"] = figures[CASSTORE]["du_closed_bytes"] / figures[BASELINE]["du_closed_bytes"]
    figures["learned"]["learn_off_du_over_baseline"] = (
        figures[PLAIN]["du_closed_bytes"] / figures[BASELINE]["du_closed_bytes"]
    )
    figures["floor"]["read_p50_us"] = percentile(repetition.floor_read_ns, 0.5) / 1e3
    figures["floor"]["frame_bytes"] = float(repetition.frame_bytes)
    ratios = [
        casstore / baseline
        for casstore, baseline in zip(
            repetition.stores[CASSTORE].chunk_ns, repetition.stores[BASELINE].chunk_ns, strict=True
        )
        if baseline > 0
    ]
    figures["chunks"] = {
        "count": float(len(ratios)),
        "ratio_p10": percentile([round(ratio * 1e6) for ratio in ratios], 0.1) / 1e6,
        "ratio_p50": percentile([round(ratio * 1e6) for ratio in ratios], 0.5) / 1e6,
        "ratio_p90": percentile([round(ratio * 1e6) for ratio in ratios], 0.9) / 1e6,
    }
    return figures


def chunks(total: int, size: int) -> Iterator[tuple[int, int, int]]:
    """:returns: `(number, start, stop)` of each slice of `size` writes out of `total`, in order."""
    for number, start in enumerate(range(0, total, size)):
        yield number, start, min(total, start + size)


def timed_writes(
    store: _Store, items: list[tuple[str, str | bytes]], into: array[int], start: int, refs: list[str]
) -> int:
    """
    Write `items` into `store`, timing each write into `into[start + i]` and keeping its reference in `refs`.

    :returns: The whole slice's nanoseconds.
    """
    clock = time.perf_counter_ns
    write = store.write
    began = clock()
    for offset, (key, content) in enumerate(items):
        before = clock()
        refs[start + offset] = write(key=key, content=content)
        into[start + offset] = clock() - before
    return clock() - began


def _same(expected: str | bytes, got: str | bytes) -> bool:
    if type(expected) is type(got):
        return expected == got
    # Haystack's file store returns bytes that happen to be UTF-8 as text.
    as_bytes = got.encode("utf-8") if isinstance(got, str) else got
    return as_bytes == (expected.encode("utf-8") if isinstance(expected, str) else expected)


def run_repetition(
    trace: PackedTrace,
    workdir: Path,
    *,
    index: int,
    chunk_writes: int,
    reads: int,
    seed: int,
    inline_max: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> Repetition:
    """
    Write the whole trace into a fresh store of each kind, alternating chunks, then time random reads.

    :param trace: The packed trace.
    :param workdir: Where the stores' roots go (removed afterwards).
    :param index: The repetition's number: it decides which store starts and which references are read.
    :param chunk_writes: Writes per chunk; the stores take turns chunk by chunk.
    :param reads: How many random references to read back from each store.
    :param seed: Seeds the choice of references to read.
    :param inline_max: casstore's `inline_max`; its default when `None`.
    :param progress: Called with a short status line now and then.
    :returns: The raw measurements.
    """
    total = len(trace)
    roots = {name: workdir / f"rep{index}-{name}" for name in STORES}
    for root in roots.values():
        shutil.rmtree(root, ignore_errors=True)
    stores = {name: open_store(name, roots[name], inline_max=inline_max) for name in STORES}
    floor = Floor(workdir / f"rep{index}-floor" / "floor.db")
    results = {name: StoreRepetition(write_ns=array("q", bytes(8 * total))) for name in STORES}
    references = {name: [""] * total for name in STORES}
    floor_ns, floor_indices, floor_new_ns, floor_new_indices = array("q"), array("q"), array("q"), array("q")
    # Start from a clean slate: the previous repetition's deleted files and the pack are flushed, not pending.
    os.sync()
    try:
        for number, start, stop in chunks(total, chunk_writes):
            items = trace.load(start, stop)
            order = STORES if (number + index) % 2 == 0 else STORES[::-1]
            gc.collect()
            for name in order:
                elapsed = timed_writes(stores[name], items, results[name].write_ns, start, references[name])
                results[name].chunk_ns.append(elapsed)
            for offset, (key, content) in enumerate(items):
                new = trace.is_new[start + offset]
                before = time.perf_counter_ns()
                if new:
                    floor.write_new(key=key, content=content)
                else:
                    floor.write(key=key, content=content)
                elapsed = time.perf_counter_ns() - before
                (floor_new_ns if new else floor_ns).append(elapsed)
                (floor_new_indices if new else floor_indices).append(start + offset)
            if progress is not None and number % 20 == 0:
                progress(f"repetition {index + 1}: wrote {stop}/{total}")
        for name in STORES:
            results[name].disk_open = disk_usage(roots[name])
        read_indices = random.Random(f"reads/{seed}/{index}").choices(range(total), k=min(reads, total))
        floor_read_ns = _timed_reads(trace, stores, references, results, read_indices, index=index, floor=floor)
        frame_bytes = floor.frame_bytes
    finally:
        floor.close()
        for store in stores.values():
            close_store(store)
    for name in STORES:
        results[name].disk_closed = disk_usage(roots[name])
    learned = learned_figures(roots[CASSTORE])
    for name in STORES:
        shutil.rmtree(roots[name], ignore_errors=True)
    shutil.rmtree(workdir / f"rep{index}-floor", ignore_errors=True)
    return Repetition(
        index=index,
        stores=results,
        floor_ns=floor_ns,
        floor_indices=floor_indices,
        floor_new_ns=floor_new_ns,
        floor_new_indices=floor_new_indices,
        floor_read_ns=floor_read_ns,
        frame_bytes=frame_bytes,
        read_indices=read_indices,
        learned=learned,
    )


def learned_figures(root: Path) -> dict[str, float]:
    """
    What the learned encodings stored in one casstore root (closed): the frames' bytes, and the blobs by encoding.

    The disk floor of the learned encodings is the frames alone (`frame_bytes`: every blob's stored bytes and the
    trained dictionaries', with no index, no history and no block rounding): what the same encodings of the same
    unique content need with no index at all.
    """
    with closing(sqlite3.connect(f"file:{root / 'index.db'}?mode=ro", uri=True)) as connection:
        (frame_bytes,) = connection.execute("SELECT coalesce(sum(stored_size), 0) FROM blobs").fetchone()
        figures = {"frame_bytes": float(frame_bytes)}
        # The plain schema keeps a dictionary's bytes in its row, and each blob's encoding in `blobs`; an index
        # without those columns keeps its dictionaries as blobs, already counted above.
        if "data" in _columns(connection, "dictionaries"):
            (dictionary_bytes,) = connection.execute(
                "SELECT coalesce(sum(length(data)), 0) FROM dictionaries"
            ).fetchone()
            figures["frame_bytes"] += dictionary_bytes
        if "encoding" in _columns(connection, "blobs"):
            for encoding, count in connection.execute("SELECT encoding, count(*) FROM blobs GROUP BY encoding"):
                figures[f"blobs_encoded_{encoding}"] = float(count)
    return figures


def _columns(connection: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in connection.execute(f"PRAGMA table_info({table})")}


def _timed_reads(
    trace: PackedTrace,
    stores: dict[str, _Store],
    references: dict[str, list[str]],
    results: dict[str, StoreRepetition],
    read_indices: list[int],
    *,
    index: int,
    floor: Floor,
) -> array[int]:
    """
    Read the chosen results back from each store, alternating in chunks, checking each; then time the read floor.

    :returns: The read floor's times, one per read.
    """
    floor_read_ns: array[int] = array("q")
    for number, start, stop in chunks(len(read_indices), 200):
        picked = read_indices[start:stop]
        expected = [trace.load(position, position + 1)[0][1] for position in picked]
        order = STORES if (number + index) % 2 == 0 else STORES[::-1]
        for name in order:
            read = stores[name].read
            measured = results[name]
            for position, content in zip(picked, expected, strict=True):
                before = time.perf_counter_ns()
                got = read(references[name][position])
                measured.read_ns.append(time.perf_counter_ns() - before)
                if not _same(content, got):
                    measured.read_mismatches += 1
        for content in expected:
            data = content.encode("utf-8") if isinstance(content, str) else content
            frame, digest = floor.frame(content), blake3.blake3(data).hexdigest()
            before = time.perf_counter_ns()
            floor.read(frame, digest=digest, is_text=isinstance(content, str))
            floor_read_ns.append(time.perf_counter_ns() - before)
    return floor_read_ns


def chunk_series(repetition: Repetition) -> dict[str, list[float]]:
    """:returns: Each store's write time per chunk, in milliseconds, in trace order (to see swings over time)."""
    return {name: [round(ns / 1e6, 3) for ns in measured.chunk_ns] for name, measured in repetition.stores.items()}
