"""
End to end: a real Haystack `Agent` with `MockChatGenerator`, real tools, `CompactionHook(DedupOffloadCompactor)` and
the read tool; and serialization of the compactor and the tool. The example of docs/compactor.md runs as written in
tests/docs/test_readme_examples.py.
"""

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from haystack.components.agents import Agent
from haystack.components.generators.chat import MockChatGenerator
from haystack.core.errors import DeserializationError
from haystack.core.serialization import default_from_dict
from haystack.dataclasses import ChatMessage, ToolCall, ToolCallResult
from haystack.hooks.compaction import CompactionHook
from haystack.hooks.tool_result_offloading import FileSystemToolResultStore
from haystack.token_counters import ApproximateTokenCounter
from haystack.tools import ToolsType, tool
from haystack.tools.serde_utils import deserialize_tools_or_toolset_inplace
from haystack.tools.tool import Tool
from haystack.utils.deserialization import deserialize_component_inplace

from casstore import ContentAddressedToolResultStore
from casstore.compactor import DedupOffloadCompactor, make_read_tool
from casstore.compactor.read_tool import ReadOffloadedResultTool

pytestmark = pytest.mark.filterwarnings("ignore::haystack.utils.experimental.ExperimentalWarning")

CONTEXT_WINDOW = 8_000
STEPS = 10
TEST_LOG = "".join(f"tests/test_module_{number}.py::test_case PASSED\n" for number in range(90))


def _result(message: ChatMessage) -> ToolCallResult:
    """The tool result an offloaded message holds."""
    assert message.tool_call_result is not None
    return message.tool_call_result


def _notes(number: int) -> str:
    return "".join(f"note {number}.{line}: measurement {number * line % 97} within bounds\n" for line in range(70))


class ScriptedModel:
    """
    Stands in for an LLM. Each step runs the tests (same output every time) and reads a different file; once results
    have been offloaded it reads one back whole and searches another, then answers. It records what it was sent.
    """

    def __init__(self) -> None:
        self.counter = ApproximateTokenCounter()
        self.sizes: list[int] = []
        self.read_backs: dict[str, Any] = {}
        self.reads: dict[str, dict[str, Any]] = {}

    def __call__(self, messages: list[ChatMessage], tools: ToolsType | None) -> ChatMessage:
        self.sizes.append(self.counter.count(messages, tools))
        for message in messages:
            result = message.tool_call_result
            if result is not None and result.origin.id in self.reads and "context_compaction" not in message.meta:
                self.read_backs[result.origin.id] = result.result
        steps = sum(bool(message.tool_calls) for message in messages)
        if steps < STEPS:
            return ChatMessage.from_assistant(
                tool_calls=[
                    ToolCall(tool_name="run_tests", arguments={}, id=f"tests_{steps}"),
                    ToolCall(tool_name="read_file", arguments={"name": f"notes_{steps}.txt"}, id=f"file_{steps}"),
                ]
            )
        if not self.reads:
            offloaded = {
                message.tool_call_result.origin.id: message.meta["tool_result_offloaded"][0]
                for message in messages
                if message.tool_call_result is not None and message.meta.get("tool_result_offloaded")
            }
            self.reads = {
                "read_whole": {"reference": offloaded["file_1"]},
                "read_search": {"reference": offloaded["tests_0"], "pattern": r"module_4\d\.py", "context": 0},
            }
            return ChatMessage.from_assistant(
                tool_calls=[
                    ToolCall(tool_name="read_offloaded_result", arguments=arguments, id=call_id)
                    for call_id, arguments in self.reads.items()
                ]
            )
        return ChatMessage.from_assistant("Everything passes and every measurement is within bounds.")


def _agent(store: ContentAddressedToolResultStore, folder: Path, model: ScriptedModel) -> Agent:
    @tool
    def run_tests() -> str:
        """Run the test suite."""
        return TEST_LOG

    @tool
    def read_file(name: str) -> str:
        """Read a file of notes."""
        return (folder / name).read_text()

    for number in range(STEPS):
        (folder / f"notes_{number}.txt").write_text(_notes(number))
    return Agent(
        chat_generator=MockChatGenerator(response_fn=model, meta={"usage": None}),
        tools=[run_tests, read_file, make_read_tool(store)],
        hooks={"before_llm": [CompactionHook(compactor=DedupOffloadCompactor(store), context_window=CONTEXT_WINDOW)]},
        max_agent_steps=STEPS + 5,
    )


