"""
The `compactions` table: one row per `compact` call of `DedupOffloadCompactor` that found the conversation over its
target, on both engines, in an agent run, forgotten by gc with its offloads.
"""

import contextlib
import logging
import sqlite3
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from casstore import CompactionRecord, ContentAddressedToolResultStore, OffloadRecord
from casstore.compactor import DedupOffloadCompactor
from casstore.compactor.pointers import CASSTORE_META_KEY
from casstore.demo.session import CONTEXT_WINDOW, run_demo
from casstore.maintenance.checks import collect_garbage
from tests.compactor_helpers import PayloadCounter, zoo_conversation
from tests.store_backends import Backend, make_backend

pytestmark = pytest.mark.filterwarnings("ignore::haystack.utils.experimental.ExperimentalWarning")

COUNTER = PayloadCounter()
_COLUMNS = "compaction_id, namespace, tokens_before, tokens_after, target_tokens, context_window"


def _rows(root: Path, sql: str) -> list[tuple[Any, ...]]:
    with contextlib.closing(sqlite3.connect(root / "index.db")) as connection:
        return [tuple(row) for row in connection.execute(sql)]


def test_each_compaction_records_the_conversation_before_and_after(store: ContentAddressedToolResultStore) -> None:
    messages = zoo_conversation()
    before = COUNTER.count(messages=messages)
    target = before // 3
    compacted = DedupOffloadCompactor(store, min_tokens=0, context_window=before * 2).compact(messages, target, COUNTER)

    assert compacted is not None
    ((compaction_id, namespace, tokens_before, tokens_after, target_tokens, window, at),) = _rows(
        store.root, f"SELECT {_COLUMNS}, compacted_at FROM compactions"
    )
    assert (namespace, tokens_before, target_tokens, window) == ("default", before, target, before * 2)
    assert tokens_after == COUNTER.count(messages=compacted) < tokens_before
    # The same id as the call's offloads and as the offloaded messages' meta.
    assert {row[0] for row in _rows(store.root, "SELECT compaction_id FROM offloads")} == {compaction_id}
    ids = {
        message.meta[CASSTORE_META_KEY]["compaction_id"] for message in compacted if CASSTORE_META_KEY in message.meta
    }
    assert ids == {compaction_id}
    assert len(at) == 23 and at[10] == " "  # UTC, 'YYYY-MM-DD HH:MM:SS.SSS', as every time in the index


def test_a_call_under_its_target_records_nothing_and_one_that_finds_nothing_records_no_change(
    store: ContentAddressedToolResultStore,
) -> None:
    messages = zoo_conversation()
    size = COUNTER.count(messages=messages)
    compactor = DedupOffloadCompactor(store, min_tokens=10**9)  # nothing is large enough to offload

    assert compactor.compact(messages, size, COUNTER) is None  # fits already: not a compaction
    assert _rows(store.root, "SELECT count(*) FROM compactions") == [(0,)]
    assert compactor.compact(messages, size - 1, COUNTER) is None  # over, but nothing it may offload
    ((_, _, tokens_before, tokens_after, target, window),) = _rows(store.root, f"SELECT {_COLUMNS} FROM compactions")
    assert (tokens_before, tokens_after, target, window) == (size, size, size - 1, None)
    assert _rows(store.root, "SELECT count(*) FROM offloads") == [(0,)]


@pytest.mark.parametrize("window", [0, -5, True, 1.5, "16000"])
def test_a_context_window_that_is_not_a_positive_whole_number_is_refused(
    store: ContentAddressedToolResultStore, window: Any
) -> None:
    with pytest.raises(ValueError, match="context_window"):
        DedupOffloadCompactor(store, context_window=window)


def test_the_context_window_survives_serialization(
    store: ContentAddressedToolResultStore, allow_casstore_deserialization: None
) -> None:
    compactor = DedupOffloadCompactor(store, context_window=128_000)
    assert compactor.to_dict()["init_parameters"]["context_window"] == 128_000
    rebuilt = DedupOffloadCompactor.from_dict(compactor.to_dict())
    assert rebuilt.context_window == 128_000
    assert DedupOffloadCompactor.from_dict(DedupOffloadCompactor(store).to_dict()).context_window is None


