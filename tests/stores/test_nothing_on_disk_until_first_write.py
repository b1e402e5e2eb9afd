"""
A store creates nothing on disk until its first write, as Haystack's `FileSystemToolResultStore` creates its folder
only then: a server that makes one store per request leaves nothing behind for a request that offloaded nothing.
Until that write a store reads as an empty one; it sees what another process creates and writes there meanwhile; and
an existing index is still opened and checked when the store is made.
"""

import contextlib
import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from haystack.components.agents import Agent
from haystack.components.generators.chat import MockChatGenerator
from haystack.dataclasses import ChatMessage, ToolCall
from haystack.hooks.tool_result_offloading import (
    RESULT_STORE_CONTEXT_KEY,
    AlwaysOffload,
    OffloadOverChars,
    ToolResultOffloadHook,
)
from haystack.tools import tool

from casstore import (
    ContentAddressedToolResultStore,
    IndexDamagedError,
    InvalidKeyError,
    OffloadRecord,
    ReferenceNotFoundError,
    SchemaError,
)
from casstore.cli import cli
from casstore.compactor import keep_in_context, make_read_tool
from casstore.history import stats as history
from casstore.index.schema import MIGRATION_NAMES, MIGRATION_SET, MIGRATIONS
from casstore.maintenance import checks as maintenance
from tests.helpers import create_store, tree_fingerprint
from tests.reliability_helpers import collect, fork_job

NOWHERE = "blake3/00/" + "0" * 62 + ".txt"
# A child process that writes into a store: `root`, then `key=content` pairs; prints the references as JSON.
WRITER = """
import json, sys
from casstore import ContentAddressedToolResultStore
with ContentAddressedToolResultStore(sys.argv[1], namespace="other") as store:
    print(json.dumps([store.write(key=key, content=content) for key, content in
                      (pair.split("=", 1) for pair in sys.argv[2:])]))
"""


def _everything_under(folder: Path) -> list[str]:
    return sorted(str(path.relative_to(folder)) for path in folder.rglob("*"))


def test_a_store_that_is_never_written_creates_nothing(tmp_path: Path) -> None:
    root = tmp_path / "deep" / "store"
    store = ContentAddressedToolResultStore(root, namespace="alice")
    reference = store.prepare_write(key="a.txt", content="not stored").reference
    for missing in (reference, NOWHERE):
        with pytest.raises(ReferenceNotFoundError):
            store.read(missing)
    figures = history.stats(store)
    assert (figures.writes, figures.blobs, figures.logical_bytes, figures.disk_bytes) == (0, 0, 0, 0)
    assert (figures.dedup_ratio, figures.compression_ratio, figures.namespaces, figures.tools) == (None, None, [], [])
    assert history.namespaces(store) == [] and history.offload_log(store) == []
    assert history.namespaces_holding(store, reference) == []
    report = maintenance.verify(store)
    assert report.ok and report.clean and report.blobs_checked == 0
    preview = maintenance.collect_garbage(store, dry_run=True)
    assert preview.blobs_deleted == 0
    # Sizes as for an empty store: nothing before and nothing after, not the pages of an index yet to be made.
    sizes = (preview.index_bytes_before, preview.index_bytes_after, preview.blob_bytes_before, preview.blob_bytes_after)
    assert sizes == (0, 0, 0, 0)
    assert maintenance.collect_garbage(store, namespace="alice").writes_forgotten == 0
    store.close()
    assert not (tmp_path / "deep").exists()


def test_an_existing_empty_folder_stays_empty_and_a_refused_write_creates_nothing(tmp_path: Path) -> None:
    with ContentAddressedToolResultStore(tmp_path) as store:
        with pytest.raises(InvalidKeyError):
            store.write(key="", content="x")
        with pytest.raises(TypeError):
            store.write(key="a.txt", content=None)  # type: ignore[arg-type]
        with pytest.raises(ReferenceNotFoundError):
            store.read(NOWHERE)
    assert _everything_under(tmp_path) == []


