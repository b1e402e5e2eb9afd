"""
A smoke run of `python -m benchmarks.dedup_scope`: every figure present and sane under both scopes, never a claim about
the accuracy itself (timing is the benchmark's job, not the suite's).
"""

import json
import math
from pathlib import Path

import pytest

from benchmarks.dedup_scope import SCOPES, main


def test_the_guessing_experiment_reports_an_accuracy_per_scope(capsys: pytest.CaptureFixture[str]) -> None:
    figures = main(["--secrets", "20", "--guesses", "30", "--json"])
    assert json.loads(capsys.readouterr().out) == figures
    assert set(figures) == set(SCOPES)
    for scope, found in figures.items():
        assert found["scope"] == scope and found["guesses"] == 30
        assert 0 <= found["accuracy"] <= 1
        assert math.isfinite(found["held_write_p50_us"]) and found["held_write_p50_us"] > 0
        assert math.isfinite(found["new_write_p50_us"]) and found["new_write_p50_us"] > 0


@pytest.mark.slow
def test_the_cost_run_stores_more_blobs_under_namespace_scope(tmp_path: Path) -> None:
    figures = main(["--cost", "--size", "small", "--results", "400", "--block", "50", "--workdir", str(tmp_path)])
    store, namespace = figures["store"], figures["namespace"]
    assert store["writes"] == namespace["writes"] == 400
    # What two namespaces both wrote is one blob under `store` scope and two under `namespace` scope.
    assert store["blobs"] < namespace["blobs"] <= namespace["writes"]
    assert store["disk_bytes"] > 0 and namespace["disk_bytes"] > 0
