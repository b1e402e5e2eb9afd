"""docs/search.md's examples run as written, and print what the page says they print (reference and time aside)."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

PAGE = (Path(__file__).resolve().parents[2] / "docs" / "search.md").read_text(encoding="utf-8")
PYTHON = re.findall(r"```python\n(.*?)```", PAGE, flags=re.DOTALL)
SHOWN = re.findall(r"^prints[^\n]*\n\n```\n(.*?)```", PAGE, flags=re.DOTALL | re.MULTILINE)


def _normalized(text: str) -> str:
    text = re.sub(r"'blake3/[0-9a-f]{2}/(?:…|[0-9a-f]{62})?[0-9a-f…]*\.txt'", "'<reference>'", text)
    return re.sub(r"written \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} UTC", "written <time>", text)


@pytest.mark.slow
@pytest.mark.parametrize("number", range(len(PYTHON)))
def test_each_example_runs_and_prints_what_the_page_shows(tmp_path: Path, number: int) -> None:
    assert len(PYTHON) == len(SHOWN) == 2
    completed = subprocess.run(
        [sys.executable, "-c", PYTHON[number]], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert completed.returncode == 0, completed.stderr
    assert _normalized(completed.stdout).startswith(_normalized(SHOWN[number])), completed.stdout
