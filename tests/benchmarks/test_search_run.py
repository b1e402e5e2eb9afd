"""
A smoke run of `python -m benchmarks --search` on a tiny trace: it runs and its numbers hang together. Nothing about
speed is asserted: the benchmark itself reports the targets.
"""

import json
import math
from pathlib import Path

import pytest

from benchmarks.__main__ import main


@pytest.mark.slow
def test_tiny_search_benchmark(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result_path = tmp_path / "search.json"
    arguments = ["--search", "--results", "150", "--search-queries", "20", "--repetitions", "1", "--chunk", "50"]
    assert main([*arguments, "--json", str(result_path), "--quiet"]) == 0
    printed = capsys.readouterr().out
    result = json.loads(result_path.read_text())

    writes = result["writes"]
    assert writes["writes"] == result["trace"]["writes"]
    for key in ("on_p50_us", "off_p50_us", "on_new_p50_us", "off_duplicate_p50_us"):
        assert math.isfinite(writes[key]) and writes[key] > 0, key
    size = result["size"]
    assert size["search_index_bytes"] > 0 and 0 < size["indexed_text_bytes"] <= result["trace"]["logical_bytes"]
    assert size["index_over_text"] == pytest.approx(size["search_index_bytes"] / size["indexed_text_bytes"])
    assert sum(result["queries"].values()) > 0
    recall = result["recall"]["trigram"]
    assert set(recall) == {"all", *result["queries"]} and all(0 <= value <= 1 for value in recall.values())
    for kind in ("rare token", "common token", "phrase"):
        figures = result["latency"][kind]
        assert 0 < figures["p50_ms"] <= figures["p99_ms"] and figures["grep_p50_ms"] > 0
        assert figures["over_grep"] == pytest.approx(figures["p50_ms"] / figures["grep_p50_ms"])
    assert {check["name"] for check in result["targets"]} >= {"recall at 3 (trigram index)"}
    assert "| recall at 3 | all |" in printed and "| target | value | met |" in printed


@pytest.mark.slow
def test_tiny_shared_search_benchmark(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result_path = tmp_path / "search-shared.json"
    arguments = ["--search", "--shared", "--results", "120", "--search-queries", "20", "--repetitions", "1"]
    assert main([*arguments, "--chunk", "40", "--json", str(result_path), "--quiet"]) == 0
    printed = capsys.readouterr().out
    result = json.loads(result_path.read_text())
    assert result["writes"]["writes"] == result["trace"]["writes"]
    size = result["size"]
    assert size["search_index_bytes"] > 0 and size["store_du_bytes"] > size["store_without_index_du_bytes"] > 0
    assert 0 <= result["recall"]["trigram"]["all"] <= 1
    for kind in ("rare token", "common token", "phrase"):
        figures = result["latency"][kind]
        assert 0 < figures["p50_ms"] <= figures["p99_ms"]
    assert "| trigram |" in printed
