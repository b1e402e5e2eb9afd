"""Property tests: on generated conversations, `DedupOffloadCompactor` decides and writes what Haystack's does."""

import random
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import pytest
from haystack.dataclasses import ChatMessage, TextContent
from haystack.hooks.compaction import ToolResultOffloadCompactor
from haystack.hooks.tool_result_offloading import FileSystemToolResultStore
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from casstore import ContentAddressedToolResultStore
from casstore.compactor import DedupOffloadCompactor
from tests.compactor_helpers import (
    ContentBlock,
    PayloadCounter,
    file_block,
    image_block,
    normalised,
    pdf_bytes,
    png_bytes,
    tool_pairs_intact,
    tool_result,
)

pytestmark = pytest.mark.filterwarnings("ignore::haystack.utils.experimental.ExperimentalWarning")

COUNTER = PayloadCounter()
WORDS = ["alpha", "beta", "gamma", "delta", "log", "line", "ERROR", "ok", "{", "}", '"k":', "\n"]
SHARED_TEXT = "the same output, every time " * 40


@st.composite
def _result(draw: st.DrawFn, *, call_id: str, duplicates: bool) -> ChatMessage:
    kind = draw(st.sampled_from(["text", "text", "text", "error", "parts", "image", "empty"]))
    if duplicates and kind == "text" and draw(st.booleans()):
        return tool_result(SHARED_TEXT, call_id=call_id)
    # Each text is tagged with its call, so that without `duplicates` no two results are the same.
    words = random.Random(draw(st.integers(0, 2**16))).choices(WORDS, k=draw(st.integers(0, 800)))
    text = f"{call_id}: " + " ".join(words)
    if kind == "text":
        return tool_result(text, call_id=call_id)
    if kind == "error":
        return tool_result(text, call_id=call_id, error=True)
    if kind == "empty":
        return tool_result("", call_id=call_id)
    seed = draw(st.integers(0, 3)) if duplicates else int(call_id[1:])
    image = image_block(png_bytes(draw(st.integers(100, 3000)), seed=seed))
    if kind == "image":
        return tool_result([image], call_id=call_id, name="screenshot")
    blocks: list[ContentBlock] = [TextContent(text), image, file_block(pdf_bytes(draw(st.integers(50, 2000))))]
    chosen = draw(st.lists(st.sampled_from(range(3)), min_size=1, max_size=3, unique=True))
    return tool_result([blocks[index] for index in sorted(chosen)], call_id=call_id, name="fetch")


@st.composite
def conversations(draw: st.DrawFn, *, duplicates: bool = False) -> list[ChatMessage]:
    messages = [ChatMessage.from_system("rules"), ChatMessage.from_user("task")]
    call_number = 0
    for _ in range(draw(st.integers(1, 6))):
        if draw(st.integers(0, 5)) == 0:
            messages.append(ChatMessage.from_assistant("thinking out loud"))
        ids = [f"c{call_number + offset}" for offset in range(draw(st.integers(1, 3)))]
        call_number += len(ids)
        results = [draw(_result(call_id=call_id, duplicates=duplicates)) for call_id in ids]
        calls = [result.tool_call_results[0].origin for result in results]
        messages.append(ChatMessage.from_assistant(tool_calls=calls))
        messages.extend(results)
    return messages


compaction_settings = st.fixed_dictionaries(
    {
        "min_keep_steps": st.integers(1, 3),
        "min_tokens": st.integers(0, 400),
        "preview_chars": st.integers(0, 300),
    }
)


def _without_casstore_meta(messages: list[ChatMessage]) -> list[dict[str, Any]]:
    """The messages as dictionaries without casstore's own meta (the compaction id); Haystack's marker stays."""
    result = []
    for message in messages:
        data = message.to_dict()
        data["meta"] = {key: value for key, value in data["meta"].items() if key != "casstore"}
        result.append(data)
    return result


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages=conversations(), config=compaction_settings, fraction=st.floats(0, 1.2))
def test_same_decisions_as_haystack_on_file_system_stores(
    messages: list[ChatMessage], config: dict[str, Any], fraction: float
) -> None:
    target = int(COUNTER.count(messages) * fraction)
    with tempfile.TemporaryDirectory() as folder:
        theirs_store = FileSystemToolResultStore(Path(folder) / "a")
        ours_store = FileSystemToolResultStore(Path(folder) / "b")
        theirs = ToolResultOffloadCompactor(store=theirs_store, **config).compact(messages, target, COUNTER)
        ours = DedupOffloadCompactor(ours_store, **config).compact(messages, target, COUNTER)

        assert (ours is None) == (theirs is None)
        event("offloaded" if ours is not None else "nothing offloaded")
        if ours is not None and theirs is not None:
            assert normalised(ours, ours_store.read) == normalised(theirs, theirs_store.read)
            assert tool_pairs_intact(ours)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages=conversations(duplicates=True), config=compaction_settings, fraction=st.floats(0, 1.2))
def test_byte_for_byte_haystacks_output_and_no_orphans_on_content_addressed_stores(
    messages: list[ChatMessage], config: dict[str, Any], fraction: float
) -> None:
    target = int(COUNTER.count(messages) * fraction)
    with (
        tempfile.TemporaryDirectory() as folder,
        ContentAddressedToolResultStore(Path(folder) / "theirs") as theirs_store,
        ContentAddressedToolResultStore(Path(folder) / "ours") as ours_store,
    ):
        theirs = ToolResultOffloadCompactor(store=theirs_store, **config).compact(messages, target, COUNTER)
        ours = DedupOffloadCompactor(ours_store, **config).compact(messages, target, COUNTER)

        assert (ours is None) == (theirs is None)
        event("offloaded" if ours is not None else "nothing offloaded")
        referenced: set[str] = set()
        if ours is not None and theirs is not None:
            assert _without_casstore_meta(ours) == _without_casstore_meta(theirs)
            referenced = {
                reference
                for message in ours
                if "context_compaction" in message.meta
                for reference in message.meta["tool_result_offloaded"]
            }
        written, blobs, offloads = set(), 0, 0
        if (ours_store.root / "index.db").exists():  # a store is created by its first write, and only then
            with sqlite3.connect(ours_store.root / "index.db") as connection:
                written = {row[0] for row in connection.execute("SELECT reference FROM writes")}
                blobs = connection.execute("SELECT count(*) FROM blobs").fetchone()[0]
                offloads = connection.execute("SELECT count(*) FROM offloads").fetchone()[0]
        else:
            assert not ours_store.root.exists()
        assert written == referenced
        # A text and the same bytes as binary are one blob under two references.
        assert blobs == len({reference.rsplit(".", 1)[0].replace("/bin/", "/") for reference in referenced})
        assert offloads == (0 if ours is None else sum("context_compaction" in message.meta for message in ours))
