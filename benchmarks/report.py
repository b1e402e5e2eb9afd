"""
Turning repetitions into figures: medians, casstore / baseline ratios with their range, the targets, and the table.

Every figure is the median over repetitions of each store's value; its ratio is the median of the per-repetition
ratios (each repetition's two stores ran side by side over the same chunks), shown with the lowest and highest.
"""

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.measure import BASELINE, CASSTORE, PLAIN


@dataclass(frozen=True, slots=True)
class Figure:
    """One row of the table: a measured quantity, how to show it, and its target if it has one."""

    key: str
    label: str
    unit: str
    target: float | None = None
    target_text: str = ""


# Rows of the main table, in order; `target` bounds the ratio casstore / baseline. The targets are issue 29's
# performance guard (docs/performance.md): disk here; the whole trace's throughput in `targets`.
FIGURES: tuple[Figure, ...] = (
    Figure("write_total_s", "whole-trace write time", "s", target_text="throughput >= 1.0x (see below)"),
    Figure("write_new_p50_us", "write, new content, p50", "us"),
    Figure("write_new_p90_us", "write, new content, p90", "us"),
    Figure("write_new_p99_us", "write, new content, p99", "us"),
    Figure("write_duplicate_p50_us", "write, duplicate, p50", "us"),
    Figure("write_duplicate_p90_us", "write, duplicate, p90", "us"),
    Figure("write_duplicate_p99_us", "write, duplicate, p99", "us"),
    Figure("read_p50_us", "read, p50 (checked equal)", "us"),
    Figure("read_p90_us", "read, p90 (checked equal)", "us"),
    Figure("du_open_bytes", "du, store open (WAL incl.)", "bytes"),
    Figure("du_closed_bytes", "du, store closed", "bytes", 0.1, "<= 0.10x"),
    Figure("file_bytes_closed", "file bytes, store closed", "bytes"),
    Figure("files_closed", "files created", "count"),
    Figure("directories_closed", "folders created", "count"),
)


