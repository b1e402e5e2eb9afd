"""
`casstore datasette-metadata`: Datasette metadata that describes every table, view and column of the index and
holds the docs' questions as canned queries, equal to the docs, and accepted and run by Datasette itself.
"""

import contextlib
import json
import re
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from casstore.demo.session import run_demo
from casstore.history.datasette import DATABASE_NAME, metadata
from casstore.history.schema_docs import QUESTIONS, RELATIONS
from tests.helpers import create_store

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
DATASETTE = Path(sys.executable).parent / "datasette"

pytestmark = pytest.mark.filterwarnings("ignore::haystack.utils.experimental.ExperimentalWarning")


@pytest.fixture(scope="module")
def demo_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("datasette") / "store"
    run_demo(root=root, steps=30)
    return root


def _schema(root: Path) -> dict[str, set[str]]:
    """
    Every table and view of the index, with its columns, as SQLite reports them; not the shadow tables FTS5 keeps
    for `search_text` (`search_text_data`, `_idx`, `_config`, ...), which are FTS5's, not casstore's.
    """
    with contextlib.closing(sqlite3.connect(root / "index.db")) as connection:
        names = [
            row[0]
            for row in connection.execute(
                "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite_%' "
                "AND name NOT LIKE 'search_text_%'"
            )
        ]
        return {
            name: {row[1] for row in connection.execute(f"PRAGMA table_xinfo({name})") if row[6] != 1} for name in names
        }


def test_the_command_prints_datasettes_metadata_shape() -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "casstore", "datasette-metadata"], capture_output=True, text=True, check=True
    )
    printed = json.loads(completed.stdout)
    assert printed == metadata()
    assert set(printed) == {"title", "description", "databases"}
    (database,) = printed["databases"].values()
    assert set(database) == {"description", "tables", "queries"}
    for table in database["tables"].values():
        assert set(table) == {"description", "columns"} and table["description"]
        assert all(isinstance(text, str) and text for text in table["columns"].values())
    for query in database["queries"].values():
        assert set(query) == {"title", "sql"} and sqlite3.complete_statement(query["sql"])


def test_every_table_view_and_column_of_an_index_is_described(tmp_path: Path) -> None:
    create_store(tmp_path / "store")  # a fresh index on disk (a store creates nothing until its first write)
    schema = _schema(tmp_path / "store")
    described = {name: set(relation.columns) for name, relation in RELATIONS.items()}
    missing = {name: columns - described.get(name, set()) for name, columns in schema.items()}
    assert {name: columns for name, columns in missing.items() if columns} == {}, (
        "describe these in casstore/history/schema_docs.py (and docs/index.md)"
    )
    assert described == schema  # and nothing is described that the index does not have


def _docs_column_tables() -> dict[str, set[str]]:
    """`**`name`**: ...` followed by a `| column | meaning |` table, in any page: the columns it lists."""
    tables: dict[str, set[str]] = {}
    for page in DOCS:
        text = page.read_text(encoding="utf-8")
        for match in re.finditer(
            r"\*\*`(\w+)`\*\*[^\n]*\n(?:[^\n|][^\n]*\n)*\n\| column \| meaning \|\n\|[- |]+\|\n((?:\|[^\n]*\n)+)", text
        ):
            for line in match[2].splitlines():
                tables.setdefault(match[1], set()).update(re.findall(r"`(\w+)`", line.split("|")[1]))
    return tables


def test_every_column_the_docs_list_is_described_as_there() -> None:
    tables = _docs_column_tables()
    assert {"blobs", "write_rows", "offloads", "compactions"} <= set(tables)
    for name, columns in tables.items():
        assert columns <= set(RELATIONS[name].columns), name


def _docs_questions() -> dict[str, str]:
    questions = {}
    for page in DOCS:
        for block in re.findall(r"```sql\n(.*?)```", page.read_text(encoding="utf-8"), flags=re.DOTALL):
            title, _, sql = block.partition("\n")
            if title.startswith("-- "):
                questions[title.removeprefix("-- ")] = sql.strip()
    return questions


def test_the_canned_queries_are_the_docs_questions() -> None:
    assert {question.title: question.sql for question in QUESTIONS} == _docs_questions()


# A short demo run trains no dictionary and writes few near-copies: these questions are answered, with rows, on a
# store that learned, by tests/docs/test_compression_page.py (the page they come from).
_LEARNED_ENCODINGS = {"dictionaries", "deltas"}


def test_every_canned_query_answers_on_a_real_run(demo_root: Path) -> None:
    with contextlib.closing(sqlite3.connect(f"file:{demo_root / 'index.db'}?mode=ro", uri=True)) as connection:
        for question in QUESTIONS:
            rows = connection.execute(question.sql).fetchall()
            assert rows or question.name in _LEARNED_ENCODINGS, question.title


def _datasette(root: Path, tmp_path: Path, path: str) -> Any:
    (tmp_path / "metadata.json").write_text(json.dumps(metadata()))
    completed = subprocess.run(
        [str(DATASETTE), str(root / "index.db"), "-m", str(tmp_path / "metadata.json"), "--get", path],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout)


@pytest.mark.slow
def test_datasette_accepts_the_metadata_and_runs_every_question(demo_root: Path, tmp_path: Path) -> None:
    assert (demo_root / "index.db").stem == DATABASE_NAME
    served = _datasette(demo_root, tmp_path, "/-/metadata.json")
    assert served["databases"][DATABASE_NAME]["tables"]["compactions"] == {
        "description": RELATIONS["compactions"].description,
        "columns": RELATIONS["compactions"].columns,
    }
    for question in QUESTIONS:
        answer = _datasette(demo_root, tmp_path, f"/{DATABASE_NAME}/{question.name}.json?_shape=array")
        assert isinstance(answer, list) and (answer or question.name in _LEARNED_ENCODINGS), question.title
    table = _datasette(demo_root, tmp_path, f"/{DATABASE_NAME}/compactions.json?_shape=objects")
    assert table["rows"] and set(table["rows"][0]) == set(RELATIONS["compactions"].columns)