@pytest.mark.parametrize("mode", ["run", "run_async"])
def test_agent_run_stays_in_the_window_dedups_and_reads_back(
    tmp_path: Path, store: ContentAddressedToolResultStore, mode: str
) -> None:
    model = ScriptedModel()
    agent = _agent(store, tmp_path, model)
    agent.warm_up()
    prompt = [ChatMessage.from_user("Check the tests and the notes.")]
    result = agent.run(messages=prompt) if mode == "run" else asyncio.run(agent.run_async(messages=prompt))
    messages: list[ChatMessage] = result["messages"]

    assert result["last_message"].text == "Everything passes and every measurement is within bounds."
    # Without compaction the run would need several times the window; with it, every request fits.
    uncompacted = STEPS * (len(TEST_LOG) + len(_notes(0))) // 4
    assert uncompacted > 2 * CONTEXT_WINDOW
    assert max(model.sizes) <= CONTEXT_WINDOW

    offloaded = [message for message in messages if "context_compaction" in message.meta]
    test_references = {
        reference
        for message in offloaded
        if message.tool_call_result is not None and message.tool_call_result.origin.tool_name == "run_tests"
        for reference in message.meta["tool_result_offloaded"]
    }
    assert sum(_result(message).origin.tool_name == "run_tests" for message in offloaded) >= 5
    assert len(test_references) == 1  # every run of the tests, one blob and one reference

    # The model's read-tool calls got the original content back: whole, and searched.
    assert model.read_backs["read_whole"] == _notes(1)
    search = model.read_backs["read_search"]
    assert [line.split(":")[0] for line in search.splitlines()[1:-1]] == [str(number + 1) for number in range(40, 50)]
    assert search.splitlines()[-1] == "[No more matches.]"

    with sqlite3.connect(store.root / "index.db") as connection:
        rows = connection.execute("SELECT tool_call_id, refs, original_tokens, saved_tokens FROM offloads").fetchall()
        distinct_contents = connection.execute("SELECT count(*) FROM blobs").fetchone()[0]
        written = connection.execute("SELECT count(*) FROM writes").fetchone()[0]
    # One row per offload, matching the messages that were offloaded.
    assert sorted((row[0], json.loads(row[1])) for row in rows) == sorted(
        (_result(message).origin.id, message.meta["tool_result_offloaded"]) for message in offloaded
    )
    assert all(saved > 0 and original > saved for _id, _refs, original, saved in rows)
    assert written == len(rows)
    # Repeated outputs share blobs: one for the test log, at most one per notes file (a read-back of a file stores
    # nothing new).
    assert distinct_contents == len({reference for row in rows for reference in json.loads(row[1])})
    assert distinct_contents <= 1 + STEPS


