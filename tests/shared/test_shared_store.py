"""
What only the shared store has: its settings as secrets (serialization that writes no password or key), its
PostgreSQL schema and migrations (applied once by many processes at once, refused when the database holds something
else), the index page's SQL questions asked through `psql`, and real Haystack Agent runs over it, read back from another
replica.
"""

import copy
import json
import multiprocessing
import os
import re
import sqlite3
import subprocess
from collections.abc import Iterator
from contextlib import closing
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

import obstore
import psycopg
import pytest
from haystack.components.agents import Agent
from haystack.components.generators.chat import MockChatGenerator
from haystack.dataclasses import ChatMessage, ToolCall
from haystack.hooks.compaction import CompactionHook, ToolResultOffloadCompactor
from haystack.hooks.tool_result_offloading import AlwaysOffload, ToolResultOffloadHook
from haystack.tools import tool
from haystack.tools.tool import Tool
from haystack.utils import Secret

from casstore import (
    ContentAddressedToolResultStore,
    CorruptBlobError,
    SchemaError,
    SharedToolResultStore,
    StorageError,
)
from casstore.blobs.objects import object_name
from casstore.compactor import DedupOffloadCompactor, keep_in_context, make_read_tool
from casstore.compactor.read_tool import ReadOffloadedResultTool
from casstore.index.postgres import read_times_as_text
from casstore.index.postgres_schema import MIGRATION_NAMES
from casstore.maintenance.checks import collect_garbage, verify
from casstore.stores.local import RepositoryToolResultStore
from tests.docs.test_readme_examples import INDEX_QUESTIONS
from tests.helpers import blake3_hex
from tests.servers import PostgresServer, S3Location, postgres_binaries
from tests.store_backends import open_bucket

pytestmark = pytest.mark.filterwarnings("ignore::haystack.utils.experimental.ExperimentalWarning")

INDEX_URL_VARIABLE = "CASSTORE_INDEX_URL"
CASSTORE_TABLES = {
    "blobs",
    "blob_frames",
    "write_rows",
    "dictionaries",
    "dictionary_samples",
    "offloads",
    "compactions",
    "archives",
    "search_documents",
    "search_text",
    "search_entries",
    "search_namespaces",
    "search_state",
    "search_pending",
    "store_settings",
    "_casstore_migrations",
}
CASSTORE_VIEWS = {
    "writes",
    "dedup_summary",
    "namespace_summary",
    "repeated_results",
    "offload_summary",
    "offloaded_parts",
    "archived_parts",
}
PROCESSES = 8


class SharedFactory(Protocol):
    def __call__(self, namespace: str = "default", **settings: Any) -> SharedToolResultStore: ...


@pytest.fixture
def open_shared(
    postgres_url: str, s3_bucket_url: S3Location, monkeypatch: pytest.MonkeyPatch
) -> Iterator[SharedFactory]:
    """`open_shared(namespace=...)`: a store on the test's database and prefix, its URL a secret in the environment."""
    monkeypatch.setenv(INDEX_URL_VARIABLE, postgres_url)
    opened: list[SharedToolResultStore] = []

    def open_store(namespace: str = "default", **settings: Any) -> SharedToolResultStore:
        store = SharedToolResultStore(
            index_url=Secret.from_env_var(INDEX_URL_VARIABLE),
            blob_url=s3_bucket_url.url,
            blob_options=s3_bucket_url.options,
            namespace=namespace,
            **settings,
        )
        opened.append(store)
        return store

    yield open_store
    for store in opened:
        store.close()


def _state(url: str) -> dict[str, Any]:
    """Every relation in the database's default schema, with the rows of each table: to show nothing changed."""
    with closing(psycopg.connect(url, autocommit=True)) as connection:
        relations = connection.execute(
            "SELECT c.relname, c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'v', 'i', 'S') ORDER BY 1"
        ).fetchall()
        rows = {
            name: connection.execute(f'SELECT * FROM "{name}" ORDER BY 1').fetchall()
            for name, kind in relations
            if kind == "r"
        }
    return {"relations": relations, "rows": rows}


