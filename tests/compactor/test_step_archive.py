"""
`StepArchiveCompactor` on its own: it removes exactly what Haystack's `SlidingWindowCompactor` removes, writes it to
the store as one readable transcript, leaves one note that names it, records it in the history, and serializes.
"""

import asyncio
import json
import logging
import re
import sqlite3
import tempfile
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from haystack.components.generators.chat import MockChatGenerator
from haystack.dataclasses import ChatMessage, TextContent, ToolCall
from haystack.hooks.compaction import SlidingWindowCompactor
from haystack.hooks.tool_result_offloading import FileSystemToolResultStore
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from casstore import ContentAddressedToolResultStore
from casstore.cli import cli
from casstore.compactor import DedupOffloadCompactor, StepArchiveCompactor, make_read_tool, make_search_tool
from casstore.compactor.archive_note import ArchivedSpan, archive_note
from casstore.maintenance.checks import collect_garbage
from tests.compactor_helpers import (
    PayloadCounter,
    file_block,
    image_block,
    pdf_bytes,
    png_bytes,
    tool_call,
    tool_pairs_intact,
    tool_result,
    zoo_conversation,
)

COUNTER = PayloadCounter()
_REFERENCE = re.compile(r"'(blake3/[^']+)'")


def _note(messages: list[ChatMessage]) -> ChatMessage:
    (note,) = [message for message in messages if "context_compaction" in message.meta and not message.tool_calls]
    return note


def _reference(note: ChatMessage) -> str:
    (reference,) = _REFERENCE.findall(note.text or "")
    return str(reference)


def _without_notes(messages: list[ChatMessage]) -> tuple[list[ChatMessage], list[int]]:
    notes = [index for index, message in enumerate(messages) if message.is_from("user") and message.meta]
    return [message for index, message in enumerate(messages) if index not in notes], notes


def _left_out(messages: list[ChatMessage], kept: list[ChatMessage]) -> list[ChatMessage]:
    """:returns: The messages not in `kept`, a subsequence of `messages` (compared in order, so repeats count once)."""
    left_out, position = [], 0
    for message in messages:
        if position < len(kept) and message == kept[position]:
            position += 1
        else:
            left_out.append(message)
    return left_out


