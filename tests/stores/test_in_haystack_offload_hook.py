"""The store inside Haystack's own offload hook and compactor, driven by a real Agent."""

import os
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any

import pytest
from haystack.components.agents import Agent
from haystack.components.generators.chat import MockChatGenerator
from haystack.dataclasses import ChatMessage, ToolCall
from haystack.hooks import Hook, HookPoint
from haystack.hooks.compaction import CompactionHook, ToolResultOffloadCompactor
from haystack.hooks.tool_result_offloading import (
    RESULT_STORE_CONTEXT_KEY,
    AlwaysOffload,
    ToolResultOffloadHook,
)
from haystack.tools import tool
from haystack.tools.tool import Tool

import casstore
from casstore import ContentAddressedToolResultStore
from tests.helpers import count_rows

CORPUS = sorted(Path(casstore.__file__).parent.glob("*.py"))


@tool
def read_file(path: Annotated[str, "Path of the file to read"]) -> str:
    """Read a text file."""
    return Path(path).read_text(encoding="utf-8")


def _scripted_model(paths: list[Path]) -> MockChatGenerator:
    """A model that reads each path in turn (one tool call per step), then answers."""
    calls = iter(range(len(paths) + 1))

    def respond(messages: list[ChatMessage]) -> ChatMessage:
        step = next(calls)
        if step == len(paths):
            return ChatMessage.from_assistant("Done reading.")
        call = ToolCall(tool_name="read_file", arguments={"path": str(paths[step])}, id=f"call_{step}")
        return ChatMessage.from_assistant(tool_calls=[call])

    return MockChatGenerator(response_fn=respond, meta={"usage": None})


def _run_agent(
    *, model: MockChatGenerator, tools: list[Tool], hooks: dict[HookPoint, list[Hook]], **run_kwargs: Any
) -> list[ChatMessage]:
    agent = Agent(chat_generator=model, tools=tools, hooks=hooks, max_agent_steps=200)
    messages: list[ChatMessage] = agent.run(messages=[ChatMessage.from_user("Explore the package.")], **run_kwargs)[
        "messages"
    ]
    return messages


def _offloaded(messages: list[ChatMessage]) -> list[tuple[ChatMessage, list[str]]]:
    return [(m, m.meta["tool_result_offloaded"]) for m in messages if m.meta.get("tool_result_offloaded")]


def _reads(paths: list[Path]) -> list[Path]:
    """Each file read three times, interleaved, as an agent re-reading files does."""
    return [path for _ in range(3) for path in paths]


def test_offload_hook_with_a_real_agent_deduplicates(store: ContentAddressedToolResultStore) -> None:
    paths = _reads(CORPUS[:4])
    hook = ToolResultOffloadHook(store=store, offload_strategies={"*": AlwaysOffload()})
    messages = _run_agent(model=_scripted_model(paths), tools=[read_file], hooks={"after_tool": [hook]})

    offloaded = _offloaded(messages)
    assert len(offloaded) == len(paths)
    for (message, references), path in zip(offloaded, paths, strict=True):
        (reference,) = references
        assert message.tool_call_result is not None
        assert reference in message.tool_call_result.result
        assert store.read(reference) == path.read_text(encoding="utf-8")
    assert count_rows(store.root, "writes") == len(paths)
    assert count_rows(store.root, "blobs") == 4


def test_offload_hook_takes_a_per_run_store_from_hook_context(store_root: Path) -> None:
    default_store = ContentAddressedToolResultStore(store_root, namespace="server")
    hook = ToolResultOffloadHook(store=default_store, offload_strategies={"*": AlwaysOffload()})
    with ContentAddressedToolResultStore(store_root, namespace="alice") as alice:
        messages = _run_agent(
            model=_scripted_model(CORPUS[:2]),
            tools=[read_file],
            hooks={"after_tool": [hook]},
            hook_context={RESULT_STORE_CONTEXT_KEY: alice},
        )
        references = [reference for _, refs in _offloaded(messages) for reference in refs]
        assert [alice.read(reference) for reference in references] == [p.read_text() for p in CORPUS[:2]]
        for reference in references:
            with pytest.raises(casstore.ReferenceNotFoundError):
                default_store.read(reference)
    default_store.close()


def test_haystack_compactor_over_the_store_keeps_the_context_small(store: ContentAddressedToolResultStore) -> None:
    paths = _reads(CORPUS[:5])
    compactor = ToolResultOffloadCompactor(store=store, min_tokens=50)
    hook = CompactionHook(compactor=compactor, context_window=8_000, compact_at=0.5, compact_to=0.2)
    messages = _run_agent(model=_scripted_model(paths), tools=[read_file], hooks={"before_llm": [hook]})

    offloaded = _offloaded(messages)
    assert len(offloaded) >= len(paths) // 2
    contents = {path.read_text(encoding="utf-8") for path in paths}
    for message, references in offloaded:
        assert message.meta["context_compaction"]["strategy"] == "tool_result_offloading"
        assert store.read(references[0]) in contents
    distinct = {references[0] for _, references in offloaded}
    assert count_rows(store.root, "blobs") == len(distinct) <= 5


@pytest.mark.usefixtures("allow_casstore_deserialization")
def test_serialization_round_trips_through_haystack(store: ContentAddressedToolResultStore) -> None:
    reference = store.write(key="a.txt", content="serialized")
    compactor = ToolResultOffloadCompactor(store=store, min_tokens=10)
    rebuilt = ToolResultOffloadCompactor.from_dict(compactor.to_dict())
    assert isinstance(rebuilt.store, ContentAddressedToolResultStore)
    assert rebuilt.store.to_dict() == store.to_dict()
    assert rebuilt.store.read(reference) == "serialized"
    hook = CompactionHook(compactor=compactor, context_window=1000)
    rebuilt_hook = CompactionHook.from_dict(hook.to_dict())
    assert rebuilt_hook.compactor.store.read(reference) == "serialized"  # type: ignore[attr-defined]
    offload_hook = ToolResultOffloadHook(store=store, offload_strategies={"*": AlwaysOffload()})
    assert ToolResultOffloadHook.from_dict(offload_hook.to_dict()).store.read(reference) == "serialized"
    for rebuilt_store in (rebuilt.store, rebuilt_hook.compactor.store):  # type: ignore[attr-defined]
        rebuilt_store.close()


def test_importing_casstore_does_not_widen_haystack_allowlist(tmp_path: Path) -> None:
    script = f"""
import casstore
from casstore import ContentAddressedToolResultStore
from haystack.core.errors import DeserializationError
from haystack.hooks.compaction import ToolResultOffloadCompactor
data = ToolResultOffloadCompactor(store=ContentAddressedToolResultStore({str(tmp_path)!r})).to_dict()
try:
    ToolResultOffloadCompactor.from_dict(data)
except DeserializationError:
    print("refused")
"""
    env = {key: value for key, value in os.environ.items() if key != "HAYSTACK_DESERIALIZATION_ALLOWLIST"}
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True)
    assert result.stdout.strip() == "refused"
