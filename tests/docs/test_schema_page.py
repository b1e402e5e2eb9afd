"""
docs/schema.md's examples run as written: each `sqlite3` one on a local store's index.db, each `psql` one on a shared
store's PostgreSQL database, and those the page gives for both on both; on stores that learned (dictionaries and
deltas), and each answers with rows.
"""

import contextlib
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from haystack.utils import Secret

from casstore import ContentAddressedToolResultStore, SharedToolResultStore
from casstore.blobs import learning as learning_module
from tests.learned_crash_child import content_for
from tests.servers import S3Location

PAGE = Path(__file__).resolve().parents[2] / "docs" / "schema.md"
BOTH = "the same SQL in `psql`"
# An example: the command, and the SQL of its here-document.
_EXAMPLE = re.compile(r"```sh\n(sqlite3|psql) [^\n]*<<'SQL'\n(.*?)\nSQL\n```", flags=re.DOTALL)


def _found() -> list[tuple[str, str, str]]:
    """(the prose since the block before, command, SQL) of every example, in the page's order."""
    page = PAGE.read_text(encoding="utf-8")
    found, end = [], 0
    for match in _EXAMPLE.finditer(page):
        found.append((page[end : match.start()], match[1], match[2]))
        end = match.end()
    return found


def _examples(engine: str) -> list[str]:
    return [sql for prose, command, sql in _found() if command == engine or (command == "sqlite3" and BOTH in prose)]


def test_the_page_has_examples_for_each_engine() -> None:
    assert len(_found()) >= 6
    assert any("datetime(" in sql for sql in _examples("sqlite3"))
    assert any("now()" in sql for sql in _examples("psql"))
    assert not [sql for sql in _examples("psql") if "datetime(" in sql or "strftime(" in sql]


def _fill(store: ContentAddressedToolResultStore | SharedToolResultStore) -> None:
    """New versions of growing listings (deltas) and small records of two tools (dictionaries), all in `alice`."""
    for number in range(200):
        store.write(key=f"{number}_tool{number % 2}_call_{number:016x}.txt", content=content_for(number))


@pytest.fixture(scope="module")
def learned_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("schema")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(learning_module, "TRAIN_AFTER", 24)
        with ContentAddressedToolResultStore(root, namespace="alice") as store:
            _fill(store)
    return root


@pytest.mark.parametrize("sql", _examples("sqlite3"), ids=lambda sql: sql.splitlines()[0][:50])
def test_each_sqlite_example_answers_on_a_store_that_learned(learned_root: Path, sql: str) -> None:
    with contextlib.closing(sqlite3.connect(f"file:{learned_root / 'index.db'}?mode=ro", uri=True)) as connection:
        rows = connection.execute(sql).fetchall()
    assert rows and all(any(value is not None for value in row) for row in rows), rows


@pytest.fixture
def learned_index_url(postgres_url: str, s3_bucket_url: S3Location, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv("CASSTORE_INDEX_URL", postgres_url)
    monkeypatch.setattr(learning_module, "TRAIN_AFTER", 24)
    store = SharedToolResultStore(
        index_url=Secret.from_env_var("CASSTORE_INDEX_URL"),
        blob_url=s3_bucket_url.url,
        blob_options=s3_bucket_url.options,
        namespace="alice",
    )
    with store:
        _fill(store)
    yield postgres_url


@pytest.mark.slow
def test_each_psql_example_answers_on_a_shared_store_that_learned(learned_index_url: str) -> None:
    examples = _examples("psql")
    with contextlib.closing(psycopg.connect(learned_index_url, autocommit=True)) as connection:
        for sql in examples:
            rows = connection.execute(sql).fetchall()
            assert rows and all(any(value is not None for value in row) for row in rows), (sql, rows)
