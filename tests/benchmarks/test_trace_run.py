"""
A smoke run of `python -m benchmarks`: the small trace, one repetition, every figure present and sane.

It checks that the benchmark runs and that its numbers hang together (timings positive and finite, counts consistent,
every read checked equal, ratios finite and equal to their quotient), never that one store is faster than the other:
timings on a shared machine vary, and the speed comparison is what the benchmark itself reports.
"""

import json
import math
from pathlib import Path
from typing import Any

import pytest

from benchmarks.__main__ import main
from benchmarks.report import FIGURES
from benchmarks.trace import SIZES, materialize


def _check_growth(result: dict[str, Any], printed: str) -> None:
    # Each store's first-to-last-10% growth, and the same divided by the floors' own growth in the same run.
    labels = {"all", "new", "duplicate"}
    for name in ("casstore", "baseline", "casstore_learn_off"):
        growth = result["growth"][name]
        assert set(growth) == labels | {"worst"} | {f"{label}_over_floor" for label in labels} | {"worst_over_floor"}
        for label in labels:
            assert growth[f"{label}_over_floor"] == pytest.approx(growth[label] / result["growth"]["floor"][label])
    assert set(result["growth"]["floor"]) == labels
    assert all(value > 0 and math.isfinite(value) for value in result["growth"]["floor"].values())
    assert "each store's growth divided by it" in printed


def _check_learned(learned: dict[str, Any], printed: str, *, frame_floor: float) -> None:
    # The learned store's frames (dictionaries included) beside the disk floor of plain frames of the same content.
    assert learned["frame_bytes"] > 0 and frame_floor > 0
    assert learned["du_over_floor"] > 1  # an index and file-system blocks on top of the frames
    assert "Frames only (every blob's stored bytes" in printed


@pytest.mark.slow
def test_small_trace_one_repetition(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result_path = tmp_path / "result.json"
    assert main(["--repetitions", "1", "--reads", "300", "--json", str(result_path), "--quiet"]) == 0
    printed = capsys.readouterr().out
    result = json.loads(result_path.read_text())

    # The trace is printed first, with its logical and unique bytes and duplicate ratio.
    assert printed.startswith("trace small:")
    trace = result["trace"]
    assert trace["results"] == SIZES["small"].results
    assert 0 < trace["unique_bytes"] < trace["logical_bytes"]
    assert 0 < trace["duplicate_ratio"] < 1
    assert trace["binary_writes"] > 0  # images in multi-part results
    assert trace["writes"] == trace["unique_writes"] + trace["duplicate_writes"] >= trace["results"]

    figures = result["figures"]
    for figure in FIGURES:
        entry = figures[figure.key]
        # A ratio is undefined only where the baseline has nothing (it creates no folders).
        fields = ("casstore", "baseline") if entry["baseline"] == 0 else ("casstore", "baseline", "ratio", "ratio_min")
        for field in fields:
            value = entry[field]
            assert value is not None and math.isfinite(value) and value >= 0, (figure.key, field, value)
        if entry["baseline"] != 0:  # one repetition: the ratio is the quotient, and its min and max are the same
            assert math.isclose(entry["ratio"], entry["casstore"] / entry["baseline"]), (figure.key, entry)
            assert entry["ratio_min"] == entry["ratio"] == entry["ratio_max"], (figure.key, entry)
    timings = [key for key in figures if key.endswith(("_us", "_s"))]
    assert timings and all(figures[key][store] > 0 for key in timings for store in ("casstore", "baseline")), timings
    # Every read was compared with what was written, and all were equal.
    for store in ("casstore", "baseline"):
        assert figures["reads_checked"][store] == 300
        assert figures["read_mismatches"][store] == 0
    # casstore keeps each distinct result once, compressed, mostly inside index.db.
    assert figures["du_closed_bytes"]["casstore"] < figures["du_closed_bytes"]["baseline"]
    assert figures["file_bytes_closed"]["casstore"] < trace["unique_bytes"]
    assert figures["files_closed"]["casstore"] < figures["files_closed"]["baseline"] == trace["writes"]
    assert figures["file_bytes_closed"]["baseline"] == trace["logical_bytes"]  # the baseline stores every write as is

    _check_learned(result["learned"], printed, frame_floor=result["floor"]["frame_bytes"])

    assert result["floor"]["floor_p50_us"] > 0
    assert result["floor"]["new_floor_p50_us"] > 0
    floor = result["floor"]
    for key in ("read_floor_p50_us", "whole_trace_floor_s", "floor_over_baseline", "read_floor_over_baseline"):
        assert floor[key] > 0 and math.isfinite(floor[key]), (key, floor[key])
    assert 0 < result["floor"]["frame_bytes"] < figures["du_closed_bytes"]["casstore"]
    _check_growth(result, printed)
    assert len(result["chunk_series_ms"][0]["casstore"]) == result["chunks"]["count"]
    memory = result["memory"]
    assert memory["casstore"]["peak_rss_bytes"] > 0 and memory["baseline"]["peak_rss_bytes"] > 0
    compactor = result["compactor"]
    assert compactor["DedupOffloadCompactor"]["calls"] > 0
    assert compactor["DedupOffloadCompactor"]["tokens_saved"] > 0
    assert compactor["ToolResultOffloadCompactor"]["tokens_saved"] > 0
    # Each target is reported with a finite value and whether it was met (None: not judged on this trace); whether
    # it was met is not checked here.
    assert all(math.isfinite(check["value"]) and check["met"] in (True, False, None) for check in result["targets"])
    names = {check["name"] for check in result["targets"]}
    assert {
        "du, store closed",
        "whole-trace throughput, casstore / baseline (median of repetitions)",
        "whole-trace throughput, casstore / baseline (slowest repetition)",
        "peak memory, casstore - baseline",
    } <= names
    # The throughput targets are judged on each repetition's own times, as printed.
    times = [(rep["casstore"]["write_total_s"], rep["baseline"]["write_total_s"]) for rep in result["repetitions"]]
    slowest = next(check for check in result["targets"] if check["name"].endswith("(slowest repetition)"))
    assert slowest["value"] == pytest.approx(min(baseline / casstore for casstore, baseline in times))
    assert "| figure | casstore | FileSystemToolResultStore |" in printed


@pytest.mark.slow
def test_trace_is_deterministic(tmp_path: Path) -> None:
    size = SIZES["small"]
    first = tmp_path / "first"
    second = tmp_path / "second"
    first.mkdir()
    second.mkdir()
    one = materialize(size, 7, first)
    two = materialize(size, 7, second)
    assert one.fingerprint == two.fingerprint
    assert (first / "trace.pack").read_bytes() == (second / "trace.pack").read_bytes()
    assert one.load(0, 5) == two.load(0, 5)