@st.composite
def conversations(draw: st.DrawFn) -> list[ChatMessage]:
    """A system prompt or none, earlier turns, the task, then steps of zero to three results, of varied sizes."""
    words = st.integers(min_value=1, max_value=120).map(lambda count: "word " * count)
    messages = [ChatMessage.from_system("You are an agent.")] if draw(st.booleans()) else []
    calls = 0
    for turn in range(draw(st.integers(min_value=0, max_value=3))):
        messages.append(ChatMessage.from_user(f"Earlier question {turn}: {draw(words)}"))
        messages.append(ChatMessage.from_assistant(f"Earlier answer {turn}: {draw(words)}"))
    messages.append(ChatMessage.from_user("The task."))
    for _ in range(draw(st.integers(min_value=0, max_value=8))):
        ids = [f"c{calls + n}" for n in range(draw(st.integers(min_value=0, max_value=3)))]
        calls += len(ids)
        if ids:
            messages.append(tool_call(*ids))
            messages += [tool_result(draw(words), call_id=call_id) for call_id in ids]
        else:
            messages.append(ChatMessage.from_assistant(f"Thinking: {draw(words)}"))
    return messages


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    messages=conversations(),
    target=st.integers(min_value=0, max_value=600),
    min_keep_steps=st.integers(min_value=0, max_value=3),
)
def test_it_removes_what_haystacks_sliding_window_removes(
    messages: list[ChatMessage], target: int, min_keep_steps: int
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        files = FileSystemToolResultStore(root=folder)
        archived = StepArchiveCompactor(store=files, min_keep_steps=min_keep_steps).compact(messages, target, COUNTER)
        written = sorted(Path(folder).rglob("*.md"))
    theirs = SlidingWindowCompactor(min_keep_steps=min_keep_steps).compact(messages, target, COUNTER)

    if theirs is None:
        assert archived is None
    elif archived is None:
        # Haystack's note is shorter than ours: ours declines where its note would leave the conversation no smaller.
        kept, (index,) = _without_notes(theirs)
        removed = _left_out(messages, kept)
        (transcript,) = written
        note = archive_note(
            ArchivedSpan.of(removed),
            reference=str(transcript),
            kept_messages=len(kept),
            read_tool_name="read_offloaded_result",
            search_tool_name="search_offloaded_results",
            summary=None,
            compaction_id=None,
        )
        assert COUNTER.count([*kept[:index], note, *kept[index:]]) >= COUNTER.count(messages)
    else:
        assert COUNTER.count(archived) < COUNTER.count(messages)
        # The same messages kept, in the same order, and the note where Haystack puts its own.
        assert _without_notes(archived) == _without_notes(theirs)
        assert "archived" in (_note(archived).text or "") and tool_pairs_intact(archived)


def test_the_transcript_holds_every_message_and_names_what_was_offloaded(
    store: ContentAddressedToolResultStore,
) -> None:
    messages = zoo_conversation()
    compacted = StepArchiveCompactor(store=store).compact(messages, 0, COUNTER)

    assert compacted is not None
    # The system prompt, the task and the newest step stay; the note stands after the task.
    assert compacted[0] == messages[0] and compacted[1] == messages[5]
    assert compacted[2].meta["context_compaction"]["strategy"] == "step_archive" and compacted[3:] == messages[-3:]
    note = compacted[2]
    assert note.is_from("user") and note.text is not None
    assert note.text.startswith("Steps 1-8 (18 messages) were archived to 'blake3/")
    assert note.text.endswith(
        "read them with read_offloaded_result, or find something in them with search_offloaded_results."
    )
    transcript = store.read(_reference(note))
    assert isinstance(transcript, str)
    assert transcript.startswith("# Archived conversation: Steps 1-8 (18 messages)\n")
    for text in (
        "Earlier task: look things up.",
        "## 1. user",
        "## 2. assistant",
        "Earlier answer.",
        'Tool call `search` (id c2) with arguments {"q": "c2"}',
        "tool result of `search` (id c4), error",
        "alpha beta gamma delta",
        "the quick brown fox jumps",
    ):
        assert text in transcript, text
    # A result offloaded before is its reference, not a copy.
    assert "## 14. tool result of `search` (id c7), offloaded\n\nTool result offloaded to text" in transcript
    # Images and files are stored beside the transcript, and the transcript names them.
    stored = _REFERENCE.findall(transcript)
    assert [store.read(reference) for reference in stored if reference.startswith("blake3/bin/")] == [
        png_bytes(2000),
        pdf_bytes(1500),
        png_bytes(3000, seed=7),
    ]


def test_the_read_tool_pages_a_transcript_and_the_search_tool_finds_inside_it(tmp_path: Path) -> None:
    steps = [
        m for n in range(40) for m in (tool_call(f"c{n}"), tool_result(f"line {n} of {n}\n" * 40, call_id=f"c{n}"))
    ]
    messages = [ChatMessage.from_user("Task."), *steps]
    with ContentAddressedToolResultStore(tmp_path / "store", search_index=True) as store:
        compacted = StepArchiveCompactor(store=store).compact(messages, 200, COUNTER)
        assert compacted is not None
        reference = _reference(_note(compacted))
        read = make_read_tool(store, max_chars=2_000)
        first = read.invoke(reference=reference)
        assert first.startswith("[Lines 1-") and "offset=" in first
        found = make_search_tool(store).invoke(query="line 17 of 17")
        assert reference in found


def test_archiving_the_same_steps_twice_stores_them_once(store: ContentAddressedToolResultStore) -> None:
    messages = zoo_conversation()
    first = StepArchiveCompactor(store=store).compact(messages, 0, COUNTER)
    with sqlite3.connect(store.root / "index.db") as db:
        blobs = db.execute("SELECT count(*) FROM blobs").fetchone()[0]
    second = StepArchiveCompactor(store=store).compact(messages, 0, COUNTER)

    assert first is not None and second is not None
    assert _reference(_note(first)) == _reference(_note(second))
    with sqlite3.connect(store.root / "index.db") as db:
        assert db.execute("SELECT count(*) FROM blobs").fetchone()[0] == blobs
        assert db.execute("SELECT count(*) FROM archives").fetchone()[0] == 2


def test_a_later_archive_takes_the_earlier_note_in_and_goes_on_counting(
    store: ContentAddressedToolResultStore,
) -> None:
    compactor = StepArchiveCompactor(store=store)
    messages = [
        ChatMessage.from_user("Task."),
        *(m for n in range(6) for m in (tool_call(f"a{n}"), tool_result("x " * 100, call_id=f"a{n}"))),
    ]
    once = compactor.compact(messages, 150, COUNTER)
    assert once is not None
    earlier = _reference(_note(once))
    grown = [*once, *(m for n in range(6) for m in (tool_call(f"b{n}"), tool_result("y " * 100, call_id=f"b{n}")))]
    twice = compactor.compact(grown, 150, COUNTER)

    assert twice is not None
    note = _note(twice)  # one note stands
    last = once[1].meta["context_compaction"]["last_step"]
    assert note.text is not None and note.text.startswith(f"Steps {last + 1}-")
    assert "begins with the note of the archive before it" in note.text
    transcript = store.read(_reference(note))
    assert isinstance(transcript, str) and "note left by compaction (step_archive)" in transcript
    assert f"'{earlier}'" in transcript  # the chain of references
    assert note.meta["context_compaction"]["first_step"] == once[1].meta["context_compaction"]["last_step"] + 1


def test_it_declines_when_the_conversation_fits_or_only_its_note_could_go(
    store: ContentAddressedToolResultStore,
) -> None:
    compactor = StepArchiveCompactor(store=store)
    messages = zoo_conversation()
    assert compactor.compact(messages, COUNTER.count(messages), COUNTER) is None
    compacted = compactor.compact(messages, 0, COUNTER)
    assert compacted is not None
    # Only the note could go now: swapping it for another frees nothing.
    assert compactor.compact(compacted, 0, COUNTER) is None


def test_the_newest_steps_stay_even_over_the_target(store: ContentAddressedToolResultStore) -> None:
    messages = zoo_conversation()
    kept = StepArchiveCompactor(store=store, min_keep_steps=3).compact(messages, 0, COUNTER)
    none_kept = StepArchiveCompactor(store=store, min_keep_steps=0).compact(messages, 0, COUNTER)

    assert kept is not None and none_kept is not None
    assert kept[3:] == messages[-7:]  # the three newest steps
    assert none_kept[:2] == [messages[0], messages[5]] and len(none_kept) == 3
    assert "archived" in (none_kept[2].text or "")


@pytest.mark.parametrize("value", [-1, -5, 1.5, True])
def test_a_negative_or_not_whole_min_keep_steps_is_refused(tmp_path: Path, value: Any) -> None:
    with pytest.raises(ValueError, match="min_keep_steps"):
        StepArchiveCompactor(store=FileSystemToolResultStore(root=str(tmp_path)), min_keep_steps=value)


def test_the_history_holds_the_compaction_and_the_archive_under_one_id(
    store: ContentAddressedToolResultStore,
) -> None:
    messages = zoo_conversation()
    compacted = StepArchiveCompactor(store=store, context_window=8_000).compact(messages, 0, COUNTER)
    assert compacted is not None
    note = _note(compacted)
    with sqlite3.connect(store.root / "index.db") as db:
        compaction = db.execute(
            "SELECT compaction_id, tokens_before, tokens_after, target_tokens, context_window FROM compactions"
        ).fetchone()
        archive = db.execute(
            "SELECT compaction_id, messages, first_step, last_step, original_tokens, saved_tokens FROM archives"
        ).fetchone()
        parts = db.execute("SELECT part, reference, size FROM archived_parts ORDER BY part").fetchall()
    assert compaction == (
        note.meta["casstore"]["compaction_id"],
        COUNTER.count(messages),
        COUNTER.count(compacted),
        0,
        8_000,
    )
    removed = [message for message in messages if message not in compacted]
    assert archive == (
        compaction[0],
        18,
        1,
        8,
        COUNTER.count(removed),
        COUNTER.count(messages) - COUNTER.count(compacted),
    )
    assert parts[0][:2] == (0, _reference(note)) and len(parts) == 4 and all(size for _, _, size in parts)


def _summarizer(reply: Any) -> MockChatGenerator:
    def respond(messages: list[ChatMessage]) -> Any:
        assert "<conversation_to_summarize>" in (messages[-1].text or "")
        if isinstance(reply, Exception):
            raise reply
        return reply

    return MockChatGenerator(response_fn=respond)


def test_the_note_carries_the_summarizers_summary(store: ContentAddressedToolResultStore) -> None:
    compacted = StepArchiveCompactor(store=store, summarizer=_summarizer("## Objective\n- look things up")).compact(
        zoo_conversation(), 0, COUNTER
    )
    assert compacted is not None
    text = _note(compacted).text or ""
    assert "archived to 'blake3/" in text and text.endswith(
        "Summary of the archived messages:\n## Objective\n- look things up"
    )


@pytest.mark.parametrize("reply", [RuntimeError("the model is down"), "   "])
def test_a_summarizer_that_fails_leaves_the_archive_and_a_plain_note(
    store: ContentAddressedToolResultStore, caplog: pytest.LogCaptureFixture, reply: Any
) -> None:
    with caplog.at_level(logging.WARNING):
        compacted = StepArchiveCompactor(store=store, summarizer=_summarizer(reply)).compact(
            zoo_conversation(), 0, COUNTER
        )
    assert compacted is not None
    note = _note(compacted)
    assert "Summary" not in (note.text or "") and isinstance(store.read(_reference(note)), str)
    assert "the archive's note carries no summary" in caplog.text


def test_it_serializes_with_its_store_and_summarizer(
    store: ContentAddressedToolResultStore, allow_casstore_deserialization: None
) -> None:
    summarizer = MockChatGenerator(responses=[ChatMessage.from_assistant("a summary")])
    compactor = StepArchiveCompactor(store=store, min_keep_steps=2, summarizer=summarizer, search_tool_name=None)
    rebuilt = StepArchiveCompactor.from_dict(compactor.to_dict())

    assert rebuilt.to_dict() == compactor.to_dict()
    assert isinstance(rebuilt.summarizer, MockChatGenerator) and rebuilt.search_tool_name is None
    compacted = rebuilt.compact(zoo_conversation(), 0, COUNTER)
    assert compacted is not None and (_note(compacted).text or "").endswith("a summary")
    assert "search_offloaded_results" not in (_note(compacted).text or "")
    assert isinstance(rebuilt.store, ContentAddressedToolResultStore)
    rebuilt.store.close()


def test_compact_async_gives_what_compact_gives(store: ContentAddressedToolResultStore) -> None:
    compactor = StepArchiveCompactor(store=store)
    messages = zoo_conversation()
    awaited = asyncio.run(compactor.compact_async(messages, 0, COUNTER))
    called = compactor.compact(messages, 0, COUNTER)
    assert awaited is not None and called is not None
    # The same conversation, the note's compaction id aside (each call has its own).
    assert [(m.role, m.text, m.meta.get("context_compaction")) for m in awaited] == [
        (m.role, m.text, m.meta.get("context_compaction")) for m in called
    ]


def test_offloaded_results_stay_references_inside_the_archive(store: ContentAddressedToolResultStore) -> None:
    messages = zoo_conversation()
    offloaded = DedupOffloadCompactor(store=store, min_tokens=0, min_keep_steps=1).compact(messages, 0, COUNTER)
    assert offloaded is not None
    compacted = StepArchiveCompactor(store=store).compact(offloaded, 0, COUNTER)
    assert compacted is not None
    transcript = store.read(_reference(_note(compacted)))
    assert isinstance(transcript, str)
    # The large results are in the store once, as results; the transcript names them.
    assert "alpha beta gamma delta " * 60 not in transcript
    for message in offloaded:
        for reference in message.meta.get("tool_result_offloaded", []):
            assert reference == "elsewhere" or f"'{reference}'" in transcript


def test_images_in_a_user_message_are_archived_beside_the_transcript(store: ContentAddressedToolResultStore) -> None:
    picture = png_bytes(500, seed=3)
    messages = [
        ChatMessage.from_user(content_parts=[TextContent("Earlier: what is this?"), image_block(picture)]),
        ChatMessage.from_assistant("A picture."),
        ChatMessage.from_user(content_parts=["Now: and this?", file_block(pdf_bytes(300))]),
        ChatMessage.from_assistant(tool_calls=[ToolCall(tool_name="look", arguments={}, id="l1")]),
        tool_result("a long look " * 100, call_id="l1", name="look"),
    ]
    compacted = StepArchiveCompactor(store=store).compact(messages, 0, COUNTER)
    assert compacted is not None and compacted[1:] == messages[2:]
    transcript = store.read(_reference(_note(compacted)))
    assert isinstance(transcript, str) and "[image image/png stored at 'blake3/bin/" in transcript
    assert store.read(_REFERENCE.findall(transcript)[0]) == picture


def test_gc_forgets_a_namespaces_archives_with_its_writes(tmp_path: Path) -> None:
    root = tmp_path / "store"
    for namespace in ("alice", "bob"):
        with ContentAddressedToolResultStore(root, namespace=namespace) as store:
            assert StepArchiveCompactor(store=store).compact(zoo_conversation(), 0, COUNTER) is not None
    with ContentAddressedToolResultStore(root) as store:
        collect_garbage(store, namespace="alice", grace=timedelta(0))
    with sqlite3.connect(root / "index.db") as db:
        assert db.execute("SELECT namespace FROM archives").fetchall() == [("bob",)]
        assert db.execute("SELECT DISTINCT namespace FROM compactions").fetchall() == [("bob",)]


def test_casstore_log_lists_an_archive_beside_the_offloads(tmp_path: Path) -> None:
    root = tmp_path / "store"
    with ContentAddressedToolResultStore(root, namespace="alice") as store:
        offloaded = DedupOffloadCompactor(store=store, min_tokens=0).compact(zoo_conversation(), 0, COUNTER)
        assert offloaded is not None
        compacted = StepArchiveCompactor(store=store).compact(offloaded, 0, COUNTER)
        assert compacted is not None
        reference = _reference(_note(compacted))
    runner = CliRunner()
    entries = json.loads(runner.invoke(cli, ["log", "--root", str(root), "--json"], catch_exceptions=False).stdout)
    (archive,) = [entry for entry in entries if entry["source"] == "archive"]
    assert (archive["first_step"], archive["last_step"], archive["messages"]) == (1, 8, 18)
    assert archive["references"][0] == reference and archive["tool_name"] is None
    assert {entry["source"] for entry in entries} == {"archive", "compactor"}
    text = runner.invoke(cli, ["log", "--root", str(root)], catch_exceptions=False).stdout
    assert f"alice  archive  steps 1-8 (18 messages)  saved {archive['saved_tokens']}/" in text
    assert reference in text
    by_tool = runner.invoke(cli, ["log", "--root", str(root), "--tool", "search", "--json"], catch_exceptions=False)
    assert all(entry["source"] == "compactor" for entry in json.loads(by_tool.stdout))
