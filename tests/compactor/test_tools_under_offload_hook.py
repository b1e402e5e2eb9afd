"""
End to end with Haystack's `ToolResultOffloadHook` over our store: real `Agent` runs with `MockChatGenerator` playing
the model. The read tool's answers reach the model (with `keep_in_context`) instead of being offloaded again; a tool's
`FileContent` of `text/csv` is offloaded as bytes and read back as text lines; and the whole Agent serializes with only
`casstore` on Haystack's deserialization allowlist.
"""

import base64
import contextlib
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from haystack.components.agents import Agent
from haystack.components.generators.chat import MockChatGenerator
from haystack.core.errors import DeserializationError
from haystack.dataclasses import ChatMessage, FileContent, ToolCall
from haystack.hooks.compaction import CompactionHook
from haystack.hooks.tool_result_offloading import (
    AlwaysOffload,
    NeverOffload,
    OffloadPolicy,
    ToolResultOffloadHook,
)
from haystack.tools.from_function import create_tool_from_function, tool
from haystack.tools.tool import Tool

from casstore import ContentAddressedToolResultStore
from casstore.compactor import DedupOffloadCompactor, keep_in_context, make_read_tool
from casstore.compactor.read_tool import ReadOffloadedResultTool

pytestmark = pytest.mark.filterwarnings("ignore::haystack.utils.experimental.ExperimentalWarning")

TEST_LOG = "".join(f"test_case_{number} ... ok\n" for number in range(1, 301))
SALES = "region,month,units\n" + "".join(
    f"{region},2026-{month:02d},{(month * 37 + len(region)) % 500}\n"
    for region in ("north", "south", "east", "west")
    for month in range(1, 13)
)


class ReadBackModel:
    """
    Stands in for an LLM: calls `first_tool`, then reads its offloaded result back with `arguments`, then answers.

    It records the result each call it made came back with, as the model saw it.
    """

    def __init__(self, *, first_tool: str, read_tool: str, arguments: dict[str, Any]) -> None:
        self.first_tool = first_tool
        self.read_tool = read_tool
        self.arguments = arguments
        self.seen: dict[str, ChatMessage] = {}

    def __call__(self, messages: list[ChatMessage]) -> ChatMessage:
        for message in messages:
            result = message.tool_call_result
            if result is not None and result.origin.id is not None:
                self.seen[result.origin.id] = message
        if "first" not in self.seen:
            return ChatMessage.from_assistant(
                tool_calls=[ToolCall(tool_name=self.first_tool, arguments={}, id="first")]
            )
        if "read" not in self.seen:
            [reference] = self.seen["first"].meta["tool_result_offloaded"]
            arguments = {"reference": reference, **self.arguments}
            return ChatMessage.from_assistant(
                tool_calls=[ToolCall(tool_name=self.read_tool, arguments=arguments, id="read")]
            )
        return ChatMessage.from_assistant("Done.")

    def read_back(self) -> Any:
        """What the read tool's call came back with, in the conversation the model was sent."""
        result = self.seen["read"].tool_call_result
        assert result is not None
        return result.result


@tool
def run_tests() -> str:
    """Run the test suite and return its log."""
    return TEST_LOG


def export_sales() -> list[FileContent]:
    """Export the sales table as a CSV file."""
    return [
        FileContent(base64_data=base64.b64encode(SALES.encode()).decode(), mime_type="text/csv", filename="sales.csv")
    ]


def _run(
    store: ContentAddressedToolResultStore,
    model: ReadBackModel,
    *,
    tools: list[Tool],
    strategies: dict[str | tuple[str, ...], OffloadPolicy],
) -> None:
    hook = ToolResultOffloadHook(store=store, offload_strategies=strategies)
    agent = Agent(
        chat_generator=MockChatGenerator(response_fn=model, meta={"usage": None}),
        tools=tools,
        hooks={"after_tool": [hook]},
        max_agent_steps=6,
    )
    agent.warm_up()
    result = agent.run(messages=[ChatMessage.from_user("Do the tests pass?")])
    assert result["last_message"].text == "Done."


def _between_frame_lines(answer: str) -> str:
    """What a framed answer holds between its header line and its footer line (the frame lines hold no newline)."""
    return answer[answer.index("\n") + 1 : answer.rindex("\n")]


@pytest.mark.parametrize("read_tool_name", ["read_offloaded_result", "read_back"])
def test_the_model_asks_for_lines_and_gets_the_lines(
    store: ContentAddressedToolResultStore, read_tool_name: str
) -> None:
    model = ReadBackModel(first_tool="run_tests", read_tool=read_tool_name, arguments={"offset": 10, "limit": 3})
    strategies = keep_in_context({"*": AlwaysOffload()}, tool_names=[read_tool_name])
    _run(store, model, tools=[run_tests, make_read_tool(store, name=read_tool_name)], strategies=strategies)

    # The tests' log was offloaded, as "*" asks ...
    assert model.seen["first"].meta["tool_result_offloaded"]
    # ... and the read tool's answer reached the model as it was: the lines, not another pointer.
    answer = model.read_back()
    assert isinstance(answer, str)
    assert "tool_result_offloaded" not in model.seen["read"].meta
    assert answer.startswith("[Lines 10-12 of 300.]")
    assert _between_frame_lines(answer) == "test_case_10 ... ok\ntest_case_11 ... ok\ntest_case_12 ... ok\n"
    assert answer.endswith("offset=13 for the next lines (288 of 300 left).]")


