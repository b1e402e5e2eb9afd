"""
A smoke run of `python -m benchmarks --shared` on a tiny trace: it starts its own PostgreSQL and SeaweedFS, runs, stops
them, and its numbers hang together. Nothing about speed is asserted: the benchmark itself reports the targets.
"""

import json
import math
from pathlib import Path

import pytest

from benchmarks.__main__ import main
from benchmarks.shared import STORES


@pytest.mark.slow
def test_tiny_shared_benchmark(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result_path = tmp_path / "shared.json"
    arguments = [
        "--shared",
        "--results",
        "60",
        "--reads",
        "40",
        "--chunk",
        "25",
        "--processes",
        "1,2",
        "--process-rounds",
        "1",
    ]
    assert main([*arguments, "--json", str(result_path), "--quiet"]) == 0
    printed = capsys.readouterr().out
    result = json.loads(result_path.read_text())

    assert result["writes"] == result["trace"]["writes"] == result["new_writes"] + result["duplicate_writes"]
    assert result["new_writes"] > 0 and result["duplicate_writes"] > 0
    for name in STORES:
        figures = result["figures"][name]
        for key in ("write_new_p50_us", "write_duplicate_p50_us", "read_p50_us", "write_total_s", "stored_bytes"):
            assert math.isfinite(figures[key]) and figures[key] > 0, (name, key, figures[key])
        assert figures["write_new_p90_us"] >= figures["write_new_p50_us"]
        assert figures["write_duplicate_p90_us"] >= figures["write_duplicate_p50_us"]
        assert figures["reads_checked"] == 40
        assert figures["read_mismatches"] == 0
    shared = result["figures"]["shared"]
    assert shared["object_requests_duplicate"] >= 0 and shared["object_requests_new"] >= 0
    floors = result["floors"]
    assert math.isfinite(floors["commit_p50_us"]) and 0 < floors["commit_p50_us"] <= floors["commit_p90_us"]
    rows = result["processes"]
    assert [row["processes"] for row in rows] == [1, 2]
    assert all(row["writes"] == result["writes"] and row["writes_per_s"] > 0 for row in rows)
    names = {check["name"] for check in result["targets"]}
    assert {"duplicate write p50 / commit floor p50", "object-store requests during duplicate writes"} <= names
    assert all(math.isfinite(check["value"]) and check["met"] in (True, False) for check in result["targets"])
    assert "| figure | SharedToolResultStore | ContentAddressedToolResultStore | FileSystemToolResultStore |" in printed
    assert "| writer processes | writes | seconds (median round) | aggregate writes/s (median) |" in printed