def test_the_first_write_creates_the_store_and_inline_content_needs_no_blob_folder(tmp_path: Path) -> None:
    root = tmp_path / "store"
    with ContentAddressedToolResultStore(root) as store:
        small = store.write(key="small.txt", content="a small result\n" * 10)
        assert sorted(path.name for path in root.iterdir()) == ["index.db", "index.db-shm", "index.db-wal"]
        large = store.write(key="large.bin", content=os.urandom(200_000))  # incompressible: a file of its own
        assert (root / "blobs").is_dir()
        assert store.read(small) == "a small result\n" * 10 and len(store.read(large)) == 200_000
    with sqlite3.connect(root / "index.db") as connection:
        applied = connection.execute("SELECT name FROM _sqlite_migrations ORDER BY id").fetchall()
    assert [name for (name,) in applied] == list(MIGRATION_NAMES)


def test_an_existing_index_is_still_checked_when_the_store_is_made(tmp_path: Path) -> None:
    newer, damaged = tmp_path / "newer", tmp_path / "damaged"
    create_store(newer)
    with sqlite3.connect(newer / "index.db") as connection:
        connection.execute(
            "INSERT INTO _sqlite_migrations (migration_set, name, applied_at) VALUES (?, ?, ?)",
            (MIGRATION_SET, "9999_from_the_future", "2030-01-01"),
        )
    damaged.mkdir()
    (damaged / "index.db").write_bytes(b"this is not a database" * 200)
    before = tree_fingerprint(tmp_path)
    with pytest.raises(SchemaError, match="newer casstore"):
        ContentAddressedToolResultStore(newer)
    with pytest.raises(IndexDamagedError):
        ContentAddressedToolResultStore(damaged)
    assert tree_fingerprint(tmp_path) == before


def test_a_store_made_before_another_process_creates_the_index_sees_its_writes(tmp_path: Path) -> None:
    root = tmp_path / "store"
    early = ContentAddressedToolResultStore(root, namespace="other")
    with pytest.raises(ReferenceNotFoundError):
        early.read(NOWHERE)  # nothing there yet: read as an empty store
    completed = subprocess.run(
        [sys.executable, "-c", WRITER, str(root), "a.txt=written by another process", "b.txt=and another"],
        capture_output=True,
        text=True,
        check=True,
    )
    first, second = json.loads(completed.stdout)
    assert early.read(first) == "written by another process"  # the index the other process created, opened now
    assert history.stats(early).writes == 2
    third = early.write(key="c.txt", content="and one from here")  # opens the existing index: no second schema
    with sqlite3.connect(root / "index.db") as connection:
        names = connection.execute("SELECT name FROM _sqlite_migrations").fetchall()
        writes = connection.execute("SELECT reference FROM writes ORDER BY id").fetchall()
    assert len(names) == len(MIGRATION_NAMES)
    assert [reference for (reference,) in writes] == [first, second, third]
    early.close()


def test_a_store_made_before_another_creates_the_index_writes_into_it(tmp_path: Path) -> None:
    root = tmp_path / "store"
    early = ContentAddressedToolResultStore(root, namespace="other")  # nothing on disk, nothing read yet
    subprocess.run([sys.executable, "-c", WRITER, str(root), "a.txt=first"], capture_output=True, check=True)
    reference = early.write(key="b.txt", content="second")
    assert early.read(reference) == "second"
    assert history.stats(early).writes == 2
    early.close()


# Processes that do their first write into the same new folder at once, round after round: each waits for the
# round's start file, then writes shared and own content and reports its references.
RACER = """
import json, os, sys, time
from casstore import ContentAddressedToolResultStore
base, process, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for number in range(rounds):
    deadline = time.monotonic() + 60
    while not os.path.exists(os.path.join(base, f"go-{number}")):
        if time.monotonic() > deadline:
            sys.exit("no start signal")
        time.sleep(0.001)
    with ContentAddressedToolResultStore(os.path.join(base, f"store-{number}"), namespace=f"p{process}") as store:
        references = [store.write(key="shared.txt", content="the same result\\n" * 50),
                      store.write(key="own.txt", content=f"process {process} round {number}\\n" * 50),
                      store.write(key="big.bin", content=bytes([process]) * 300_000)]
    print(json.dumps(references), flush=True)
"""


