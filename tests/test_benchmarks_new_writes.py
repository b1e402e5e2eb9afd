"""
A smoke run of `python -m benchmarks.new_writes`, this tree against itself (in child processes) on the small trace:
every figure present and sane, never a comparison of speeds (the benchmark's own job).
"""

import json
import math
from pathlib import Path

import pytest

from benchmarks.new_writes import main

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_compare_times_each_new_result_in_both_trees(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    result = main(["--compare", str(ROOT), "--rounds", "2", "--chunk", "400", "--trace-dir", str(tmp_path), "--json"])
    assert json.loads(capsys.readouterr().out) == result
    assert result["trees"] == {"this": str(ROOT), "other": str(ROOT)} and len(result["rounds"]) == 2
    for figures in result["rounds"]:
        # Both trees wrote the same trace: the same new results, stored with each encoding.
        assert figures["new"]["count"] == sum(figures[kind]["count"] for kind in ("dictionary", "delta", "plain"))
        assert all(figures[kind]["count"] > 0 for kind in ("dictionary", "delta", "plain"))
        for kind in ("dictionary", "delta", "plain", "new"):
            row = figures[kind]
            assert row["this_p50_us"] > 0 and row["other_p50_us"] > 0
            assert math.isfinite(row["median_difference_us"])
    assert (tmp_path / "trace.pack").exists()  # kept for the next run, and reused


@pytest.mark.slow
def test_with_learn_off_every_new_result_is_plain(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    result = main(
        ["--compare", str(ROOT), "--rounds", "1", "--chunk", "400", "--trace-dir", str(tmp_path), "--learn-off"]
    )
    capsys.readouterr()
    (figures,) = result["rounds"]
    assert result["learn"] is False and figures["dictionary"]["count"] == figures["delta"]["count"] == 0
    assert figures["plain"]["count"] == figures["new"]["count"] > 0


def test_bad_options_are_refused() -> None:
    with pytest.raises(SystemExit, match="--chunk must be at least 1"):
        main(["--compare", str(ROOT), "--chunk", "0"])
    with pytest.raises(SystemExit, match="--compare <tree> is required"):
        main([])
