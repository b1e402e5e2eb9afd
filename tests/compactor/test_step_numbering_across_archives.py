"""
Steps are numbered across the run, through every archive: one that held no step (only an earlier turn's user messages
and the note before it) carries the count on, so the next archive goes on from the last step ever archived.
"""

import sqlite3
import tempfile
from typing import Any

from haystack.dataclasses import ChatMessage, ChatRole
from haystack.hooks.tool_result_offloading import FileSystemToolResultStore
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from casstore import ContentAddressedToolResultStore
from casstore.compactor import StepArchiveCompactor
from tests.compactor_helpers import PayloadCounter, tool_call, tool_result

COUNTER = PayloadCounter()


def _steps(prefix: str, count: int, *, size: int = 100) -> list[ChatMessage]:
    ids = [f"{prefix}{n}" for n in range(count)]
    return [m for call_id in ids for m in (tool_call(call_id), tool_result("x " * size, call_id=call_id))]


def _marker(messages: list[ChatMessage]) -> dict[str, Any]:
    (marker,) = [m.meta["context_compaction"] for m in messages if "context_compaction" in m.meta]
    return dict(marker)


def test_an_archive_without_steps_carries_the_numbering_on(store: ContentAddressedToolResultStore) -> None:
    compactor = StepArchiveCompactor(store=store, min_keep_steps=0)
    first_task = ChatMessage.from_user("The first task, told at length: " + "detail " * 80)
    once = compactor.compact([first_task, *_steps("a", 6)], COUNTER.count([first_task]) + 60, COUNTER)
    assert once is not None and _marker(once)["first_step"] == 1 and _marker(once)["last_step"] == 6

    # A new task arrives: the earlier turn (its user message, then the note) is archived, and it holds no step.
    second_task = ChatMessage.from_user("The second task.")
    asked = [*once, second_task, *_steps("b", 1, size=10)]
    target = COUNTER.count(asked[len(once) :]) + 60
    twice = compactor.compact(asked, target, COUNTER)
    assert twice is not None and twice[-3:] == asked[-3:]
    assert _marker(twice)["first_step"] is None and _marker(twice)["last_step"] is None

    thrice = compactor.compact([*twice, *_steps("c", 4)], COUNTER.count([second_task]) + 60, COUNTER)
    assert thrice is not None
    marker = _marker(thrice)
    # The step of the second task and the four after it, numbered on from the six archived first.
    assert (marker["first_step"], marker["last_step"]) == (7, 11)
    note = next(m for m in thrice if "context_compaction" in m.meta)
    assert (note.text or "").startswith("Steps 7-11 (")
    with sqlite3.connect(store.root / "index.db") as db:
        rows = db.execute("SELECT first_step, last_step FROM archives ORDER BY id").fetchall()
    assert rows == [(1, 6), (None, None), (7, 11)]


@st.composite
def rounds(draw: st.DrawFn) -> list[tuple[str, int, int]]:
    """Rounds of a run: a new task or more steps, each followed by a compaction to a target of its own."""
    return draw(
        st.lists(
            st.tuples(
                st.sampled_from(["task", "steps"]),
                st.integers(min_value=1, max_value=4),
                st.integers(min_value=0, max_value=400),
            ),
            min_size=1,
            max_size=8,
        )
    )


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan=rounds(), min_keep_steps=st.integers(min_value=0, max_value=2))
def test_every_archive_numbers_its_steps_after_all_those_archived_before(
    plan: list[tuple[str, int, int]], min_keep_steps: int
) -> None:
    added = 0  # assistant messages the run has produced so far
    archived_before = 0
    messages: list[ChatMessage] = [ChatMessage.from_user("Task 0: " + "detail " * 40)]
    with tempfile.TemporaryDirectory() as folder:
        compactor = StepArchiveCompactor(store=FileSystemToolResultStore(root=folder), min_keep_steps=min_keep_steps)
        for number, (kind, count, target) in enumerate(plan):
            if kind == "task":
                messages = [*messages, ChatMessage.from_user(f"Task {number + 1}: " + "detail " * 40 * count)]
            else:
                messages = [*messages, *_steps(f"r{number}_", count, size=30 * count)]
                added += count
            compacted = compactor.compact(messages, target, COUNTER)
            if compacted is None:
                continue
            marker = _marker(compacted)
            archived = added - sum(1 for m in compacted if m.is_from(ChatRole.ASSISTANT))
            if marker["first_step"] is not None:
                assert (marker["first_step"], marker["last_step"]) == (archived_before + 1, archived)
            else:
                assert archived == archived_before
            assert marker["steps_archived"] == archived
            archived_before = archived
            messages = compacted