def test_a_history_that_cannot_be_recorded_leaves_the_compaction_done(
    store: ContentAddressedToolResultStore, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def refuse(**_: Any) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(store, "record_compaction", refuse)
    with caplog.at_level(logging.WARNING):
        compacted = DedupOffloadCompactor(store, min_tokens=0).compact(zoo_conversation(), 0, COUNTER)
    assert compacted is not None  # the results are stored and referenced
    assert "tool results to ContentAddressedToolResultStore, but could not record the compaction" in caplog.text
    assert _rows(store.root, "SELECT count(*) FROM compactions") == [(0,)]


def test_a_compaction_that_offloaded_nothing_and_cannot_be_recorded_says_so(
    store: ContentAddressedToolResultStore, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def refuse(**_: Any) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(store, "record_compaction", refuse)
    with caplog.at_level(logging.WARNING):
        # Over its target, but every result is too small to offload: only the compaction's row was to be written.
        assert DedupOffloadCompactor(store, min_tokens=10**6).compact(zoo_conversation(), 0, COUNTER) is None
    assert "Compacted with ContentAddressedToolResultStore, but could not record the compaction" in caplog.text
    assert "Offloaded 0" not in caplog.text


def test_an_agent_run_records_every_compaction_with_its_window(tmp_path: Path) -> None:
    root = tmp_path / "store"
    summary = run_demo(root=root, steps=40)
    rows = _rows(root, f"SELECT {_COLUMNS} FROM compactions WHERE namespace = '{summary.namespace}'")
    offloaded = {row[0] for row in _rows(root, "SELECT DISTINCT compaction_id FROM offloads")}
    assert rows and offloaded <= {row[0] for row in rows}  # every compaction that offloaded is recorded
    for _, _, before, after, target, window in rows:
        assert window == CONTEXT_WINDOW
        assert after <= before and before > target  # each found the conversation over its target
    assert sum(1 for row in rows if row[0] in offloaded) == summary.compactions


@pytest.fixture(params=["local", "shared"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    made = make_backend(request.param, request, tmp_path)
    yield made
    made.close()


def test_both_engines_record_a_compaction_with_its_offloads_and_gc_forgets_them(backend: Backend) -> None:
    store = backend.open(namespace="alice")
    reference = store.write(key="a.txt", content="a result " * 100)
    store.record_compaction(
        compaction_id="c1",
        compaction=CompactionRecord(tokens_before=900, tokens_after=300, target_tokens=400, context_window=None),
        offloads=[OffloadRecord("read_file", "call_1", [reference], 600, 590)],
    )
    store.record_compaction(compaction_id="c2", compaction=CompactionRecord(500, 500, 400, 16_000))
    assert backend.rows(f"SELECT {_COLUMNS} FROM compactions ORDER BY id") == [
        ("c1", "alice", 900, 300, 400, None),
        ("c2", "alice", 500, 500, 400, 16_000),
    ]
    assert backend.rows("SELECT compaction_id, saved_tokens FROM offloads") == [("c1", 590)]
    # A compaction's id is unique: recording it twice fails, and the second call's offloads are not recorded either.
    with pytest.raises(Exception):  # noqa: B017 - each engine's own integrity error
        store.record_compaction(
            compaction_id="c1",
            compaction=CompactionRecord(1, 1, 1),
            offloads=[OffloadRecord("read_file", "call_2", [reference], 10, 5)],
        )
    assert backend.count("offloads") == 1
    collect_garbage(store, namespace=None, older_than=timedelta(days=1), grace=timedelta(hours=1))
    assert backend.count("compactions") == 2  # recent: kept
    collect_garbage(store, namespace="alice", older_than=None, grace=timedelta(hours=1))
    assert backend.count("compactions") == 0 and backend.count("offloads") == 0
