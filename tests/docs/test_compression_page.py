"""docs/compression.md's examples run as written: its Python example, and every SQL query on a store that learned."""

import contextlib
import os
import re
import sqlite3
from pathlib import Path

import pytest

from casstore import ContentAddressedToolResultStore
from casstore.blobs import learning as learning_module
from tests.learned_crash_child import content_for

PAGE = Path(__file__).resolve().parents[2] / "docs" / "compression.md"


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", PAGE.read_text(encoding="utf-8"), flags=re.DOTALL)


@pytest.fixture(scope="module")
def learned_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("learned")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(learning_module, "TRAIN_AFTER", 24)
        with ContentAddressedToolResultStore(root) as store:
            for number in range(200):
                store.write(key=f"{number}_tool{number % 2}_call_{number:016x}.txt", content=content_for(number))
    return root


def test_the_python_example_runs(tmp_path: Path) -> None:
    (block,) = _blocks("python")
    previous = Path.cwd()
    os.chdir(tmp_path)
    try:
        exec(compile(block, str(PAGE), "exec"), {})
    finally:
        os.chdir(previous)
    with contextlib.closing(sqlite3.connect(tmp_path / "tool_results" / "index.db")) as connection:
        assert connection.execute("SELECT encoding FROM blobs").fetchall() == [("plain",)]


@pytest.mark.parametrize("query", _blocks("sql"), ids=lambda query: query.splitlines()[0][:60])
def test_every_query_answers_on_a_store_that_learned(learned_root: Path, query: str) -> None:
    with contextlib.closing(sqlite3.connect(f"file:{learned_root / 'index.db'}?mode=ro", uri=True)) as connection:
        rows = connection.execute(query).fetchall()
    assert rows, "the query returned nothing on a store with dictionaries and deltas"
    assert all(value is not None for row in rows for value in row)


def test_the_encoding_counts_add_up(learned_root: Path) -> None:
    query = _blocks("sql")[0]
    with contextlib.closing(sqlite3.connect(learned_root / "index.db")) as connection:
        rows = {row[0]: row[1] for row in connection.execute(query)}
        (blobs,) = connection.execute("SELECT count(*) FROM blobs").fetchone()
    assert set(rows) == {"plain", "dictionary", "delta"} and sum(rows.values()) == blobs
