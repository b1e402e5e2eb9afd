"""
The `inline_max` sweep: the whole trace written into casstore once per value, to choose the default by measurement.
"""

from __future__ import annotations

import gc
import shutil
from array import array
from collections.abc import Callable, Sequence
from pathlib import Path

from benchmarks.measure import CASSTORE, chunks, close_store, disk_usage, open_store, percentile, timed_writes
from benchmarks.report import median
from benchmarks.trace import PackedTrace


def inline_sweep(
    trace: PackedTrace,
    workdir: Path,
    *,
    values: Sequence[int],
    repetitions: int,
    chunk_writes: int,
    progress: Callable[[str], None] | None = None,
) -> list[dict[str, float]]:
    """
    Write the whole trace into casstore once per `inline_max` value (and repetition): time, bytes on disk, files.

    Values take turns chunk by chunk, like the two stores in `run_repetition`.

    :returns: One row per value: `inline_max`, median whole-trace write seconds, per-write p50 (new and duplicate),
        `du` bytes and file count after closing.
    """
    rows: dict[int, dict[str, list[float]]] = {value: {} for value in values}
    total = len(trace)
    for repetition in range(repetitions):
        roots = {value: workdir / f"sweep{repetition}-{value}" for value in values}
        for root in roots.values():
            shutil.rmtree(root, ignore_errors=True)
        stores = {value: open_store(CASSTORE, roots[value], inline_max=value) for value in values}
        times = {value: array("q", bytes(8 * total)) for value in values}
        references = [""] * total
        try:
            for number, start, stop in chunks(total, chunk_writes):
                items = trace.load(start, stop)
                shift = (number + repetition) % len(values)
                gc.collect()
                for value in [*values[shift:], *values[:shift]]:
                    timed_writes(stores[value], items, times[value], start, references)
        finally:
            for store in stores.values():
                close_store(store)
        for value in values:
            usage = disk_usage(roots[value])
            ns = times[value]
            row = rows[value]
            row.setdefault("write_total_s", []).append(sum(ns) / 1e9)
            new = [ns[i] for i in range(total) if trace.is_new[i]]
            duplicate = [ns[i] for i in range(total) if not trace.is_new[i]]
            row.setdefault("write_new_p50_us", []).append(percentile(new, 0.5) / 1e3)
            row.setdefault("write_duplicate_p50_us", []).append(percentile(duplicate, 0.5) / 1e3)
            row.setdefault("du_bytes", []).append(float(usage.blocks_bytes))
            row.setdefault("files", []).append(float(usage.files))
            shutil.rmtree(roots[value], ignore_errors=True)
        if progress is not None:
            progress(f"inline sweep: repetition {repetition + 1}/{repetitions} done")
    return [
        {"inline_max": float(value), **{name: median(samples) for name, samples in rows[value].items()}}
        for value in values
    ]
