"""The README's examples run as written: its first Python example, and every SQL query against a real agent run."""

import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from casstore.demo import EXPLORE_QUERIES, run_demo

README = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README, flags=re.DOTALL)


@pytest.fixture(scope="module")
def demo_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("readme") / "store"
    run_demo(root=root, steps=40)
    return root


def test_the_opening_example_runs(tmp_path: Path) -> None:
    example = _blocks("python")[0]
    completed = subprocess.run(
        [sys.executable, "-c", example], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    assert re.fullmatch(r"blake3/[0-9a-f]{2}/[0-9a-f]{62}\.txt\n", completed.stdout)


def test_there_are_at_least_three_example_queries() -> None:
    assert len(_blocks("sql")) >= 3


@pytest.mark.parametrize("query", _blocks("sql"), ids=lambda query: query.splitlines()[0][:60])
def test_every_readme_query_answers_on_a_real_run(demo_root: Path, query: str) -> None:
    with sqlite3.connect(demo_root / "index.db") as connection:
        rows = connection.execute(query).fetchall()
    assert rows, "the query returned nothing on a store filled by a real agent run"
    assert all(value is not None for row in rows for value in row)


@pytest.mark.parametrize("query", EXPLORE_QUERIES)
def test_the_demos_printed_queries_answer(demo_root: Path, query: str) -> None:
    with sqlite3.connect(demo_root / "index.db") as connection:
        namespace = connection.execute("SELECT namespace FROM offloads LIMIT 1").fetchone()[0]
        assert connection.execute(query.format(namespace=namespace)).fetchall()
