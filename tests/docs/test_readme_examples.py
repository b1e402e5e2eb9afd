"""The documentation's examples run as written.

The README's Python examples, the agent example of docs/compactor.md, and every SQL query of docs/index.md against a
real agent run.
"""

import ast
import contextlib
import json
import re
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from casstore.demo.session import EXPLORE_QUERIES, run_demo
from tests.helpers import blake3_hex

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
INDEX_PAGE = ROOT / "docs" / "index.md"
COMPACTOR_PAGE = ROOT / "docs" / "compactor.md"


def _blocks(language: str, page: Path) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", page.read_text(encoding="utf-8"), flags=re.DOTALL)


@pytest.fixture(scope="module")
def demo_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("readme") / "store"
    run_demo(root=root, steps=40)
    return root


def test_the_opening_example_runs(tmp_path: Path) -> None:
    example = _blocks("python", README)[0]
    completed = subprocess.run(
        [sys.executable, "-c", example], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    assert re.fullmatch(r"blake3/[0-9a-f]{2}/[0-9a-f]{62}\.txt\n", completed.stdout)


@pytest.mark.slow
def test_the_three_objects_example_builds_what_it_says(tmp_path: Path) -> None:
    """The README's block with the compactor, the read tool and keep_in_context, run as written, then looked at."""
    (example,) = [block for block in _blocks("python", README) if "read_tool = make_read_tool(store)" in block]
    check = """
from haystack.hooks.tool_result_offloading import AlwaysOffload, NeverOffload

assert read_tool.name == "read_offloaded_result"
assert compaction.compactor.store is store
strategies = offload.offload_strategies
assert isinstance(strategies["read_offloaded_result"], NeverOffload), strategies
assert isinstance(strategies["*"], AlwaysOffload), strategies
store.close()
print("ok")
"""
    completed = subprocess.run(
        [sys.executable, "-c", example + check], cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout == "ok\n"


# The index page's questions, each with the columns its query answers with.
INDEX_QUESTIONS = {
    "-- How much did dedup and compression save?": [
        "writes",
        "blobs",
        "logical_bytes",
        "stored_bytes",
        "dedup_ratio",
        "compression_ratio",
        "total_ratio",
    ],
    "-- Which outputs kept coming back, and how much did storing them once save?": [
        "times_written",
        "size",
        "bytes_deduplicated",
        "example_key",
    ],
    "-- What did compaction do in the last day, tool by tool?": ["tool_name", "offloads", "tokens_saved"],
    "-- What did each compaction do, in order? (one line per compact call)": [
        "compaction_id",
        "at",
        "results",
        "tokens_saved",
    ],
    "-- How close did each compaction bring the conversation to its target and window?": [
        "compacted_at",
        "namespace",
        "tokens_before",
        "tokens_after",
        "target_tokens",
        "context_window",
    ],
    "-- Every part of every offloaded result, with its size and where it is stored.": [
        "tool_name",
        "tool_call_id",
        "reference",
        "size",
        "stored_size",
        "stored_in",
    ],
}


def _answers(root: Path) -> dict[str, tuple[list[str], list[tuple[Any, ...]]]]:
    """Question -> (columns, rows) of each index page query, on a read-only connection: the queries change nothing."""
    answers = {}
    with contextlib.closing(sqlite3.connect(f"file:{root / 'index.db'}?mode=ro", uri=True)) as connection:
        for block in _blocks("sql", INDEX_PAGE):
            question, _, query = block.partition("\n")
            assert sqlite3.complete_statement(query) and query.count(";") == 1, f"not one statement: {query}"
            cursor = connection.execute(query)
            answers[question] = ([column[0] for column in cursor.description], cursor.fetchall())
    return answers


def test_the_index_pages_queries_answer_the_questions_they_ask(demo_root: Path) -> None:
    answers = _answers(demo_root)
    assert {question: columns for question, (columns, _) in answers.items()} == INDEX_QUESTIONS
    with contextlib.closing(sqlite3.connect(demo_root / "index.db")) as connection:
        writes, blobs, offloads, parts, saved, compactions = connection.execute(
            "SELECT (SELECT count(*) FROM writes), (SELECT count(*) FROM blobs), (SELECT count(*) FROM offloads), "
            "(SELECT count(*) FROM offloads, json_each(refs)), (SELECT sum(saved_tokens) FROM offloads), "
            "(SELECT count(DISTINCT compaction_id) FROM offloads)"
        ).fetchone()
    questions = list(INDEX_QUESTIONS)
    ((summary_writes, summary_blobs, logical, stored, *ratios),) = answers[questions[0]][1]
    assert (summary_writes, summary_blobs) == (writes, blobs)
    assert 0 < stored < logical and all(ratio > 1 for ratio in ratios), answers[questions[0]]
    repeated = answers[questions[1]][1]
    assert 0 < len(repeated) <= 10 and all(times > 1 for times, *_ in repeated)
    assert [row[2] for row in repeated] == sorted((row[2] for row in repeated), reverse=True)
    by_tool = answers[questions[2]][1]  # the demo ran just now, so within the last day
    assert sum(row[1] for row in by_tool) == offloads and sum(row[2] for row in by_tool) == saved
    by_compaction = answers[questions[3]][1]
    assert len(by_compaction) == compactions and sum(row[2] for row in by_compaction) == offloads
    assert [row[1] for row in by_compaction] == sorted(row[1] for row in by_compaction)
    window = answers[questions[4]][1]
    assert {row[0] for row in by_compaction} <= set(_compaction_ids(demo_root)) and len(window) >= compactions
    assert all(before >= after and before > target for _, _, before, after, target, _ in window)
    every_part = answers[questions[5]][1]
    assert len(every_part) == parts and {row[5] for row in every_part} <= {"index", "file"}


def _compaction_ids(root: Path) -> list[str]:
    with contextlib.closing(sqlite3.connect(root / "index.db")) as connection:
        return [row[0] for row in connection.execute("SELECT compaction_id FROM compactions")]


@pytest.mark.parametrize("query", _blocks("sql", INDEX_PAGE), ids=lambda query: query.splitlines()[0][:60])
def test_every_index_page_query_answers_on_a_real_run(demo_root: Path, query: str) -> None:
    with sqlite3.connect(demo_root / "index.db") as connection:
        rows = connection.execute(query).fetchall()
    assert rows, "the query returned nothing on a store filled by a real agent run"
    assert all(value is not None for row in rows for value in row)


@pytest.mark.parametrize("query", EXPLORE_QUERIES)
def test_the_demos_printed_queries_answer(demo_root: Path, query: str) -> None:
    with sqlite3.connect(demo_root / "index.db") as connection:
        namespace = connection.execute("SELECT namespace FROM offloads LIMIT 1").fetchone()[0]
        assert connection.execute(query.format(namespace=namespace)).fetchall()


@pytest.mark.slow
def test_the_agent_example_runs_and_prints_what_the_compactor_page_says(tmp_path: Path) -> None:
    """The agent example of docs/compactor.md, as written, run in an empty folder."""
    (example,) = [
        block
        for block in _blocks("python", COMPACTOR_PAGE)
        if "CompactionHook(compactor=DedupOffloadCompactor(store)" in block
    ]
    completed = subprocess.run(
        [sys.executable, "-c", example], cwd=tmp_path, capture_output=True, text=True, timeout=240, check=False
    )
    assert completed.returncode == 0, completed.stderr
    lines = completed.stdout.splitlines()
    log = "".join(f"test_case_{number} ... ok\n" for number in range(400))
    digest = blake3_hex(log.encode())
    reference = f"blake3/{digest[:2]}/{digest[2:]}.txt"

    # The matching lines the model found in the offloaded log: test_case_390 to 399, on lines 391 to 400.
    matches = [line for line in lines if re.fullmatch(r"\d+: test_case_\d+ \.\.\. ok", line)]
    assert matches == [f"{number + 1}: test_case_{number} ... ok" for number in range(390, 400)], completed.stdout
    assert "[No more matches.]" in lines
    # The model's answer.
    assert "All 400 tests pass; the last ten are listed above." in lines
    # One offloads row per offloaded result, each the same log under one reference, each saving tokens.
    rows = [ast.literal_eval(line) for line in lines if line.startswith("('run_tests', ")]
    assert rows, completed.stdout
    for tool_name, refs, original_tokens, saved_tokens in rows:
        assert (tool_name, json.loads(refs)) == ("run_tests", [reference])
        assert 0 < saved_tokens < original_tokens
    # Then (writes, blobs): every offload written, one blob stored.
    assert lines[-1] == repr((len(rows), 1)), completed.stdout
    assert (tmp_path / "tool_results" / "index.db").is_file()