def median(values: Sequence[float]) -> float:
    """:returns: The median of `values` (NaN when empty)."""
    ordered = sorted(value for value in values if not math.isnan(value))
    if not ordered:
        return float("nan")
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def _ratio(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator else float("nan")


def aggregate(repetitions: list[dict[str, dict[str, float]]]) -> dict[str, dict[str, float]]:
    """
    :param repetitions: `summarize` output, one per repetition.
    :returns: Per figure key: `casstore`, `baseline` (medians), `ratio`, `ratio_min`, `ratio_max`.
    """
    keys = sorted(set(repetitions[0][CASSTORE]) & set(repetitions[0][BASELINE]))
    figures: dict[str, dict[str, float]] = {}
    for key in keys:
        ratios = [_ratio(rep[CASSTORE][key], rep[BASELINE][key]) for rep in repetitions]
        finite = [ratio for ratio in ratios if not math.isnan(ratio)]
        figures[key] = {
            CASSTORE: median([rep[CASSTORE][key] for rep in repetitions]),
            BASELINE: median([rep[BASELINE][key] for rep in repetitions]),
            "ratio": median(finite),
            "ratio_min": min(finite) if finite else float("nan"),
            "ratio_max": max(finite) if finite else float("nan"),
        }
    return figures


def targets(result: dict[str, Any]) -> list[dict[str, Any]]:
    """
    Check every target of the issue against a run's aggregated figures.

    :returns: One entry per target: `name`, `value`, `target`, `met` (None where the run cannot tell).
    """
    figures = result["figures"]
    checks: list[dict[str, Any]] = []
    for figure in FIGURES:
        if figure.target is None or figure.key not in figures:
            continue
        value = figures[figure.key]["ratio"]
        checks.append(
            {
                "name": figure.label,
                "value": value,
                "target": figure.target_text,
                "unit": "x",
                "met": value <= figure.target,
            }
        )
    # Throughput, writes per second: per repetition the baseline's whole-trace time over casstore's. Its median must be
    # at least 1.0 and no repetition's below 0.9 (the baseline's speed swings with the kernel's write-back, so one
    # repetition alone decides nothing).
    throughputs = [
        _ratio(rep[BASELINE]["write_total_s"], rep[CASSTORE]["write_total_s"]) for rep in result.get("repetitions", [])
    ]
    if throughputs:
        for name, value, least in (
            ("whole-trace throughput, casstore / baseline (median of repetitions)", median(throughputs), 1.0),
            ("whole-trace throughput, casstore / baseline (slowest repetition)", min(throughputs), 0.9),
        ):
            checks.append(
                {"name": name, "value": value, "target": f">= {least:.1f}x", "unit": "x", "met": value >= least}
            )
    learned = result.get("learned")
    if learned:
        for name, value, target, limit in (
            ("du, store closed / learned-encodings floor", learned["du_over_floor"], "<= 1.3x", 1.3),
            ("read p50 / same store with learn=False", learned["read_p50_over_learn_off"], "<= 1.15x", 1.15),
            (
                "write, new content, p50 / same store with learn=False",
                learned["write_new_p50_over_learn_off"],
                "<= 1.25x",
                1.25,
            ),
        ):
            checks.append({"name": name, "value": value, "target": target, "unit": "x", "met": bool(value <= limit)})
    growth = result["growth"]
    checks.append(
        {
            "name": "last-10% / first-10% per-write p50 (casstore)",
            "value": growth["casstore"]["worst"],
            "target": "<= 1.3 (scale trace)",
            "unit": "x",
            "met": bool(growth["casstore"]["worst"] <= 1.3) if result["meta"]["size"] == "scale" else None,
        }
    )
    memory = result.get("memory")
    if memory:
        difference = memory["casstore"]["peak_rss_bytes"] - memory["baseline"]["peak_rss_bytes"]
        checks.append(
            {
                "name": "peak memory, casstore - baseline",
                "value": difference / 1e6,
                "target": "<= 50 MB",
                "unit": "MB",
                "met": bool(difference <= 50e6),
            }
        )
    return checks


def _show(value: float, unit: str) -> str:
    if math.isnan(value):
        return "-"
    if unit == "bytes":
        return f"{value / 1e6:,.2f} MB"
    if unit == "count":
        return f"{value:,.0f}"
    if unit == "s":
        return f"{value:.3f} s"
    if unit == "us":
        return f"{value:,.1f} µs" if value < 1000 else f"{value / 1000:,.2f} ms"
    return f"{value:.3g}"


def _range(entry: dict[str, float]) -> str:
    if math.isnan(entry["ratio"]):
        return "-"
    return f"{entry['ratio']:.3f}x [{entry['ratio_min']:.3f}–{entry['ratio_max']:.3f}]"


def table(result: dict[str, Any]) -> str:
    """
    Render a run as markdown: the trace, the main table, targets, then floor, growth, memory and compactor.

    :returns: The text to print (and to paste into the README).
    """
    meta, trace, figures = result["meta"], result["trace"], result["figures"]
    lines = [
        f"Trace `{meta['size']}` (seed {meta['seed']}, fingerprint `{meta['fingerprint']}`): {trace['results']:,} "
        f"results, {trace['writes']:,} writes, {trace['logical_bytes'] / 1e6:,.1f} MB logical, "
        f"{trace['unique_bytes'] / 1e6:,.1f} MB unique, duplicate ratio {trace['duplicate_ratio']:.1%} "
        f"({trace['duplicate_writes']:,} duplicate writes); write size p50 {trace['write_size_bytes']['p50']:,} B, "
        f"p90 {trace['write_size_bytes']['p90']:,} B, p99 {trace['write_size_bytes']['p99']:,} B, "
        f"max {trace['write_size_bytes']['max']:,} B.",
        f"{meta['repetitions']} repetition(s), chunks of {meta['chunk_writes']} writes alternating, "
        f"{meta['reads']} reads per store and repetition; {meta['cpus']} CPUs, {meta['filesystem']} at "
        f"`{meta['workdir']}`; casstore inline_max={meta['inline_max']}.",
        "",
        "| figure | casstore | FileSystemToolResultStore | casstore / baseline (median [min–max]) | target |",
        "| --- | ---: | ---: | ---: | --- |",
    ]
    for figure in FIGURES:
        entry = figures.get(figure.key)
        if entry is None:
            continue
        lines.append(
            f"| {figure.label} | {_show(entry[CASSTORE], figure.unit)} | {_show(entry[BASELINE], figure.unit)} | "
            f"{_range(entry)} | {figure.target_text} |"
        )
    memory = result.get("memory")
    if memory:
        lines.append(
            f"| peak RSS (child process) | {_show(memory['casstore']['peak_rss_bytes'], 'bytes')} | "
            f"{_show(memory['baseline']['peak_rss_bytes'], 'bytes')} | "
            f"{memory['casstore']['peak_rss_bytes'] / memory['baseline']['peak_rss_bytes']:.3f}x | within 50 MB |"
        )
        lines.append(
            f"| RSS growth while writing | {_show(memory['casstore']['growth_bytes'], 'bytes')} | "
            f"{_show(memory['baseline']['growth_bytes'], 'bytes')} | | |"
        )
    floor, chunks, growth = result["floor"], result["chunks"], result["growth"]
    lines += [
        "",
        f"Duplicate floor (encode + BLAKE3 + one SQLite INSERT and COMMIT, WAL, synchronous=NORMAL), same duplicates: "
        f"p50 {floor['floor_p50_us']:.1f} µs; casstore {floor['casstore_p50_us']:.1f} µs "
        f"= {floor['casstore_over_floor']:.2f}x the floor; baseline {floor['baseline_p50_us']:.1f} µs, "
        f"so no store that commits each write to SQLite can go below {floor['floor_over_baseline']:.3f}x here.",
        f"New-content floor (the same + zstd level 3 and the frame in that row), same new writes: "
        f"p50 {floor['new_floor_p50_us']:.1f} µs; casstore {floor['new_casstore_p50_us']:.1f} µs; baseline "
        f"{floor['new_baseline_p50_us']:.1f} µs, so new content cannot go below "
        f"{floor['new_floor_over_baseline']:.3f}x here.",
        f"Whole-trace floor (each write at its floor above, summed): {floor['whole_trace_floor_s']:.3f} s, "
        f"{floor['whole_trace_floor_over_baseline']:.3f}x the baseline's whole-trace time.",
        f"Read floor (zstd decompression + BLAKE3 check + decode of the same results' frames, from memory: no file, no "
        f"index, no lock): p50 {floor['read_floor_p50_us']:.1f} µs, {floor['read_floor_over_baseline']:.3f}x the "
        f"baseline's read.",
        f"Disk floor: the compressed frames of the unique content alone (no index, no history, no block rounding) take "
        f"{floor['frame_bytes'] / 1e6:.2f} MB, {floor['frames_over_baseline_du']:.3f}x the baseline's du.",
        f"Per-chunk write-time ratio casstore / baseline over {chunks['count']:.0f} chunks (median of repetitions): "
        f"p10 {chunks['ratio_p10']:.3f}x, p50 {chunks['ratio_p50']:.3f}x, p90 {chunks['ratio_p90']:.3f}x.",
        "Per-write p50, first 10% -> last 10% of the trace: "
        + "; ".join(
            f"{name}: " + ", ".join(f"{label} {growth[name][label]:.2f}x" for label in ("all", "new", "duplicate"))
            for name in (CASSTORE, BASELINE, PLAIN)
            if name in growth
        )
        + ".",
    ]
    if "floor" in growth:
        lines.append(
            "The floors' own per-write p50 on the same items, first 10% -> last 10% (the machine's load and the "
            "trace's mix over the run): "
            + ", ".join(f"{label} {growth['floor'][label]:.2f}x" for label in ("all", "new", "duplicate"))
            + "; each store's growth divided by it: "
            + "; ".join(
                f"{name}: "
                + ", ".join(
                    f"{label} {growth[name][f'{label}_over_floor']:.2f}x" for label in ("all", "new", "duplicate")
                )
                for name in (CASSTORE, BASELINE, PLAIN)
                if "all_over_floor" in growth.get(name, {})
            )
            + "."
        )
    learned = result.get("learned")
    if learned:
        lines += ["", _learned_text(learned, result["learn_off"], figures)]
    lines += [
        "",
        "| target | measured | wanted | met |",
        "| --- | ---: | --- | --- |",
    ]
    for check in result["targets"]:
        met = "n/a" if check["met"] is None else ("yes" if check["met"] else "**no**")
        value = f"{check['value']:.1f} MB" if check["unit"] == "MB" else f"{check['value']:.3f}x"
        lines.append(f"| {check['name']} | {value} | {check['target']} | {met} |")
    compactor = result.get("compactor")
    if compactor:
        lines += ["", _compactor_table(compactor)]
    return "\n".join(lines)


def _learned_text(learned: dict[str, float], learn_off: dict[str, float], figures: dict[str, Any]) -> str:
    baseline_du = figures["du_closed_bytes"][BASELINE]
    lines = [
        "Learned encodings (casstore, learn=True) beside the same store with learn=False, same run (median of "
        "repetitions):",
        "",
        "| figure | learn=True | learn=False | ratio |",
        "| --- | ---: | ---: | ---: |",
        f"| du, store closed | {_show(figures['du_closed_bytes'][CASSTORE], 'bytes')} | "
        f"{_show(learn_off['du_closed_bytes'], 'bytes')} | "
        f"{learned['du_over_baseline']:.3f}x / {learned['learn_off_du_over_baseline']:.3f}x of the baseline's "
        f"{_show(baseline_du, 'bytes')} |",
        f"| read, p50 | {_show(figures['read_p50_us'][CASSTORE], 'us')} | {_show(learn_off['read_p50_us'], 'us')} | "
        f"{learned['read_p50_over_learn_off']:.3f}x |",
        f"| read, p90 | {_show(figures['read_p90_us'][CASSTORE], 'us')} | {_show(learn_off['read_p90_us'], 'us')} | "
        f"{learned['read_p90_over_learn_off']:.3f}x |",
        f"| write, new content, p50 | {_show(figures['write_new_p50_us'][CASSTORE], 'us')} | "
        f"{_show(learn_off['write_new_p50_us'], 'us')} | {learned['write_new_p50_over_learn_off']:.3f}x |",
        f"| write, new content, p99 | {_show(figures['write_new_p99_us'][CASSTORE], 'us')} | "
        f"{_show(learn_off['write_new_p99_us'], 'us')} | {learned['write_new_p99_over_learn_off']:.3f}x |",
        "",
        _encodings_text(learned, baseline_du),
    ]
    return "\n".join(lines)


def _encodings_text(learned: dict[str, float], baseline_du: float) -> str:
    encodings = ", ".join(
        f"{key.removeprefix('blobs_encoded_')} {value:,.0f}"
        for key, value in learned.items()
        if key.startswith("blobs_")
    )
    return (
        f"Frames only (every blob's stored bytes and the trained dictionaries' bytes: the learned encodings' floor, "
        f"with no index): {_show(learned['frame_bytes'], 'bytes')}, {learned['frame_bytes'] / baseline_du:.3f}x the "
        f"baseline's du; du is {learned['du_over_floor']:.3f}x that floor."
        + (f" Blobs by encoding: {encodings}." if encodings else "")
    )


def _compactor_table(compactor: dict[str, Any]) -> str:
    lines = [
        f"Compactors over one conversation of {compactor['tool_results']:,} tool results "
        f"({compactor['context_window']:,}-token window, compacting at {compactor['compact_at']:,} tokens down to "
        f"{compactor['target_tokens']:,}; ApproximateTokenCounter):",
        "",
        "| compactor | compact calls | time per call p50 | p90 | tokens saved | store du afterwards |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name in ("DedupOffloadCompactor", "ToolResultOffloadCompactor"):
        row = compactor[name]
        lines.append(
            f"| {name} | {row['calls']:,} | {_show(row['call_p50_us'], 'us')} | {_show(row['call_p90_us'], 'us')} | "
            f"{row['tokens_saved']:,} | {_show(row['du_bytes'], 'bytes')} |"
        )
    return "\n".join(lines)


def write_json(result: dict[str, Any], path: Path) -> None:
    """Write the whole result as JSON (NaN written as null)."""

    def clean(value: Any) -> Any:
        if isinstance(value, float) and math.isnan(value):
            return None
        if isinstance(value, dict):
            return {key: clean(item) for key, item in value.items()}
        if isinstance(value, list):
            return [clean(item) for item in value]
        return value

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(clean(result), indent=2, ensure_ascii=False) + "\n")
