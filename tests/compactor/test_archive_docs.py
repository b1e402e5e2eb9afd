"""The step archive's page and the README's recommended setup, run as written in an empty folder."""

import ast
import itertools
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from casstore.compactor import DedupOffloadCompactor, StepArchiveCompactor

ROOT = Path(__file__).resolve().parent.parent.parent
PAGE = ROOT / "docs" / "archive.md"


def _blocks(page: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), flags=re.DOTALL)


def _run(code: str, folder: Path) -> str:
    completed = subprocess.run(
        [sys.executable, "-c", code], cwd=folder, capture_output=True, text=True, timeout=240, check=False
    )
    assert completed.returncode == 0, completed.stderr
    return completed.stdout


@pytest.mark.slow  # a Python process of its own, which imports Haystack
def test_the_complete_run_prints_what_the_page_says(tmp_path: Path) -> None:
    (example,) = [block for block in _blocks(PAGE) if "agent.run(" in block]
    lines = _run(example, tmp_path).splitlines()

    # The lines the model found in the archive its note named: the note of the archive before it, then the steps.
    assert lines[0].startswith("[Lines matching '^Steps|^Checking host' from line 1 on")
    found = [line for line in lines if re.match(r"\d+[:@]", line)]
    assert re.match(r"\d+@0: Steps \d+-\d+ \(\d+ messages\) were archived to 'blake3/", found[0]), lines
    assert all(re.fullmatch(r"\d+: Checking host \d+\.", line) for line in found[1:]) and len(found) > 2
    # One `archives` row per archive, each going on where the one before stopped.
    rows = [ast.literal_eval(line) for line in lines if line.startswith("(")]
    assert len(rows) >= 2 and rows[0][1] == 1
    assert all(later[1] == earlier[2] + 1 for earlier, later in itertools.pairwise(rows))
    assert all(saved > 0 for *_, saved in rows)


def test_the_setup_blocks_build_a_chain(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    readme = [block for block in _blocks(ROOT / "README.md") if "CompactorChain(" in block]
    page = [block for block in _blocks(PAGE) if "CompactorChain(" in block and "agent.run(" not in block]
    assert len(readme) == 1 and len(page) == 1
    monkeypatch.chdir(tmp_path)
    for block in (*readme, *page):
        names: dict[str, Any] = {}
        exec(compile(block, "example", "exec"), names)
        chain = names["chain"]
        assert [type(compactor) for compactor in chain.compactors] == [DedupOffloadCompactor, StepArchiveCompactor]
        assert all(compactor.store is names["store"] for compactor in chain.compactors)
        names["store"].close()
