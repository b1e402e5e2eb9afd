"""
The readable transcript `StepArchiveCompactor` writes for the messages it takes out of the conversation.

One Markdown text per archive: a heading per message with its role, each tool call's name, id and JSON arguments, each
tool result's tool and call id, and the text. A result another compactor offloaded is its pointer text, so its
reference stands in the transcript and its content is not copied again; an earlier archive's note is its text, so its
reference chains to the transcript before. Images and files are stored beside the transcript, each as its own part,
and the transcript names their references. The same messages always give the same text, so archiving them twice
stores them once.
"""

import json
from collections.abc import Callable, Sequence

from haystack.dataclasses import (
    ChatMessage,
    ChatRole,
    FileContent,
    ImageContent,
    ReasoningContent,
    TextContent,
    ToolCall,
    ToolCallResult,
)

from casstore.compactor.pointers import COMPACTION_META_KEY, OFFLOADED_META_KEY, block_payload, content_blocks

# Called with an image or a file of a message; returns the reference it is (or will be) stored under.
AttachmentWriter = Callable[[ImageContent | FileContent], str]


def render_transcript(messages: Sequence[ChatMessage], *, heading: str, attach: AttachmentWriter) -> str:
    """
    Render archived messages as one Markdown text.

    :param messages: The archived messages, oldest first.
    :param heading: The first line's text, such as `Steps 1-40 (83 messages)`.
    :param attach: Stores an image or a file and returns its reference.
    :returns: The transcript, ending in a newline.
    """
    sections = [f"# Archived conversation: {heading}"]
    for number, message in enumerate(messages, start=1):
        sections.append(f"## {number}. {_title(message)}")
        body = [_part(part, attach) for part in message._content]
        sections.append("\n\n".join(text for text in body if text) or "(empty)")
    return "\n\n".join(sections) + "\n"


def _title(message: ChatMessage) -> str:
    """:returns: What a message is: its role, and for a tool result the call it answers."""
    marker = message.meta.get(COMPACTION_META_KEY)
    if message.is_from(ChatRole.USER) and isinstance(marker, dict):
        return f"note left by compaction ({marker.get('strategy', 'unknown')})"
    result = message.tool_call_result
    if result is None:
        return message.role.value + (f" ({message.name})" if message.name else "")
    flags = [flag for flag, on in (("error", result.error), ("offloaded", OFFLOADED_META_KEY in message.meta)) if on]
    return f"tool result of {_call_name(result.origin)}" + (f", {', '.join(flags)}" if flags else "")


def _call_name(call: ToolCall) -> str:
    return f"`{call.tool_name}`" + (f" (id {call.id})" if call.id else "")


def _part(part: object, attach: AttachmentWriter) -> str:
    """:returns: One content part of a message as text."""
    if isinstance(part, TextContent):
        return part.text
    if isinstance(part, ToolCall):
        arguments = json.dumps(part.arguments, ensure_ascii=False, sort_keys=True, default=str)
        return f"Tool call {_call_name(part)} with arguments {arguments}"
    if isinstance(part, ToolCallResult):
        return "\n\n".join(_part(block, attach) for block in content_blocks(part))
    if isinstance(part, ReasoningContent):
        return f"Reasoning: {part.reasoning_text}"
    if isinstance(part, ImageContent):
        return f"[image {part.mime_type or 'of unknown type'} stored at '{attach(part)}']"
    if isinstance(part, FileContent):
        named = f" named '{part.filename}'" if part.filename else ""
        return f"[file {part.mime_type or 'of unknown type'}{named} stored at '{attach(part)}']"
    return f"[{type(part).__name__}]"


def binary_payload(block: ImageContent | FileContent) -> bytes:
    """:returns: The decoded bytes of an image or a file. :raises binascii.Error: If its base64 does not decode."""
    payload = block_payload(block)
    assert isinstance(payload, bytes)
    return payload