def test_without_keep_in_context_the_answer_is_offloaded_again(store: ContentAddressedToolResultStore) -> None:
    # What the user met: "*" applies to the read tool too, so the model received another pointer.
    model = ReadBackModel(
        first_tool="run_tests", read_tool="read_offloaded_result", arguments={"offset": 10, "limit": 3}
    )
    _run(store, model, tools=[run_tests, make_read_tool(store)], strategies={"*": AlwaysOffload()})

    answer = model.read_back()
    assert isinstance(answer, str) and answer.startswith("Tool result offloaded to text")
    assert model.seen["read"].meta["tool_result_offloaded"]


def test_a_csv_file_offloaded_by_the_hook_is_searched_as_text(store: ContentAddressedToolResultStore) -> None:
    export = create_tool_from_function(export_sales, outputs_to_string={"raw_result": True})
    model = ReadBackModel(
        first_tool="export_sales", read_tool="read_offloaded_result", arguments={"pattern": "^west,", "context": 0}
    )
    _run(store, model, tools=[export, make_read_tool(store)], strategies=keep_in_context({"*": AlwaysOffload()}))

    offloaded = model.seen["first"]
    [reference] = offloaded.meta["tool_result_offloaded"]
    assert offloaded.tool_call_result is not None
    assert offloaded.tool_call_result.result == (
        f"Tool result offloaded to text/csv named 'sales.csv' ({len(SALES.encode())} bytes) at '{reference}'"
    )
    assert store.read(reference) == SALES.encode()  # stored as the bytes the tool gave
    answer = model.read_back()
    assert isinstance(answer, str)
    rows = SALES.splitlines()
    expected = [f"{number}: {row}" for number, row in enumerate(rows, start=1) if row.startswith("west,")]
    assert len(expected) == 12
    assert _between_frame_lines(answer).splitlines() == expected
    assert answer.splitlines()[-1] == "[No more matches.]"


def _agent_with_both_hooks(store: ContentAddressedToolResultStore) -> Agent:
    offload = ToolResultOffloadHook(
        store=store, offload_strategies=keep_in_context({"*": AlwaysOffload()}, tool_names=["read_back"])
    )
    compaction = CompactionHook(compactor=DedupOffloadCompactor(store), context_window=8_000)
    return Agent(
        chat_generator=MockChatGenerator(responses="done"),
        # Only casstore's tool: a test module's own tool function would need its module allowed too.
        tools=[make_read_tool(store, name="read_back", max_chars=5_000)],
        hooks={"after_tool": [offload], "before_llm": [compaction]},
    )


class TestSerialization:
    def test_the_hook_and_the_read_tool_round_trip_with_only_casstore_allowed(
        self, store: ContentAddressedToolResultStore, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("HAYSTACK_DESERIALIZATION_ALLOWLIST", "casstore")
        agent = _agent_with_both_hooks(store)
        data = agent.to_dict()
        assert data["init_parameters"]["tools"][0]["type"] == "casstore.compactor.read_tool.ReadOffloadedResultTool"

        restored = Agent.from_dict(json.loads(json.dumps(data)))
        assert restored.to_dict() == data
        [offload] = restored.hooks["after_tool"]
        assert isinstance(offload, ToolResultOffloadHook)
        assert isinstance(offload.store, ContentAddressedToolResultStore)
        assert (offload.store.root, offload.store.namespace) == (store.root, store.namespace)
        assert isinstance(offload.offload_strategies["*"], AlwaysOffload)
        assert isinstance(offload.offload_strategies["read_back"], NeverOffload)
        assert isinstance(offload.offload_strategies["read_offloaded_result"], NeverOffload)
        [compaction] = restored.hooks["before_llm"]
        assert isinstance(compaction, CompactionHook) and isinstance(compaction.compactor, DedupOffloadCompactor)
        [read_tool] = restored.tools
        assert isinstance(read_tool, ReadOffloadedResultTool) and read_tool.name == "read_back"
        reference = store.write(key="r.txt", content="back")
        assert read_tool.invoke(reference=reference) == "back"
        for restored_store in (offload.store, read_tool.store, compaction.compactor.store):
            assert isinstance(restored_store, ContentAddressedToolResultStore)
            restored_store.close()

    def test_the_hooks_store_is_refused_without_the_opt_in(
        self, store: ContentAddressedToolResultStore, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.delenv("HAYSTACK_DESERIALIZATION_ALLOWLIST", raising=False)
        data = ToolResultOffloadHook(store=store, offload_strategies=keep_in_context({"*": AlwaysOffload()})).to_dict()
        with pytest.raises(DeserializationError, match="casstore"):
            ToolResultOffloadHook.from_dict(data)


def _page_hook_example() -> str:
    """The Python block of docs/compactor.md's section on Haystack's offload hook."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "compactor.md").read_text(encoding="utf-8")
    section = page.split("## With Haystack's `ToolResultOffloadHook`: `keep_in_context`", 1)[1].split("\n## ", 1)[0]
    examples: list[str] = re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)
    (example,) = examples
    return example


def test_the_compactor_pages_hook_example_runs_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        exec(compile(_page_hook_example(), "docs/compactor.md hook example", "exec"), {"__name__": "hook_example"})
    printed = output.getvalue()

    assert printed.startswith("[Lines 10-12 of 400.]\ntest_case_9 ... ok\ntest_case_10 ... ok\ntest_case_11 ... ok\n\n")
    assert "Tool result offloaded" not in printed
