"""
The search tool in a real Haystack `Agent` run: results offloaded by Haystack's hook, then the model (a
`MockChatGenerator`) searches them, and reads the hit it found at the line the search named.
"""

import json
import re
from pathlib import Path
from typing import Any

from haystack.components.agents import Agent
from haystack.components.generators.chat import MockChatGenerator
from haystack.dataclasses import ChatMessage, ToolCall
from haystack.hooks.tool_result_offloading import AlwaysOffload, ToolResultOffloadHook
from haystack.tools import ToolsType, tool

from casstore import ContentAddressedToolResultStore
from casstore.compactor import keep_in_context, make_read_tool, make_search_tool
from casstore.compactor.search_tool import SearchOffloadedResultsTool

FILES = {
    f"module_{number}.py": "".join(f"def helper_{number}_{line}():\n    return {line}\n" for line in range(40))
    for number in range(6)
}
FILES["module_3.py"] += "\nclass ToolResultStore:\n    def write(self, *, key, content):\n        raise KeyError(key)\n"


class SearchingModel:
    """Reads every file, then searches for a name it saw several steps ago, then reads the hit at its line."""

    def __init__(self) -> None:
        self.search_answer = ""
        self.read_answer = ""

    def __call__(self, messages: list[ChatMessage], tools: ToolsType | None) -> ChatMessage:
        results = [message.tool_call_result for message in messages if message.tool_call_result is not None]
        by_id = {result.origin.id: result.result for result in results}
        steps = sum(bool(message.tool_calls) for message in messages)
        if steps < len(FILES):
            name = sorted(FILES)[steps]
            return ChatMessage.from_assistant(
                tool_calls=[ToolCall(tool_name="read_file", arguments={"name": name}, id=f"file_{steps}")]
            )
        if "search" not in by_id:
            return ChatMessage.from_assistant(
                tool_calls=[
                    ToolCall(
                        tool_name="search_offloaded_results",
                        arguments={"query": '"ToolResultStore" KeyError', "tool_name": "read_file"},
                        id="search",
                    )
                ]
            )
        if "read" not in by_id:
            self.search_answer = str(by_id["search"])
            hit = re.search(r"^1\. '([^']+)'", self.search_answer, flags=re.MULTILINE)
            line = re.search(r"^   (\d+): class ToolResultStore:", self.search_answer, flags=re.MULTILINE)
            assert hit and line, self.search_answer
            arguments: dict[str, Any] = {"reference": hit.group(1), "offset": int(line.group(1)), "limit": 4}
            return ChatMessage.from_assistant(
                tool_calls=[ToolCall(tool_name="read_offloaded_result", arguments=arguments, id="read")]
            )
        self.read_answer = str(by_id["read"])
        return ChatMessage.from_assistant("ToolResultStore.write raises KeyError, in module_3.py.")


def test_an_agent_searches_what_it_offloaded_then_reads_the_hit(tmp_path: Path) -> None:
    @tool
    def read_file(name: str) -> str:
        """Read a source file."""
        return FILES[name]

    store = ContentAddressedToolResultStore(tmp_path / "store", namespace="run-1", search_index=True)
    hook = ToolResultOffloadHook(store=store, offload_strategies=keep_in_context({"*": AlwaysOffload()}))
    model = SearchingModel()
    agent = Agent(
        chat_generator=MockChatGenerator(response_fn=model, meta={"usage": None}),
        tools=[read_file, make_search_tool(store), make_read_tool(store)],
        hooks={"after_tool": [hook]},
        max_agent_steps=len(FILES) + 5,
    )
    agent.warm_up()
    result = agent.run(messages=[ChatMessage.from_user("Where does ToolResultStore.write fail?")])

    assert result["last_message"].text == "ToolResultStore.write raises KeyError, in module_3.py."
    messages: list[ChatMessage] = result["messages"]
    offloaded = [message for message in messages if message.meta.get("tool_result_offloaded")]
    assert len(offloaded) == len(FILES)  # every file was offloaded by Haystack's hook; the search and read were not
    hit_reference = next(
        message.meta["tool_result_offloaded"][0]
        for message in offloaded
        if message.tool_call_result is not None and message.tool_call_result.origin.arguments == {"name": "module_3.py"}
    )
    # The search found the one result holding both terms, first, by the reference the hook handed out.
    assert model.search_answer.splitlines()[2].startswith(f"1. '{hit_reference}' (tool read_file; written ")
    assert "holds ToolResultStore, KeyError" in model.search_answer
    # Reading at the line the search named gave the lines the model was after.
    assert "class ToolResultStore:" in model.read_answer and "raise KeyError(key)" in model.read_answer
    store.close()


def test_the_agent_with_the_search_tool_round_trips(tmp_path: Path, allow_casstore_deserialization: None) -> None:
    store = ContentAddressedToolResultStore(tmp_path / "store", search_index=True)
    agent = Agent(chat_generator=MockChatGenerator(responses="done"), tools=[make_search_tool(store)])
    data = json.loads(json.dumps(agent.to_dict()))
    restored = Agent.from_dict(json.loads(json.dumps(data)))  # from_dict changes what it is given
    assert restored.to_dict() == data
    (restored_tool,) = restored.tools
    assert isinstance(restored_tool, SearchOffloadedResultsTool) and restored_tool.name == "search_offloaded_results"
    assert isinstance(restored_tool.store, ContentAddressedToolResultStore) and restored_tool.store.search_index
    restored_tool.store.close()
    store.close()