@pytest.mark.slow
def test_processes_creating_the_same_store_at_once_create_it_once(tmp_path: Path) -> None:
    processes, rounds = 4, 6
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", RACER, str(tmp_path), str(process), str(rounds)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for process in range(processes)
    ]
    time.sleep(2)  # let them import, so that they meet the start signal together
    for number in range(rounds):
        (tmp_path / f"go-{number}").touch()
    outcomes = [racer.communicate(timeout=240) for racer in racers]
    for racer, (_, errors) in zip(racers, outcomes, strict=True):
        assert racer.returncode == 0, errors
    reported = [[json.loads(line) for line in out.splitlines()] for out, _ in outcomes]
    for number in range(rounds):
        root = tmp_path / f"store-{number}"
        with sqlite3.connect(root / "index.db") as connection:
            names = [name for (name,) in connection.execute("SELECT name FROM _sqlite_migrations ORDER BY id")]
            writes = connection.execute("SELECT count(*), count(DISTINCT digest) FROM writes").fetchone()
        assert names == list(MIGRATION_NAMES)  # the schema applied once, whoever came first
        assert writes == (3 * processes, 1 + 2 * processes)
        with ContentAddressedToolResultStore(root, namespace="p0") as store:
            assert store.read(reported[0][number][0]) == "the same result\n" * 50
            report = maintenance.verify(store)
        assert report.clean and report.blobs_checked == 1 + 2 * processes


def test_the_first_write_waits_while_another_process_holds_the_new_index_files_write_lock(tmp_path: Path) -> None:
    # A process creating the same index at once has written the new file's first page and holds its write lock, as
    # while it switches the file to its write-ahead log: SQLite refuses another connection's switch at once then,
    # without waiting its busy timeout, so the store must wait for the lock itself.
    root = tmp_path / "store"
    root.mkdir()
    other = sqlite3.connect(root / "index.db", isolation_level=None, check_same_thread=False)
    other.execute("PRAGMA auto_vacuum = INCREMENTAL")
    other.execute("PRAGMA user_version = 0")  # the first page written, still in the rollback journal's mode
    other.execute("BEGIN IMMEDIATE")
    release = threading.Timer(1.0, other.execute, args=("COMMIT",))
    release.start()
    try:
        with ContentAddressedToolResultStore(root) as store:
            reference = store.write(key="a.txt", content="written once the other let go\n")
            assert store.read(reference) == "written once the other let go\n"
    finally:
        release.join(timeout=30)
        other.close()
    with contextlib.closing(sqlite3.connect(root / "index.db")) as connection:
        assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        names = [name for (name,) in connection.execute("SELECT name FROM _sqlite_migrations ORDER BY id")]
    assert names == list(MIGRATION_NAMES)