# --- Settings and serialization -------------------------------------------------------------------------------------


def test_to_dict_writes_no_secret_and_from_dict_rebuilds_a_working_store(
    open_shared: SharedFactory, postgres_server: PostgresServer, s3_bucket_url: S3Location
) -> None:
    store = open_shared(namespace="alice", inline_max=100, compression_level=5)
    small = store.write(key="a.txt", content="written before serializing")
    large = store.write(key="b.txt", content="x" * 1000 + "a large one, kept as an object")
    data = store.to_dict()
    text = json.dumps(data)
    for secret in (postgres_server.password, s3_bucket_url.env["AWS_SECRET_ACCESS_KEY"], "postgresql://"):
        assert secret not in text
    assert s3_bucket_url.env["AWS_ACCESS_KEY_ID"] not in text
    assert data["type"] == "casstore.stores.shared.SharedToolResultStore"
    assert data["init_parameters"]["index_url"] == {"type": "env_var", "env_vars": [INDEX_URL_VARIABLE], "strict": True}
    restored = SharedToolResultStore.from_dict(json.loads(text))
    try:
        assert (restored.namespace, restored.inline_max, restored.compression_level) == ("alice", 100, 5)
        assert (restored.blob_url, restored.blob_options) == (store.blob_url, store.blob_options)
        assert restored.read(small) == "written before serializing"
        assert restored.read(large) == "x" * 1000 + "a large one, kept as an object"
        assert restored.to_dict() == data
        assert postgres_server.password not in repr(restored)
    finally:
        restored.close()


def test_a_plain_string_url_is_a_token_that_is_never_written_out(
    postgres_url: str, postgres_server: PostgresServer, s3_bucket_url: S3Location
) -> None:
    with SharedToolResultStore(index_url=postgres_url, blob_url=s3_bucket_url.url) as store:
        assert store.read(store.write(key="a.txt", content="works")) == "works"
        with pytest.raises(ValueError, match=r"token .*Secret\.from_env_var\('CASSTORE_INDEX_URL'\)") as raised:
            store.to_dict()
        assert postgres_server.password not in str(raised.value)
        assert postgres_server.password not in repr(store)


@pytest.mark.parametrize(
    "key",
    ["access_key_id", "secret_access_key", "session_token", "aws_secret_access_key", "aws_access_key_id", "token"],
)
def test_credentials_in_blob_options_are_refused(postgres_url: str, s3_bucket_url: S3Location, key: str) -> None:
    with pytest.raises(ValueError, match="environment"):
        SharedToolResultStore(
            index_url=postgres_url, blob_url=s3_bucket_url.url, blob_options={**s3_bucket_url.options, key: "x"}
        )


