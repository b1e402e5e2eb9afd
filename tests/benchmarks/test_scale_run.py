"""
The scale run (`python -m benchmarks.scale`): its workload is the mix it says, and a small run measures every step on a
real store and real `casstore` processes. Nothing about speed is asserted: the run itself reports its target.
"""

import json
import sqlite3
import statistics
from contextlib import closing
from functools import cache
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.scale import main
from benchmarks.scale_workload import ScaleWorkload, source_pool


@cache
def _pool() -> str:
    return source_pool(limit=2 * 1024 * 1024)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(min_value=0, max_value=2**32), writes=st.integers(min_value=0, max_value=300))
def test_repeats_come_back_exactly_and_edits_are_new(seed: int, writes: int) -> None:
    items = list(ScaleWorkload(writes=writes, namespaces=3, seed=seed, pool=_pool()))
    again = list(ScaleWorkload(writes=writes, namespaces=3, seed=seed, pool=_pool()))
    assert items == again  # the seed decides everything
    seen: set[str] = set()
    for item in items:
        if item.repeat:
            assert item.content in seen
        if item.near:
            assert item.content not in seen and "# edited\n" in item.content
        seen.add(item.content)
    assert len({item.key for item in items}) == len(items)  # every write under a key of its own
    assert {item.namespace for item in items} <= {"agent-00", "agent-01", "agent-02"}


def test_the_mix_and_the_sizes_are_as_documented() -> None:
    items = list(ScaleWorkload(writes=4000, seed=1, pool=_pool()))
    repeats = sum(item.repeat for item in items)
    near = sum(item.near for item in items)
    assert abs(repeats / len(items) - 0.4) < 0.05
    assert abs(near / (len(items) - repeats) - 0.5) < 0.05
    sizes = [len(item.content.encode()) for item in items if not item.repeat and not item.near]
    assert 1_500 < statistics.median(sizes) < 3_000
    large = sum(20_000 <= size <= 81_000 for size in sizes) / len(sizes)
    assert 0.05 < large < 0.15


def test_shares_out_of_range_are_refused() -> None:
    with pytest.raises(ValueError, match="`repeat_share` must be between 0 and 1"):
        ScaleWorkload(writes=10, repeat_share=1.5, pool=_pool())
    with pytest.raises(ValueError, match="`namespaces` >= 1"):
        ScaleWorkload(writes=10, namespaces=0, pool=_pool())
    with pytest.raises(SystemExit):
        main(["--writes", "5"])


@pytest.mark.slow
def test_a_small_scale_run_measures_every_step(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result_path = tmp_path / "scale.json"
    arguments = ["--writes", "2000", "--namespaces", "3", "--workdir", str(tmp_path), "--keep", "--quiet"]
    assert main([*arguments, "--json", str(result_path)]) == 0
    printed = capsys.readouterr().out
    result = json.loads(result_path.read_text())

    written = result["writes"]
    assert written["writes"] == 2000 == written["repeats"] + written["new"] and 0 < written["near"] < written["new"]
    tenths = result["tenths"]
    assert len(tenths) == 10 and sum(row["writes"] for row in tenths) == 2000
    assert all(0 < row["p50_us"] <= row["p90_us"] for row in tenths)
    space = result["footprint"]
    assert (
        0 < space["index_bytes"] <= space["du_bytes"] and sum(place["count"] for place in space["blobs"].values()) > 0
    )

    commands = result["commands"]
    assert all(entry["status"] in (0, 3) and entry["seconds"] > 0 for entry in commands.values()), commands
    assert commands["stats"]["json"]["writes"] == 2000
    assert commands["verify"]["json"]["ok"] is True
    rare, common = result["searches"]
    assert rare["hits"] >= 1 and rare["query"].startswith("value_")  # the last edited result holds it
    assert common["hits"] >= 1
    assert result["aging"]["writes_aged"] == 1000
    assert commands["gc"]["json"]["writes_forgotten"] == 1000 and commands["gc"]["json"]["blobs_deleted"] > 0
    with closing(sqlite3.connect(tmp_path / "store" / "index.db")) as connection:
        assert connection.execute("SELECT count(*) FROM writes").fetchone() == (1000,)
    assert "| tenth | write p50 | new p50 | repeat p50 | p90 |" in printed
    assert "| `casstore verify` |" in printed and "writes forgotten" in printed
