"""
A smoke run of `python -m benchmarks.duplicate_writes`, alone and alternating with another tree (here this same tree,
in child processes): every figure present and sane, never a comparison of speeds (the benchmark's own job).
"""

import json
import math
from pathlib import Path

import pytest

from benchmarks.duplicate_writes import main

ROOT = Path(__file__).resolve().parents[2]


def _sane(figures: dict[str, float], prefix: str = "") -> None:
    for operation in ("write", "read"):
        p50, p90 = figures[f"{prefix}{operation}_p50_us"], figures[f"{prefix}{operation}_p90_us"]
        assert math.isfinite(p50) and 0 < p50 <= p90


def test_one_run_times_writes_and_reads(capsys: pytest.CaptureFixture[str]) -> None:
    result = main(["--writes", "60", "--reads", "40", "--contents", "7", "--warmup", "5", "--json"])
    assert json.loads(capsys.readouterr().out) == result
    _sane(result)


def test_zero_calls_give_no_figures() -> None:
    assert main(["--writes", "0", "--reads", "0", "--json"]) == {
        "write_p50_us": None,
        "write_p90_us": None,
        "read_p50_us": None,
        "read_p90_us": None,
    }


@pytest.mark.slow
def test_compare_alternates_child_processes_of_each_tree(capsys: pytest.CaptureFixture[str]) -> None:
    result = main(
        ["--compare", str(ROOT), "--rounds", "2", "--chunk", "25", "--writes", "60", "--reads", "30", "--quiet"]
    )
    assert json.loads(capsys.readouterr().out) == result
    assert result["rounds"] == 2
    assert result["trees"] == {"this": str(ROOT), ROOT.name: str(ROOT)}
    for name in result["trees"]:
        for operation in ("write", "read"):
            low, middle = result[f"{name}_{operation}_p50_us_min"], result[f"{name}_{operation}_p50_us_median"]
            assert math.isfinite(low) and 0 < low <= middle
    for operation in ("write", "read"):
        assert math.isfinite(result[f"this_minus_{ROOT.name}_{operation}_p50_us_median"])


def test_bad_counts_are_refused() -> None:
    with pytest.raises(SystemExit, match="--contents and --chunk"):
        main(["--contents", "0"])
