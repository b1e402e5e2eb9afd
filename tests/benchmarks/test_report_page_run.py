"""A smoke run of `python -m benchmarks.report_page`: a small store, one report, its figures consistent."""

import json
from pathlib import Path

import pytest

from benchmarks.report_page import main


@pytest.mark.slow
def test_a_small_report_benchmark_runs_and_its_figures_hang_together(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result_path = tmp_path / "result.json"
    assert main(["--writes", "1500", "--compactions", "600", "--namespaces", "3", "--repetitions", "1",
                 "--json", str(result_path)]) == 0  # fmt: skip
    printed = capsys.readouterr().out
    result = json.loads(result_path.read_text())
    assert result["store"]["writes"] == 1500 and result["store"]["compactions"] == 600
    assert result["store"]["blobs"] < 1500  # a third of the results came back
    assert 0 < result["median_seconds"] == result["seconds"][0]
    assert result["bytes"] > 0 and result["median_cpu_seconds"] > 0
    assert "page: " in printed and "target <= 2 MB" in printed
