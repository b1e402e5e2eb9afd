"""
The demo's model: `ScriptedCodingAgent`, a seeded plan of tool calls that looks like a coding agent exploring a
folder (list folders, read files, search, re-read, now and then read an offloaded result back by its reference), run
by Haystack's `MockChatGenerator`; and the corpus it explores.
"""

import random
import re
from pathlib import Path
from typing import Any

from haystack.dataclasses import ChatMessage, ToolCall
from haystack.token_counters import ApproximateTokenCounter
from haystack.tools.tool import Tool

from casstore.demo.tools import TEXT_SUFFIXES

_REFERENCE_IN_POINTER = re.compile(r"at '(blake3/[^']+)'")
_SEARCH_WORDS = ("def ", "class ", "import ", "return ", "raise ", "self.", "connection", "digest", ":param")


def text_files(corpus: Path) -> list[str]:
    """
    :returns: The text files under `corpus` the demo agent reads, relative to it, sorted.
    :raises ValueError: If there are none.
    """
    files = sorted(
        str(path.relative_to(corpus))
        for path in corpus.rglob("*")
        if path.is_file() and path.suffix in TEXT_SUFFIXES and "__pycache__" not in path.parts
    )
    if not files:
        suffixes = ", ".join(sorted(TEXT_SUFFIXES))
        raise ValueError(
            f"{corpus} holds no text files for the demo agent to read ({suffixes}); choose another corpus."
        )
    return files


class ScriptedCodingAgent:
    """The demo's model: a seeded, deterministic plan of tool calls that looks like a coding agent's."""

    def __init__(
        self,
        *,
        corpus: Path,
        steps: int,
        read_tool: Tool,
        files: list[str] | None = None,
        seed: int = 7,
        read_backs: bool = True,
    ) -> None:
        """
        :param corpus: The folder being explored.
        :param steps: Tool-calling steps before the final answer.
        :param read_tool: The read-back tool, whose first required parameter takes a reference.
        :param files: `text_files(corpus)`, if the caller has it already.
        :param seed: The plan's random seed.
        :param read_backs: Now and then read back a reference the conversation shows; False re-reads a file instead,
            so that runs under compactors that leave references and compactors that leave none follow one plan.
        """
        self.files = files if files is not None else text_files(corpus)
        self.folders = sorted(
            {str(Path(name).parent) for name in self.files} | {"."}, key=lambda folder: (folder.count("/"), folder)
        )
        self.steps = steps
        self.read_tool_name = read_tool.name
        self.reference_parameter = read_tool.parameters.get("required", ["reference"])[0]
        self.random = random.Random(seed)
        self.read_backs_allowed = read_backs
        self.step = 0
        self.calls = 0
        self.read_backs = 0
        self.seen: list[str] = []
        self.peak_context_tokens = 0
        self.counter = ApproximateTokenCounter()
        self.on_step: Any = None

    def respond(self, messages: list[ChatMessage]) -> ChatMessage:
        """The `response_fn` of `MockChatGenerator`: the next step's tool calls, or the final answer."""
        self.peak_context_tokens = max(self.peak_context_tokens, self.counter.count(messages=messages))
        if self.on_step is not None:
            self.on_step(self, messages)
        if self.step >= self.steps:
            return ChatMessage.from_assistant(f"I explored {len(set(self.seen))} files in {self.steps} steps.")
        calls = self._next_calls(messages)
        self.step += 1
        return ChatMessage.from_assistant(tool_calls=calls)

    def _next_calls(self, messages: list[ChatMessage]) -> list[ToolCall]:
        if self.step == 0:
            return [self._call("list_directory", path=".")]
        choice = self.random.random()
        references = [r for m in messages if m.tool_call_result for r in _REFERENCE_IN_POINTER.findall(m.text or "")]
        references += [
            r for m in messages if m.tool_call_result for r in _REFERENCE_IN_POINTER.findall(_result_text(m))
        ]
        if choice < 0.10 and references and self.read_backs_allowed:
            self.read_backs += 1
            arguments: dict[str, Any] = {self.reference_parameter: self.random.choice(references)}
            if self.random.random() < 0.5:
                arguments["pattern"] = self.random.choice(["def \\w+", "class \\w+", "import"])
            return [self._call(self.read_tool_name, **arguments)]
        if choice < 0.40 and self.seen:
            return [self._call("read_file", path=self.random.choice(self.seen))]
        if choice < 0.55:
            return [self._call("search_text", text=self.random.choice(_SEARCH_WORDS))]
        if choice < 0.65:
            return [self._call("list_directory", path=self.random.choice(self.folders))]
        count = 2 if choice > 0.90 else 1
        return [self._read_next_file() for _ in range(count)]

    def _read_next_file(self) -> ToolCall:
        unseen = [name for name in self.files if name not in self.seen]
        name = unseen[0] if unseen else self.random.choice(self.files)
        self.seen.append(name)
        return self._call("read_file", path=name)

    def _call(self, tool_name: str, **arguments: Any) -> ToolCall:
        self.calls += 1
        return ToolCall(tool_name=tool_name, arguments=arguments, id=f"call_{self.calls}")


def _result_text(message: ChatMessage) -> str:
    result = message.tool_call_result
    return result.result if result is not None and isinstance(result.result, str) else ""


def default_corpus() -> Path:
    """:returns: The installed casstore package's own source folder, which every installation has."""
    return Path(__file__).resolve().parent.parent