class TestSerialization:
    def test_compactor_round_trip(
        self, store: ContentAddressedToolResultStore, allow_casstore_deserialization: None
    ) -> None:
        compactor = DedupOffloadCompactor(store, min_keep_steps=2, min_tokens=12, preview_chars=42)
        data = compactor.to_dict()
        assert data["type"] == "casstore.compactor.dedup_compactor.DedupOffloadCompactor"
        assert data["init_parameters"]["store"]["type"] == "casstore.stores.local.ContentAddressedToolResultStore"

        restored = DedupOffloadCompactor.from_dict(data)
        assert data == compactor.to_dict()  # from_dict leaves its input alone
        assert isinstance(restored.store, ContentAddressedToolResultStore)
        assert (restored.store.root, restored.store.namespace) == (store.root, store.namespace)
        assert (restored.min_keep_steps, restored.min_tokens, restored.preview_chars) == (2, 12, 42)
        restored.store.close()

        holder = {"compactor": data}
        deserialize_component_inplace(holder, key="compactor")
        assert isinstance(holder["compactor"], DedupOffloadCompactor)
        assert holder["compactor"].to_dict() == data
        assert isinstance(holder["compactor"].store, ContentAddressedToolResultStore)
        holder["compactor"].store.close()

    def test_default_from_dict_with_a_file_system_store(
        self, tmp_path: Path, allow_casstore_deserialization: None
    ) -> None:
        compactor = DedupOffloadCompactor(FileSystemToolResultStore(tmp_path), min_tokens=7)
        data = compactor.to_dict()
        init_parameters = data["init_parameters"]
        deserialize_component_inplace(init_parameters, key="store")
        restored = default_from_dict(DedupOffloadCompactor, data)
        assert isinstance(restored.store, FileSystemToolResultStore) and restored.store.root == tmp_path
        assert restored.min_tokens == 7

    def test_inside_compaction_hook(
        self, store: ContentAddressedToolResultStore, allow_casstore_deserialization: None
    ) -> None:
        hook = CompactionHook(
            compactor=DedupOffloadCompactor(store, preview_chars=9), context_window=10_000, compact_at=0.8
        )
        restored = CompactionHook.from_dict(hook.to_dict())
        assert isinstance(restored.compactor, DedupOffloadCompactor)
        assert isinstance(restored.compactor.store, ContentAddressedToolResultStore)
        assert restored.compactor.store.root == store.root and restored.compactor.preview_chars == 9
        assert (restored.context_window, restored.compact_at) == (10_000, 0.8)
        assert restored.to_dict() == hook.to_dict()
        restored.compactor.store.close()

    def test_needs_the_applications_opt_in(
        self, store: ContentAddressedToolResultStore, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.delenv("HAYSTACK_DESERIALIZATION_ALLOWLIST", raising=False)
        data = CompactionHook(compactor=DedupOffloadCompactor(store), context_window=1_000).to_dict()
        with pytest.raises(DeserializationError, match="compactor"):
            CompactionHook.from_dict(data)

    def test_read_tool_round_trip(
        self, store: ContentAddressedToolResultStore, allow_casstore_deserialization: None
    ) -> None:
        reference = store.write(key="r.txt", content="line\n" * 10)
        holder: dict[str, Any] = {"tools": [make_read_tool(store, name="read_back", max_chars=5_000).to_dict()]}
        deserialize_tools_or_toolset_inplace(holder, key="tools")
        [restored] = holder["tools"]
        assert isinstance(restored, Tool) and restored.name == "read_back"
        assert restored.invoke(reference=reference) == "line\n" * 10
        assert restored.to_dict() == make_read_tool(store, name="read_back", max_chars=5_000).to_dict()
        assert isinstance(restored, ReadOffloadedResultTool)
        assert isinstance(restored.store, ContentAddressedToolResultStore)
        restored.store.close()

    def test_agent_round_trip(
        self, store: ContentAddressedToolResultStore, allow_casstore_deserialization: None
    ) -> None:
        agent = Agent(
            chat_generator=MockChatGenerator(responses="done"),
            tools=[make_read_tool(store)],
            hooks={"before_llm": [CompactionHook(compactor=DedupOffloadCompactor(store), context_window=1_000)]},
        )
        data = agent.to_dict()
        restored = Agent.from_dict(json.loads(json.dumps(data)))
        assert restored.to_dict() == data
        [hook] = restored.hooks["before_llm"]
        assert isinstance(hook, CompactionHook) and isinstance(hook.compactor, DedupOffloadCompactor)
        [read_tool] = restored.tools
        assert isinstance(read_tool, Tool) and read_tool.name == "read_offloaded_result"
        reference = store.write(key="r.txt", content="back")
        assert read_tool.invoke(reference=reference) == "back"
        assert isinstance(hook.compactor.store, ContentAddressedToolResultStore)
        hook.compactor.store.close()
        assert isinstance(read_tool, ReadOffloadedResultTool)
        assert isinstance(read_tool.store, ContentAddressedToolResultStore)
        read_tool.store.close()
