"""
Haystack's contract for a compactor: return None unless the conversation gets smaller. An archive whose note is
larger than the steps it would replace declines, before anything is written to the store or its history; the chain
passes over any compactor whose answer is no smaller; and a summary that would undo the saving is left out of the note.
"""

import asyncio
import logging

import pytest
from haystack.components.generators.chat import MockChatGenerator
from haystack.dataclasses import ChatMessage
from haystack.hooks.compaction import SlidingWindowCompactor
from haystack.hooks.tool_result_offloading import FileSystemToolResultStore
from haystack.token_counters import TokenCounter
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from casstore.compactor import CompactorChain, DedupOffloadCompactor, StepArchiveCompactor
from tests.compactor_helpers import PayloadCounter, tool_call, tool_result
from tests.store_backends import Backend

COUNTER = PayloadCounter()
HISTORY = ("writes", "blobs", "compactions", "archives")


def _over_target(first_result: str) -> tuple[list[ChatMessage], int]:
    """A long task, a step, and the newest step (kept), with a target only the first step's removal meets."""
    messages = [
        ChatMessage.from_user("The task, told at length: " + "detail " * 550),
        tool_call("t1"),
        tool_result(first_result, call_id="t1"),
        tool_call("t2"),
        tool_result("done", call_id="t2"),
    ]
    target = COUNTER.count([messages[0], *messages[3:]]) + 1
    # Haystack's sliding window removes that step here (and leaves its shorter note).
    removed = SlidingWindowCompactor(min_keep_steps=1).compact(messages, target, COUNTER)
    assert removed is not None and messages[1] not in removed and messages[3] in removed
    return messages, target


def _tiny_step_over_target() -> tuple[list[ChatMessage], int]:
    """The first step is a few tokens, fewer than the note that would replace it."""
    return _over_target("ok")


def _nothing_written(backend: Backend) -> bool:
    return all(backend.count(table) == 0 for table in HISTORY) and not backend.blob_names()


def test_an_archive_whose_note_outweighs_the_steps_declines_and_writes_nothing(backend: Backend) -> None:
    store = backend.open()
    messages, target = _tiny_step_over_target()
    compactor = StepArchiveCompactor(store=store)

    assert compactor.compact(messages, target, COUNTER) is None
    assert asyncio.run(compactor.compact_async(messages, target, COUNTER)) is None
    assert _nothing_written(backend)


def test_the_chain_declines_too_when_no_compactor_makes_it_smaller(backend: Backend) -> None:
    store = backend.open()
    messages, target = _tiny_step_over_target()
    chain = CompactorChain(compactors=[DedupOffloadCompactor(store=store), StepArchiveCompactor(store=store)])

    assert chain.compact(messages, target, COUNTER) is None
    assert asyncio.run(chain.compact_async(messages, target, COUNTER)) is None
    # The offload compactor records each call over the target, unchanged ones too; nothing was stored or archived.
    assert backend.count("writes") == backend.count("blobs") == backend.count("archives") == 0
    assert not backend.blob_names()
    recorded = backend.rows("SELECT tokens_before, tokens_after FROM compactions")
    assert {before - after for before, after in recorded} == {0}


def test_a_large_enough_step_is_still_archived(backend: Backend) -> None:
    store = backend.open()
    messages, target = _over_target("a long result " * 80)
    compacted = StepArchiveCompactor(store=store).compact(messages, target, COUNTER)

    assert compacted is not None and COUNTER.count(compacted) < COUNTER.count(messages)
    saved = backend.rows("SELECT saved_tokens FROM archives")
    assert saved == [(COUNTER.count(messages) - COUNTER.count(compacted),)] and saved[0][0] > 0


def test_a_summary_that_would_undo_the_saving_is_left_out(backend: Backend, caplog: pytest.LogCaptureFixture) -> None:
    store = backend.open()
    messages, target = _over_target("a long result " * 80)
    wordy = MockChatGenerator(responses=[ChatMessage.from_assistant("## Objective\n" + "- much to say\n" * 200)])
    with caplog.at_level(logging.WARNING):
        compacted = StepArchiveCompactor(store=store, summarizer=wordy).compact(messages, target, COUNTER)

    assert compacted is not None and COUNTER.count(compacted) < COUNTER.count(messages)
    note = next(message for message in compacted if "context_compaction" in message.meta)
    assert "archived to" in (note.text or "") and "Summary" not in (note.text or "")
    assert "the archive's note carries no summary" in caplog.text


class _Growing:
    """A compactor that breaks Haystack's contract: its answer is larger than what it was given."""

    def compact(
        self, messages: list[ChatMessage], target_tokens: int, token_counter: TokenCounter
    ) -> list[ChatMessage]:
        return [*messages, ChatMessage.from_user("More words than before.", meta={"context_compaction": {}})]

    async def compact_async(
        self, messages: list[ChatMessage], target_tokens: int, token_counter: TokenCounter
    ) -> list[ChatMessage]:
        return self.compact(messages, target_tokens, token_counter)


def test_the_chain_passes_over_an_answer_that_is_no_smaller() -> None:
    steps = [(tool_call(f"c{n}"), tool_result("x " * 50, call_id=f"c{n}")) for n in range(4)]
    messages = [ChatMessage.from_user("Task."), *(message for step in steps for message in step)]
    sliding = SlidingWindowCompactor(min_keep_steps=1)
    alone = sliding.compact(messages, 60, COUNTER)
    assert alone is not None

    assert CompactorChain(compactors=[_Growing()]).compact(messages, 60, COUNTER) is None
    assert CompactorChain(compactors=[_Growing(), sliding]).compact(messages, 60, COUNTER) == alone
    assert asyncio.run(CompactorChain(compactors=[_Growing(), sliding]).compact_async(messages, 60, COUNTER)) == alone


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sizes=st.lists(st.integers(min_value=0, max_value=60), min_size=1, max_size=8),
    task=st.integers(min_value=1, max_value=200),
    over=st.integers(min_value=1, max_value=200),
    min_keep_steps=st.integers(min_value=0, max_value=2),
)
def test_what_it_returns_is_always_smaller_than_what_it_was_given(
    tmp_path_factory: pytest.TempPathFactory, sizes: list[int], task: int, over: int, min_keep_steps: int
) -> None:
    messages = [ChatMessage.from_user("Task: " + "word " * task)]
    for number, size in enumerate(sizes):
        messages += [tool_call(f"s{number}"), tool_result("x " * size, call_id=f"s{number}")]
    target = max(COUNTER.count(messages) - over, 0)
    store = FileSystemToolResultStore(root=str(tmp_path_factory.mktemp("archive")))

    compacted = StepArchiveCompactor(store=store, min_keep_steps=min_keep_steps).compact(messages, target, COUNTER)
    assert compacted is None or COUNTER.count(compacted) < COUNTER.count(messages)
