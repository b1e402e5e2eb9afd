"""
A long scripted Agent run for the step archive's tests: a real Haystack `Agent` whose model (`MockChatGenerator`)
looks items up, one step after another, with facts planted in its early tool results and its early messages; and
the walk that finds which facts the final conversation can still reach through the references it holds.
"""

import re
from dataclasses import dataclass, field
from typing import Any

from haystack.components.agents import Agent
from haystack.components.generators.chat import MockChatGenerator
from haystack.dataclasses import ChatMessage, ToolCall
from haystack.hooks.compaction import CompactionHook
from haystack.hooks.compaction.types import Compactor
from haystack.token_counters import ApproximateTokenCounter
from haystack.tools.tool import Tool

from casstore.compactor import make_read_tool

# Facts are planted in the first `PLANTED` steps: in a tool result (`FACT-T-n`) and in the assistant's own text
# (`FACT-A-n`), each with a value found nowhere else.
PLANTED = 12
_FACT = re.compile(r"FACT-[AT]-\d+=[0-9a-f]{8}")
_REFERENCE = re.compile(r"'(blake3/[^']+)'")


def secret(kind: str, number: int) -> str:
    """:returns: The planted fact `FACT-<kind>-<number>=<8 hex>`, the same every run."""
    return f"FACT-{kind}-{number}={(number * 2654435761 + ord(kind)) % 2**32:08x}"


def planted() -> set[str]:
    return {secret(kind, number) for kind in "AT" for number in range(1, PLANTED + 1)}


def _lookup(item: int) -> str:
    """A tool result: long ones (offloaded first) on even items, short ones (archived as they are) on odd items."""
    lines = [
        f"item {item}: record {line} of the lookup, with the usual fields and nothing to note" for line in range(12)
    ]
    if item <= PLANTED:
        lines.insert(5, secret("T", item))
    return "\n".join(lines if item % 2 == 0 else lines[:7])


LOOKUP = Tool(
    name="lookup",
    description="Look an item up.",
    parameters={"type": "object", "properties": {"item": {"type": "integer"}}, "required": ["item"]},
    function=_lookup,
)


@dataclass
class ScriptedRun:
    """The model: step n looks item n up and says what it notes; after `steps` steps it answers."""

    steps: int
    tools: list[Tool]
    counter: ApproximateTokenCounter = field(default_factory=ApproximateTokenCounter)
    # The tokens of every request the model received (its messages and its tools' schemas).
    requests: list[int] = field(default_factory=list)
    step: int = 0

    def respond(self, messages: list[ChatMessage]) -> ChatMessage:
        self.requests.append(self.counter.count(messages=messages, tools=self.tools))
        if self.step >= self.steps:
            return ChatMessage.from_assistant(f"Looked up {self.steps} items.")
        self.step += 1
        note = f" Noting {secret('A', self.step)}." if self.step <= PLANTED else ""
        return ChatMessage.from_assistant(
            text=f"Step {self.step}: looking item {self.step} up.{note}",
            tool_calls=[ToolCall(tool_name="lookup", arguments={"item": self.step}, id=f"call_{self.step}")],
        )


def run_agent(
    compactor: Compactor, *, store: Any, steps: int, window: int
) -> tuple[list[ChatMessage], ScriptedRun, Tool]:
    """
    Run the scripted Agent with `compactor` in a `CompactionHook` of `window` tokens.

    :param store: The store the read tool reads (the compactors' store), or None for no read tool.
    :returns: The final conversation, the model (with the tokens of every request) and the read tool.
    """
    read_tool = make_read_tool(store) if store is not None else None
    tools = [LOOKUP, *([read_tool] if read_tool is not None else [])]
    model = ScriptedRun(steps=steps, tools=tools)
    agent = Agent(
        chat_generator=MockChatGenerator(response_fn=model.respond, meta={"usage": None}),
        tools=tools,
        hooks={"before_llm": [CompactionHook(compactor=compactor, context_window=window)]},
        max_agent_steps=steps + 2,
    )
    result = agent.run(messages=[ChatMessage.from_user("Look the items up, one per step.")])
    return result["messages"], model, read_tool  # type: ignore[return-value]


def _text(message: ChatMessage) -> str:
    parts = [*message.texts, *(str(result.result) for result in message.tool_call_results)]
    return "\n".join(parts)


def reachable_facts(messages: list[ChatMessage], read_tool: Tool | None) -> set[str]:
    """
    :returns: The planted facts the conversation shows, or reaches by reading every reference it holds with the read
        tool, and every reference those answers hold in turn (a transcript names the results offloaded before it and
        the archive before it).
    """
    facts: set[str] = set()
    pending: list[str] = []
    for message in messages:
        text = _text(message)
        facts.update(_FACT.findall(text))
        pending += _REFERENCE.findall(text) + list(message.meta.get("tool_result_offloaded", []))
    seen: set[str] = set()
    while pending and read_tool is not None:
        reference = pending.pop()
        if reference in seen:
            continue
        seen.add(reference)
        answer = read_tool.invoke(reference=reference, pattern="FACT-|blake3/", limit=5000, context=0)
        facts.update(_FACT.findall(answer))
        pending += _REFERENCE.findall(answer)
    return facts
