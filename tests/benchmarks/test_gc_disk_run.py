"""
The gc benchmark (`python -m benchmarks.gc_disk`): a small run builds a real store, runs gc twice beside a real writer
process, and its figures hang together. Nothing about speed is asserted: the table is what the run is for.
"""

import json
from pathlib import Path

import pytest

from benchmarks.gc_disk import main


@pytest.mark.slow
def test_a_small_run_collects_half_the_store_beside_a_writer_that_never_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result_path = tmp_path / "gc.json"
    assert main(["--size-mb", "4", "--workdir", str(tmp_path / "work"), "--json", str(result_path), "--quiet"]) == 0
    result = json.loads(result_path.read_text())
    printed = capsys.readouterr().out
    assert "| gc | rebuild_index |" in printed and "| max_size | whole gc |" in printed
    for run in ("gc", "max_size"):
        measured = result[run]
        # Half the store's content goes, so the run rebuilds the index and the file shrinks.
        assert measured["report"]["blobs_deleted"] > 0 and measured["report"]["index_space"] == "rebuilt"
        assert set(measured["phases"]) >= {"forget", "delete_collectable_blobs", "rebuild_index"}
        before, after = measured["index_bytes"]
        assert after < before
        assert measured["writer"]["before gc"]["writes"] > 0
        assert all(waits["failed"] == 0 for waits in measured["writer"].values())
