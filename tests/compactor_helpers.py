"""
Shared helpers for the compactor and read-tool tests.

Conversations are built like Haystack's own compaction tests, and sized with a deterministic counter that measures
images and files by their base64 payload, the way a provider-side counter would.
"""

import base64
import re
import struct
import zlib
from collections.abc import Callable
from typing import Any

from haystack.dataclasses import ChatMessage, FileContent, ImageContent, TextContent, ToolCall
from haystack.dataclasses.chat_message import ChatMessageContentT
from haystack.token_counters.utils import _rendered_conversation, _rendered_tools
from haystack.tools import ToolsType

ContentBlock = TextContent | ImageContent | FileContent


def _payload_placeholder(content: ChatMessageContentT) -> str:
    if isinstance(content, ImageContent):
        return content.base64_image
    if isinstance(content, FileContent):
        return content.base64_data
    return f"<{type(content).__name__}>"


class PayloadCounter:
    """A `TokenCounter` with a fixed rate that measures an image or a file by its base64 payload."""

    def __init__(self, *, chars_per_token: int = 4) -> None:
        self.chars_per_token = chars_per_token

    def count(self, messages: list[ChatMessage], tools: ToolsType | None = None) -> int:
        if not messages and not tools:
            return 0
        rendered = _rendered_conversation(messages, placeholder=_payload_placeholder) + _rendered_tools(tools)
        return len(rendered) // self.chars_per_token

    def to_dict(self) -> dict[str, Any]:
        return {"type": "tests.compactor_helpers.PayloadCounter", "init_parameters": {}}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "PayloadCounter":
        return cls()


def png_bytes(size: int, *, seed: int = 0) -> bytes:
    """A real PNG (1x1, one pixel of colour `seed`), padded with a private chunk to about `size` bytes."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0))
    pixel = chunk(b"IDAT", zlib.compress(bytes([0, seed % 256, 0, 0])))
    padding = chunk(b"prVt", bytes((seed + index) % 256 for index in range(max(size - 70, 0))))
    return b"\x89PNG\r\n\x1a\n" + header + padding + pixel + chunk(b"IEND", b"")


def pdf_bytes(size: int) -> bytes:
    """
    Bytes that start like a real PDF, about `size` long: the header, then the comment of bytes above 127 that PDF
    writers put next so that tools take the file for binary (it is not UTF-8).
    """
    return (b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n" + b"0" * size)[:size]


def image_block(data: bytes, mime_type: str = "image/png") -> ImageContent:
    return ImageContent(base64_image=base64.b64encode(data).decode(), mime_type=mime_type)


def file_block(data: bytes, *, mime_type: str = "application/pdf", filename: str | None = "report.pdf") -> FileContent:
    return FileContent(base64_data=base64.b64encode(data).decode(), mime_type=mime_type, filename=filename)


def tool_call(*call_ids: str, name: str = "search") -> ChatMessage:
    """An assistant message requesting one tool call per id; several ids make a parallel batch."""
    return ChatMessage.from_assistant(
        tool_calls=[ToolCall(tool_name=name, arguments={"q": call_id}, id=call_id) for call_id in call_ids]
    )


def tool_result(
    result: str | list[ContentBlock], *, call_id: str, name: str = "search", error: bool = False
) -> ChatMessage:
    """A tool-result message answering the call with the given id."""
    return ChatMessage.from_tool(
        tool_result=result, origin=ToolCall(tool_name=name, arguments={"q": call_id}, id=call_id), error=error
    )


def zoo_conversation() -> list[ChatMessage]:
    """
    A conversation with every kind of tool result a compactor meets: a system prompt, an earlier task, small and large
    results, an error, parallel results, results repeated word for word, multi-part results with images and files,
    an already offloaded result, an empty one, and a final step whose results must stay.
    """
    big = "alpha beta gamma delta " * 60
    other = "the quick brown fox jumps " * 50
    return [
        ChatMessage.from_system("You are a careful research agent."),
        ChatMessage.from_user("Earlier task: look things up."),
        tool_call("c1"),
        tool_result(big, call_id="c1"),
        ChatMessage.from_assistant("Earlier answer."),
        ChatMessage.from_user("Now the real task."),
        tool_call("c2", "c3", "c4"),
        tool_result(other, call_id="c2"),
        tool_result("tiny", call_id="c3"),
        tool_result("boom " * 200, call_id="c4", error=True),
        tool_call("c5", name="fetch"),
        tool_result(
            [TextContent(big), image_block(png_bytes(2000)), file_block(pdf_bytes(1500))], call_id="c5", name="fetch"
        ),
        tool_call("c6"),
        tool_result(big, call_id="c6"),
        tool_call("c7"),
        ChatMessage.from_tool(
            tool_result="Tool result offloaded to text (10 characters) at 'elsewhere'. Preview: ...",
            origin=ToolCall(tool_name="search", arguments={}, id="c7"),
            meta={"tool_result_offloaded": ["elsewhere"]},
        ),
        tool_call("c8"),
        tool_result("", call_id="c8"),
        tool_call("c9", name="screenshot"),
        tool_result([image_block(png_bytes(3000, seed=7))], call_id="c9", name="screenshot"),
        tool_call("c10", "c11"),
        tool_result(other, call_id="c10"),
        tool_result(big, call_id="c11"),
    ]


_QUOTED_REFERENCE = re.compile(r"at '([^']*)'")


def normalised(messages: list[ChatMessage], read: Callable[[str], str | bytes]) -> list[dict[str, Any]]:
    """
    The conversation as dictionaries, with every reference (in pointer texts and in meta) replaced by a name for the
    content it holds, so conversations offloaded under different references compare equal when they hold the same.
    """
    names: dict[str | bytes, str] = {}

    def name(reference: str) -> str:
        return names.setdefault(read(reference), f"<content {len(names)}>")

    result = []
    for message in messages:
        data = message.to_dict()
        references = message.meta.get("tool_result_offloaded")
        if references and "context_compaction" in message.meta:
            data["meta"] = {
                **{key: value for key, value in data["meta"].items() if key != "casstore"},  # the compaction id
                "tool_result_offloaded": [name(reference) for reference in references],
            }
            pointer = message.tool_call_result
            assert pointer is not None and isinstance(pointer.result, str)
            text = _QUOTED_REFERENCE.sub(lambda match: f"at '{name(match[1])}'", pointer.result)
            data["content"][0]["tool_call_result"]["result"] = text
        result.append(data)
    return result


def tool_pairs_intact(messages: list[ChatMessage]) -> bool:
    """Whether every tool result answers a call of the step it belongs to, and every call has its result."""
    pending: set[str | None] = set()
    for message in messages:
        if message.tool_calls:
            if pending:
                return False
            pending = {call.id for call in message.tool_calls}
        for result in message.tool_call_results:
            if result.origin.id not in pending:
                return False
            pending.discard(result.origin.id)
    return not pending