def test_a_missing_url_is_a_clear_error(s3_bucket_url: S3Location, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(INDEX_URL_VARIABLE, raising=False)
    with pytest.raises(ValueError, match=INDEX_URL_VARIABLE):
        SharedToolResultStore(blob_url=s3_bucket_url.url)  # the default: Secret.from_env_var
    with pytest.raises(ValueError, match=f"No PostgreSQL URL: set {INDEX_URL_VARIABLE}"):
        SharedToolResultStore(
            index_url=Secret.from_env_var(INDEX_URL_VARIABLE, strict=False), blob_url=s3_bucket_url.url
        )
    monkeypatch.setenv(INDEX_URL_VARIABLE, "")
    with pytest.raises(ValueError, match=f"No PostgreSQL URL: set {INDEX_URL_VARIABLE}"):
        SharedToolResultStore(blob_url=s3_bucket_url.url)


# --- Schema and migrations ------------------------------------------------------------------------------------------


def test_the_schema_is_made_in_the_connections_default_schema(open_shared: SharedFactory, postgres_url: str) -> None:
    open_shared()
    with closing(psycopg.connect(postgres_url, autocommit=True)) as connection:
        assert connection.execute("SELECT current_schema()").fetchone() == ("public",)
        tables = {row[0] for row in connection.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}
        views = {row[0] for row in connection.execute("SELECT viewname FROM pg_views WHERE schemaname = 'public'")}
        migrations = connection.execute("SELECT name, applied_at FROM _casstore_migrations ORDER BY id").fetchall()
    assert tables == CASSTORE_TABLES
    assert views == CASSTORE_VIEWS
    assert tuple(name for name, _ in migrations) == MIGRATION_NAMES
    assert len(MIGRATION_NAMES) == len(list((Path(__file__).parents[2] / "migrations" / "postgresql").glob("*.sql")))
    assert all(isinstance(applied_at, datetime) and applied_at.tzinfo is not None for _, applied_at in migrations)
    before = _state(postgres_url)
    open_shared()  # opening again applies nothing
    assert _state(postgres_url) == before


def test_a_search_path_puts_the_index_in_another_schema(postgres_url: str, s3_bucket_url: S3Location) -> None:
    with closing(psycopg.connect(postgres_url, autocommit=True)) as connection:
        connection.execute("CREATE SCHEMA tenant_a")
    url = postgres_url + "?options=-csearch_path%3Dtenant_a"
    with SharedToolResultStore(index_url=url, blob_url=s3_bucket_url.url) as store:
        reference = store.write(key="a.txt", content="in tenant_a")
    with closing(psycopg.connect(postgres_url, autocommit=True)) as connection:
        in_schema: dict[str, int] = dict(
            connection.execute("SELECT schemaname, count(*) FROM pg_tables GROUP BY 1").fetchall()
        )
        assert connection.execute("SELECT reference FROM tenant_a.writes").fetchall() == [(reference,)]
    assert in_schema.get("public") is None
    assert in_schema["tenant_a"] == len(CASSTORE_TABLES)


def _connect_at_once(
    index_url: str, s3: tuple[str, dict[str, str], dict[str, str]], number: int, barrier: Any, results: Any
) -> None:
    """One process: wait for the others, then open the store on the fresh database, write and read."""
    try:
        blob_url, options, env = s3
        os.environ.update(env)
        barrier.wait(60)
        with SharedToolResultStore(index_url=index_url, blob_url=blob_url, blob_options=options) as store:
            reference = store.write(key=f"{number}.txt", content=f"written by process {number}")
            results.put(("ok", store.read(reference)))
    except BaseException as error:
        results.put(("error", f"{type(error).__name__}: {error}"))


@pytest.mark.slow
def test_processes_connecting_to_a_fresh_database_at_once_apply_each_migration_once(
    postgres_url: str, s3_bucket_url: S3Location
) -> None:
    # Not fork: this process runs obstore's and psycopg's threads. A fork server imports casstore once.
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(
        ["casstore.stores.shared", "casstore.index.postgres", "casstore.blobs.objects", __name__]
    )
    barrier = context.Barrier(PROCESSES)
    results = context.Queue()
    s3 = (s3_bucket_url.url, s3_bucket_url.options, s3_bucket_url.env)
    processes = [
        context.Process(target=_connect_at_once, args=(postgres_url, s3, number, barrier, results))
        for number in range(PROCESSES)
    ]
    for process in processes:
        process.start()
    try:
        outcomes = [results.get(timeout=120) for _ in processes]
    finally:
        for process in processes:
            process.join(30)
            if process.is_alive():
                process.kill()
    assert sorted(outcomes) == sorted(("ok", f"written by process {number}") for number in range(PROCESSES))
    rows = _state(postgres_url)["rows"]
    assert [row[1] for row in rows["_casstore_migrations"]] == list(MIGRATION_NAMES)
    assert len(rows["write_rows"]) == PROCESSES


def test_a_database_with_a_migration_this_release_does_not_know_is_refused_unchanged(
    open_shared: SharedFactory, postgres_url: str
) -> None:
    open_shared().write(key="a.txt", content="written by this release")
    with closing(psycopg.connect(postgres_url, autocommit=True)) as connection:
        connection.execute(
            "INSERT INTO _casstore_migrations (name, applied_at) VALUES ('0099_from_the_future', '2030-01-01 00:00:00')"
        )
    before = _state(postgres_url)
    with pytest.raises(SchemaError, match="0099_from_the_future") as raised:
        open_shared()
    assert "nothing was changed" in str(raised.value)
    assert _state(postgres_url) == before


def test_a_database_holding_another_applications_writes_table_is_refused_unchanged(
    open_shared: SharedFactory, postgres_url: str
) -> None:
    with closing(psycopg.connect(postgres_url, autocommit=True)) as connection:
        connection.execute("CREATE TABLE writes (id SERIAL PRIMARY KEY, author TEXT, body TEXT)")
        connection.execute("INSERT INTO writes (author, body) VALUES ('someone', 'their own data')")
    before = _state(postgres_url)
    with pytest.raises(SchemaError, match=r"tables named like casstore's \(writes\)"):
        open_shared()
    assert _state(postgres_url) == before
    assert "_casstore_migrations" not in before["rows"]


def test_gc_and_verify_never_touch_objects_outside_the_stores_prefix(
    open_shared: SharedFactory, s3_bucket_url: S3Location
) -> None:
    store = open_shared(inline_max=0)
    content = os.urandom(5000)
    reference = store.write(key="kept.bin", content=content)
    bucket, prefix = open_bucket(s3_bucket_url)
    name = object_name(blake3_hex(b"a blob of another store"))
    foreign = [f"{prefix}-sibling/{name}", f"{prefix}x/{name}", f"{prefix}/notes/{name}", f"{prefix}/readme.txt"]
    for path in [*foreign, f"{prefix}/{name}"]:  # the last: a stray blob object inside the store's own prefix
        obstore.put(bucket, path, b"not this store's")
    report = verify(store)
    assert (report.ok, report.stray_files) == (True, 1)
    removed = collect_garbage(store, grace=timedelta(0))
    assert (removed.stray_files_removed, removed.blobs_deleted) == (1, 0)
    left = {meta["path"] for batch in obstore.list(bucket) for meta in batch}
    assert set(foreign) <= left
    assert f"{prefix}/{name}" not in left
    assert store.read(reference) == content
    assert verify(store).clean


def test_an_object_store_outage_is_a_storage_error_never_corruption_and_passes(
    postgres_url: str, s3_bucket_url: S3Location, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(INDEX_URL_VARIABLE, postgres_url)
    options = {**s3_bucket_url.options, "max_retries": "0", "retry_timeout": "0.5", "connect_timeout": "1s"}
    with SharedToolResultStore(blob_url=s3_bucket_url.url, blob_options=options, inline_max=1024) as store:
        small = store.write(key="small.txt", content="kept in the index")
        large_content = os.urandom(10_000)
        large = store.write(key="large.bin", content=large_content)
        before = _state(postgres_url)["rows"]
        s3_bucket_url.server.stop_gateway()
        try:
            assert store.read(small) == "kept in the index"  # the index alone answers
            with pytest.raises(StorageError) as raised:
                store.read(large)
            assert not isinstance(raised.value, CorruptBlobError | FileNotFoundError)
            with pytest.raises(StorageError) as raised:
                store.write(key="new.bin", content=os.urandom(10_000))
            assert not isinstance(raised.value, CorruptBlobError)
            with pytest.raises(StorageError):
                verify(store)  # an outage is not a missing blob
            assert _state(postgres_url)["rows"] == before  # nothing recorded
        finally:
            s3_bucket_url.server.start_gateway()
        assert store.read(large) == large_content  # the same store, once the gateway is back
        after = os.urandom(10_000)
        assert store.read(store.write(key="after.bin", content=after)) == after
        assert verify(store).ok


# --- Agents ---------------------------------------------------------------------------------------------------------

STEPS = 8
CONTEXT_WINDOW = 8_000
TEST_LOG = "".join(f"tests/test_module_{number}.py::test_case PASSED\n" for number in range(90))


def _notes(number: int) -> str:
    return "".join(f"note {number}.{line}: measurement {number * line % 97} within bounds\n" for line in range(70))


@tool
def run_tests() -> str:
    """Run the test suite."""
    return TEST_LOG


@tool
def read_notes(number: int) -> str:
    """Read a file of notes."""
    return _notes(number)


class ScriptedModel:
    """Stands in for an LLM: runs the tests and reads notes each step, then reads an offloaded result back, answers."""

    def __init__(self) -> None:
        self.read_back: Any = None
        self.asked: str | None = None

    def __call__(self, messages: list[ChatMessage]) -> ChatMessage:
        steps = sum(bool(message.tool_calls) for message in messages)
        for message in messages:
            result = message.tool_call_result
            if result is not None and result.origin.id == "read" and "context_compaction" not in message.meta:
                self.read_back = result.result
        if steps < STEPS:
            return ChatMessage.from_assistant(
                tool_calls=[
                    ToolCall(tool_name="run_tests", arguments={}, id=f"tests_{steps}"),
                    ToolCall(tool_name="read_notes", arguments={"number": steps}, id=f"notes_{steps}"),
                ]
            )
        if self.asked is None:
            self.asked = next(
                message.meta["tool_result_offloaded"][0]
                for message in messages
                if message.tool_call_result is not None
                and message.tool_call_result.origin.id == "notes_1"
                and message.meta.get("tool_result_offloaded")
            )
            arguments = {"reference": self.asked}
            return ChatMessage.from_assistant(
                tool_calls=[ToolCall(tool_name="read_offloaded_result", arguments=arguments, id="read")]
            )
        return ChatMessage.from_assistant("Everything passes.")


def _run_compacting_agent(store: RepositoryToolResultStore, compactor: Any) -> tuple[ScriptedModel, list[ChatMessage]]:
    model = ScriptedModel()
    agent = Agent(
        chat_generator=MockChatGenerator(response_fn=model, meta={"usage": None}),
        tools=[run_tests, read_notes, make_read_tool(store)],
        hooks={"before_llm": [CompactionHook(compactor=compactor, context_window=CONTEXT_WINDOW)]},
        max_agent_steps=STEPS + 4,
    )
    agent.warm_up()
    result = agent.run(messages=[ChatMessage.from_user("Check the tests and the notes.")])
    assert result["last_message"].text == "Everything passes."
    return model, result["messages"]


def _offloaded(messages: list[ChatMessage]) -> dict[str, list[str]]:
    """:returns: The references of every offloaded tool result, by tool call id."""
    return {
        message.tool_call_result.origin.id or "": message.meta["tool_result_offloaded"]
        for message in messages
        if message.tool_call_result is not None and message.meta.get("tool_result_offloaded")
    }


def _original(call_id: str) -> str:
    return TEST_LOG if call_id.startswith("tests_") else _notes(int(call_id.removeprefix("notes_")))


def test_an_agent_with_the_dedup_compactor_and_another_replica_reading_back(
    open_shared: SharedFactory, postgres_url: str
) -> None:
    store = open_shared(namespace="run-1")
    model, messages = _run_compacting_agent(store, DedupOffloadCompactor(store))
    offloaded = _offloaded(messages)
    assert model.read_back == _notes(1)  # the model read the offloaded notes back, whole
    test_references = {ref for call_id, refs in offloaded.items() if call_id.startswith("tests_") for ref in refs}
    assert sum(call_id.startswith("tests_") for call_id in offloaded) >= 3 and len(test_references) == 1
    # Another replica (another store object, as another host would open) reads every reference the first wrote.
    replica = open_shared(namespace="run-1")
    replica_tool = make_read_tool(replica)
    for call_id, references in offloaded.items():
        assert [replica.read(reference) for reference in references] == [_original(call_id)]
        assert replica_tool.invoke(reference=references[0]) == _original(call_id)
    outsider = make_read_tool(open_shared(namespace="run-2"))
    foreign = next(iter(test_references))
    assert str(outsider.invoke(reference=foreign)).startswith(f"Error: no offloaded result at '{foreign}'.")
    with closing(psycopg.connect(postgres_url, autocommit=True)) as connection:
        rows = connection.execute("SELECT tool_call_id, refs FROM offloads").fetchall()
        blobs = connection.execute("SELECT count(*) FROM blobs").fetchone()
    assert sorted((call_id, json.loads(refs)) for call_id, refs in rows) == sorted(offloaded.items())
    assert blobs == (len({ref for refs in offloaded.values() for ref in refs}),)


def test_haystacks_own_offload_compactor_over_the_shared_store(open_shared: SharedFactory) -> None:
    store = open_shared(namespace="haystack")
    model, messages = _run_compacting_agent(store, ToolResultOffloadCompactor(store))
    offloaded = _offloaded(messages)
    assert len(offloaded) >= 3
    assert model.read_back == _notes(1)
    replica = open_shared(namespace="haystack")
    for call_id, references in offloaded.items():
        assert [replica.read(reference) for reference in references] == [_original(call_id)]


def test_haystacks_offload_hook_over_the_shared_store(open_shared: SharedFactory) -> None:
    store = open_shared(namespace="hook")
    seen: dict[str, ChatMessage] = {}

    def model(messages: list[ChatMessage]) -> ChatMessage:
        for message in messages:
            if message.tool_call_result is not None and message.tool_call_result.origin.id:
                seen[message.tool_call_result.origin.id] = message
        if "first" not in seen:
            return ChatMessage.from_assistant(tool_calls=[ToolCall(tool_name="run_tests", arguments={}, id="first")])
        if "read" not in seen:
            [reference] = seen["first"].meta["tool_result_offloaded"]
            arguments = {"reference": reference, "offset": 10, "limit": 3}
            return ChatMessage.from_assistant(
                tool_calls=[ToolCall(tool_name="read_offloaded_result", arguments=arguments, id="read")]
            )
        return ChatMessage.from_assistant("Done.")

    read_tool: Tool = make_read_tool(store)
    hook = ToolResultOffloadHook(store=store, offload_strategies=keep_in_context({"*": AlwaysOffload()}))
    agent = Agent(
        chat_generator=MockChatGenerator(response_fn=model, meta={"usage": None}),
        tools=[run_tests, read_tool],
        hooks={"after_tool": [hook]},
        max_agent_steps=6,
    )
    agent.warm_up()
    assert agent.run(messages=[ChatMessage.from_user("Do the tests pass?")])["last_message"].text == "Done."
    [reference] = seen["first"].meta["tool_result_offloaded"]
    assert open_shared(namespace="hook").read(reference) == TEST_LOG
    answer = seen["read"].tool_call_result
    assert answer is not None and isinstance(answer.result, str)
    assert answer.result.startswith("[Lines 10-12 of 90.]")
    assert "tests/test_module_9.py::test_case PASSED" in answer.result


# --- The index page's SQL questions, in psql ------------------------------------------------------------------------

_SQLITE_LAST_DAY = "datetime('now', '-1 day')"
_POSTGRES_LAST_DAY = "now() - INTERVAL '1 day'"


def _index_page_queries() -> list[str]:
    """The queries of docs/index.md."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "index.md").read_text(encoding="utf-8")
    return re.findall(r"```sql\n(.*?)```", page, re.DOTALL)


def for_postgres(query: str) -> str:
    """
    A query of docs/index.md in PostgreSQL's dialect: SQLite's `datetime('now', '-1 day')` as a timestamptz.
    (The parts of offloaded results are the view `offloaded_parts` on both engines, which reads `json_each`'s rows in
    each engine's own words.)
    """
    return query.replace(_SQLITE_LAST_DAY, _POSTGRES_LAST_DAY)


def _psql(url: str, query: str) -> subprocess.CompletedProcess[str]:
    psql = postgres_binaries() / "psql"
    return subprocess.run(
        [str(psql), "-X", "-A", "-t", "-F", "|", "-v", "ON_ERROR_STOP=1", "-d", url, "-c", query],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _comparable(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Rows with their compaction ids and times left out (they differ from run to run)."""
    uuid_or_time = re.compile(r"^([0-9a-f-]{32,36}|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3})$")
    return [
        tuple(None if isinstance(value, str) and uuid_or_time.match(value) else value for value in row) for row in rows
    ]


def test_the_index_page_questions_answer_in_psql_as_in_sqlite(
    open_shared: SharedFactory, postgres_url: str, tmp_path: Path
) -> None:
    queries = _index_page_queries()
    assert [query.splitlines()[0] for query in queries] == list(INDEX_QUESTIONS)
    shared = open_shared(namespace="demo")
    _run_compacting_agent(shared, DedupOffloadCompactor(shared))
    with ContentAddressedToolResultStore(tmp_path / "local", namespace="demo") as local:
        _run_compacting_agent(local, DedupOffloadCompactor(local))
    changed = []
    for query in queries:
        adapted = for_postgres(query)
        if adapted != query:
            changed.append(query.splitlines()[0])
            # As written for SQLite, PostgreSQL refuses it: the adaptation is needed.
            assert _psql(postgres_url, query).returncode != 0
        completed = _psql(postgres_url, adapted)
        assert completed.returncode == 0, f"{adapted}\n{completed.stderr}"
        assert completed.stdout.strip(), f"no rows: {adapted}"
        with closing(sqlite3.connect(tmp_path / "local" / "index.db")) as connection:
            expected = [tuple(row) for row in connection.execute(query)]
        with closing(psycopg.connect(postgres_url, autocommit=True)) as connection:
            read_times_as_text(connection)  # timestamptz as the text SQLite keeps
            answered = [tuple(row) for row in connection.execute(adapted).fetchall()]
        assert len(completed.stdout.strip().splitlines()) == len(answered)
        assert _comparable(answered) == _comparable(expected), query
    assert changed == ["-- What did compaction do in the last day, tool by tool?"]


# --- Serialized inside Haystack components --------------------------------------------------------------------------


def test_an_agent_over_the_shared_store_serializes_without_secrets_and_restores(
    open_shared: SharedFactory, postgres_server: PostgresServer, allow_casstore_deserialization: None
) -> None:
    store = open_shared(namespace="serialized")
    agent = Agent(
        chat_generator=MockChatGenerator(responses="done"),
        tools=[make_read_tool(store)],
        hooks={"before_llm": [CompactionHook(compactor=DedupOffloadCompactor(store), context_window=1_000)]},
    )
    data = agent.to_dict()
    text = json.dumps(data)
    assert postgres_server.password not in text
    restored = Agent.from_dict(json.loads(text))
    assert restored.to_dict() == data
    [hook] = restored.hooks["before_llm"]
    assert isinstance(hook, CompactionHook) and isinstance(hook.compactor, DedupOffloadCompactor)
    [read_tool] = restored.tools
    assert isinstance(read_tool, Tool)
    reference = store.write(key="r.txt", content="back")
    assert read_tool.invoke(reference=reference) == "back"
    for restored_store in (hook.compactor.store, read_tool.store):  # type: ignore[attr-defined]
        assert isinstance(restored_store, SharedToolResultStore) and restored_store.namespace == "serialized"
        restored_store.close()


@pytest.mark.parametrize("what", ["store", "compactor", "read tool"])
def test_from_dict_leaves_its_input_alone(
    open_shared: SharedFactory, allow_casstore_deserialization: None, what: str
) -> None:
    """
    As the local store's `from_dict` does, and as the compactor's and the read tool's say they do: the input is not
    changed, so the same data restores twice (two agents from one configuration).
    """
    store = open_shared(namespace="twice")
    reference = store.write(key="r.txt", content="restored twice")
    serialized: dict[str, tuple[Any, dict[str, Any]]] = {
        "store": (SharedToolResultStore, store.to_dict()),
        "compactor": (DedupOffloadCompactor, DedupOffloadCompactor(store).to_dict()),
        "read tool": (ReadOffloadedResultTool, make_read_tool(store).to_dict()),
    }
    cls, data = serialized[what]
    original = copy.deepcopy(data)
    for attempt in range(2):
        restored = cls.from_dict(data)
        assert data == original, f"from_dict changed its input (call {attempt + 1})"
        restored_store = restored if what == "store" else restored.store
        assert restored_store.read(reference) == "restored twice"
        restored_store.close()