def test_threads_doing_the_first_write_of_one_store_object_at_once(tmp_path: Path) -> None:
    store = ContentAddressedToolResultStore(tmp_path / "store")
    start = threading.Barrier(8)
    references: dict[int, str] = {}
    failures: list[BaseException] = []

    def first_write(number: int) -> None:
        start.wait(timeout=30)
        try:
            references[number] = store.write(key=f"{number}.txt", content=f"thread {number}\n" * 100)
        except BaseException as error:  # reported below, with the others
            failures.append(error)

    threads = [threading.Thread(target=first_write, args=(number,)) for number in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert failures == []
    assert {number: store.read(reference) for number, reference in references.items()} == {
        number: f"thread {number}\n" * 100 for number in range(8)
    }
    store.close()


def test_a_forked_child_creates_the_store_its_parent_made_lazily(tmp_path: Path) -> None:
    root = tmp_path / "store"
    store = ContentAddressedToolResultStore(root)
    with pytest.raises(ReferenceNotFoundError):
        store.read(NOWHERE)  # the parent used its empty stand-in before the fork
    child = fork_job(lambda: {"reference": store.write(key="a.txt", content="from the child")})
    reference = collect(*child)["reference"]
    assert store.read(reference) == "from the child"  # the parent opens what the child created
    store.close()


def test_record_offloads_alone_creates_the_store(tmp_path: Path) -> None:
    with ContentAddressedToolResultStore(tmp_path / "store", namespace="n") as store:
        store.record_offloads(compaction_id="c", offloads=[OffloadRecord("tool", None, [NOWHERE], 10, 5)])
        assert [entry.tool_name for entry in history.offload_log(store)] == ["tool"]
    assert (tmp_path / "store" / "index.db").is_file()


@tool
def short_answer() -> str:
    """Answer with a short line."""
    return "a short line"


@tool
def long_log() -> str:
    """Answer with a long log."""
    return "".join(f"test_case_{number} ... ok\n" for number in range(400))


def _request(store: ContentAddressedToolResultStore, hook: ToolResultOffloadHook, tool_name: str) -> None:
    """One request of a server: an Agent run whose model calls `tool_name` once, with the request's own store."""

    def model(messages: list[ChatMessage]) -> ChatMessage:
        if not any(message.tool_call_result for message in messages):
            return ChatMessage.from_assistant(tool_calls=[ToolCall(tool_name=tool_name, arguments={})])
        return ChatMessage.from_assistant("Done.")

    agent = Agent(
        chat_generator=MockChatGenerator(response_fn=model),
        tools=[short_answer, long_log, make_read_tool(store)],
        hooks={"after_tool": [hook]},
    )
    agent.run(messages=[ChatMessage.from_user("Go.")], hook_context={RESULT_STORE_CONTEXT_KEY: store})


def test_an_agent_server_with_a_store_per_request_leaves_nothing_for_requests_that_offload_nothing(
    tmp_path: Path,
) -> None:
    """Haystack's `hook_context` pattern, as the issue measured it: one store per request, most offload nothing."""
    default = ContentAddressedToolResultStore(tmp_path / "default")
    hook = ToolResultOffloadHook(
        store=default, offload_strategies=keep_in_context({"*": OffloadOverChars(threshold=1_000)})
    )
    for number in range(5):
        with ContentAddressedToolResultStore(tmp_path / "requests" / f"r{number}", namespace=f"r{number}") as store:
            _request(store, hook, "short_answer")
    assert not (tmp_path / "requests").exists() and not (tmp_path / "default").exists()
    with ContentAddressedToolResultStore(tmp_path / "requests" / "offloading", namespace="o") as store:
        _request(store, hook, "long_log")  # the control: a request that offloads has its store
        assert history.stats(store).writes == 1
    assert _everything_under(tmp_path) == ["requests", "requests/offloading", "requests/offloading/index.db"]
    default.close()


def test_the_hook_with_always_offload_creates_the_store_on_its_first_result(tmp_path: Path) -> None:
    store = ContentAddressedToolResultStore(tmp_path / "store")
    hook = ToolResultOffloadHook(store=store, offload_strategies={"*": AlwaysOffload()})
    assert not (tmp_path / "store").exists()
    _request(store, hook, "short_answer")
    assert (tmp_path / "store" / "index.db").is_file()
    store.close()


@pytest.mark.parametrize(
    "arguments",
    [
        ["stats"],
        ["stats", "--json"],
        ["log"],
        ["cat", NOWHERE],
        ["verify"],
        ["gc"],
        ["gc", "--dry-run"],
        ["copy", "--to-index", "postgresql://nowhere.invalid/db", "--to-blobs", "s3://nowhere/prefix"],
    ],
)
@pytest.mark.parametrize("exists", [True, False])
def test_the_command_on_a_folder_without_an_index_says_so_and_creates_nothing(
    tmp_path: Path, arguments: list[str], exists: bool
) -> None:
    root = tmp_path / "store"
    if exists:
        root.mkdir()
    result = CliRunner().invoke(cli, [*arguments, "--root", str(root)], catch_exceptions=False)
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        f"casstore: error: no casstore store at {root} (no index.db): pass --root with a store's folder, or set "
        "CASSTORE_ROOT (or CASSTORE_INDEX_URL and CASSTORE_BLOB_URL for a shared store); a store is created by its "
        "first write, such as casstore demo."
    ]
    assert root.exists() == exists and (not exists or _everything_under(root) == [])


def test_opening_reads_the_record_of_migrations_and_the_tables_in_one_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """
    Another process may commit a new index's schema while this one checks the file: the check must not see the
    tables of that commit without its record of migrations (which reads as another application's database).
    """
    root = tmp_path / "store"
    root.mkdir()
    with contextlib.closing(sqlite3.connect(root / "index.db")) as connection:
        connection.execute("PRAGMA journal_mode=WAL")  # so that another writer may commit beside this reader
    applied = MIGRATIONS.applied  # the object the index layer asks, patched on it
    created: list[bool] = []

    def applied_then_created_elsewhere(db: object) -> object:
        found = applied(db)  # type: ignore[arg-type]
        if not created:
            created.append(True)
            with ContentAddressedToolResultStore(root, namespace="other") as other:
                other.write(key="1.txt", content="written by the other process")
        return found

    monkeypatch.setattr(MIGRATIONS, "applied", applied_then_created_elsewhere)
    with ContentAddressedToolResultStore(root, namespace="other") as store:
        assert created == [True]  # the other index was created between the two reads
        assert store.read(store.write(key="2.txt", content="and this one")) == "and this one"
