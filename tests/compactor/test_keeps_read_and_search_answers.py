"""
`DedupOffloadCompactor` keeps the answers of casstore's read and search tools in the conversation: a real Agent run
with `MockChatGenerator`, in which the model reads an offloaded result back and then keeps working until compaction
must make room again.
"""

import pytest
from haystack.components.agents import Agent
from haystack.components.generators.chat import MockChatGenerator
from haystack.dataclasses import ChatMessage, ToolCall
from haystack.hooks.compaction import CompactionHook
from haystack.tools import ToolsType, tool

from casstore import ContentAddressedToolResultStore
from casstore.compactor import DedupOffloadCompactor, make_read_tool
from tests.helpers import open_index

pytestmark = pytest.mark.filterwarnings("ignore::haystack.utils.experimental.ExperimentalWarning")

CONTEXT_WINDOW = 8_000
STEPS_AFTER = 6  # steps after the read-back: each result as large as the first ones, so compaction runs again
MAX_STEPS = 30


def _notes(number: int) -> str:
    return "".join(f"note {number}.{line}: measurement {number * line % 97} within bounds\n" for line in range(70))


class ReadThenWorkOn:
    """
    Stands in for an LLM: reads a file per step; once one is offloaded, reads it back whole with the read tool; then
    reads more files, each step as large as the first ones, so compaction must offload again; then answers.
    """

    def __init__(self, read_tool: str) -> None:
        self.read_tool = read_tool
        self.read_at: int | None = None  # the step of the read-back

    def __call__(self, messages: list[ChatMessage], tools: ToolsType | None) -> ChatMessage:
        steps = sum(bool(message.tool_calls) for message in messages)
        if self.read_at is None:
            offloaded = [m for m in messages if m.tool_call_result is not None and m.meta.get("context_compaction")]
            if not offloaded:
                return self._read_file(steps)
            self.read_at = steps
            [reference] = offloaded[0].meta["tool_result_offloaded"]
            return ChatMessage.from_assistant(
                tool_calls=[ToolCall(tool_name=self.read_tool, arguments={"reference": reference}, id="read_back")]
            )
        if steps <= self.read_at + STEPS_AFTER:
            return self._read_file(steps)
        return ChatMessage.from_assistant("Done.")

    @staticmethod
    def _read_file(step: int) -> ChatMessage:
        return ChatMessage.from_assistant(
            tool_calls=[ToolCall(tool_name="read_file", arguments={"number": step}, id=f"file_{step}")]
        )


def _run(
    store: ContentAddressedToolResultStore, compactor: DedupOffloadCompactor, read_tool_name: str
) -> list[ChatMessage]:
    @tool
    def read_file(number: int) -> str:
        """Read a file of notes."""
        return _notes(number)

    model = ReadThenWorkOn(read_tool_name)
    agent = Agent(
        chat_generator=MockChatGenerator(response_fn=model, meta={"usage": None}),
        tools=[read_file, make_read_tool(store, name=read_tool_name)],
        hooks={"before_llm": [CompactionHook(compactor=compactor, context_window=CONTEXT_WINDOW)]},
        max_agent_steps=MAX_STEPS,
    )
    agent.warm_up()
    result = agent.run(messages=[ChatMessage.from_user("Read the notes.")])
    assert result["last_message"].text == "Done."
    return list(result["messages"])


def _offloaded_tools(store: ContentAddressedToolResultStore) -> list[str]:
    with open_index(store.root) as connection:
        return [row[0] for row in connection.execute("SELECT tool_name FROM offloads ORDER BY id")]


def _answer_of(messages: list[ChatMessage], call_id: str) -> ChatMessage:
    return next(m for m in messages if m.tool_call_result is not None and m.tool_call_result.origin.id == call_id)


@pytest.mark.parametrize("kept", ["default name", "renamed"])
def test_the_read_tools_answer_stays_in_context_while_older_and_newer_results_go(
    store: ContentAddressedToolResultStore, kept: str
) -> None:
    name = "read_offloaded_result" if kept == "default name" else "fetch_result"
    compactor = DedupOffloadCompactor(store, keep_tool_names=[] if kept == "default name" else [name])
    messages = _run(store, compactor, name)

    answer = _answer_of(messages, "read_back")
    assert "context_compaction" not in answer.meta
    assert answer.tool_call_result is not None and answer.tool_call_result.result == _notes(0)
    offloaded = _offloaded_tools(store)
    # Compaction ran after the read-back too: results written after it were offloaded, the answer was not.
    read_at = next(
        i for i, m in enumerate(messages) if m.tool_call_result and m.tool_call_result.origin.id == "read_back"
    )
    assert any("context_compaction" in m.meta for m in messages[read_at + 1 :])
    assert name not in offloaded and set(offloaded) == {"read_file"}


def test_keep_tool_names_refuses_a_single_string(store: ContentAddressedToolResultStore) -> None:
    with pytest.raises(TypeError, match="collection of tool names"):
        DedupOffloadCompactor(store, keep_tool_names="fetch_result")
