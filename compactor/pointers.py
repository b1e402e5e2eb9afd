"""
The reference text that replaces an offloaded tool result, and the meta keys that mark it.

This is Haystack's numbered-part pointer format, re-implemented so that the compactor does not depend on Haystack's
private helpers. A result with one part becomes one line:

    Tool result offloaded to text (5120 characters) at 'blake3/9b/1c4e...e4a.txt'. Preview: ...

and a result with several parts one numbered line per part:

    Tool result offloaded to 2 files:
    1. text (5120 characters) at 'blake3/9b/1c4e...e4a.txt'. Preview: ...
    2. image/png (20480 bytes) at 'blake3/bin/2f/77d0...01b.png'

The meta keys have the same values as Haystack's, so Haystack's own hooks and compactors recognise an offloaded
message and leave it alone.
"""

import base64
import mimetypes
from collections.abc import Sequence
from pathlib import PurePosixPath
from typing import Any

from haystack.dataclasses import ChatMessage, FileContent, ImageContent, TextContent, ToolCallResult

from casstore.references import is_plain_extension

# Marks an offloaded tool-result message; its value is the list of references, one per part (Haystack's value).
OFFLOADED_META_KEY = "tool_result_offloaded"
# Marks a message a compactor produced; its value records the strategy (Haystack's value).
COMPACTION_META_KEY = "context_compaction"
# The strategy name Haystack's `ToolResultOffloadCompactor` records under `COMPACTION_META_KEY`.
COMPACTION_STRATEGY = "tool_result_offloading"
# casstore's own keys in an offloaded message's meta, such as `{"compaction_id": "..."}`, kept out of Haystack's marker.
CASSTORE_META_KEY = "casstore"

TEXT_EXTENSION = ".txt"
# The extension of an image or file whose name and MIME type give none (Haystack's choice).
FALLBACK_EXTENSION = ".bin"

ContentBlock = TextContent | ImageContent | FileContent


def content_blocks(result: ToolCallResult) -> list[ContentBlock]:
    """
    Return a tool result's parts: a plain string result is one text part.

    :param result: The tool result.
    :returns: Its content blocks, in order.
    """
    if isinstance(result.result, str):
        return [TextContent(text=result.result)]
    return list(result.result)


def is_empty(blocks: Sequence[ContentBlock]) -> bool:
    """
    Tell whether a result has nothing worth offloading: no parts, or only empty text.

    :param blocks: The result's content blocks.
    :returns: True when every part is empty text (or there are none).
    """
    return all(isinstance(block, TextContent) and not block.text for block in blocks)


def is_text_only(blocks: Sequence[ContentBlock]) -> bool:
    """
    Tell whether a result holds only text, so a store without binary support can take it.

    :param blocks: The result's content blocks.
    :returns: True when no part is an image or a file.
    """
    return all(isinstance(block, TextContent) for block in blocks)


def block_payload(block: ContentBlock) -> str | bytes:
    """
    Return what a store is given for one part: the text, or the decoded bytes of an image or file.

    :param block: The content block.
    :returns: `str` for text, `bytes` for an image or a file.
    """
    if isinstance(block, TextContent):
        return block.text
    if isinstance(block, ImageContent):
        return base64.b64decode(block.base64_image)
    return base64.b64decode(block.base64_data)


def block_extension(block: ContentBlock) -> str:
    """
    Return the extension a part's store key ends with.

    Text is `.txt`. For an image or a file, the extension of its filename wins, then the one its MIME type implies,
    then `.bin`, as in Haystack; an extension that is not short and plain ASCII is skipped.

    :param block: The content block.
    :returns: The extension, with its dot.
    """
    if isinstance(block, TextContent):
        return TEXT_EXTENSION
    filename = block.filename if isinstance(block, FileContent) else None
    filename_extension = PurePosixPath(filename.replace("\\", "/")).suffix if filename else ""
    # A tool-provided name's extension is kept only if the store's own rule finds it short and plain.
    if is_plain_extension(filename_extension):
        return filename_extension
    mime_extension = mimetypes.guess_extension(block.mime_type) if block.mime_type else None
    if mime_extension and is_plain_extension(mime_extension):
        return mime_extension
    return FALLBACK_EXTENSION


def describe_block(block: ContentBlock, *, payload: str | bytes, reference: str, preview_chars: int) -> str:
    """
    Describe one offloaded part for the pointer text.

    :param block: The content block that was offloaded.
    :param payload: What was written for it (`block_payload(block)`).
    :param reference: The reference the store returned (or will return) for it.
    :param preview_chars: How many leading characters of a text to quote.
    :returns: For text, `text (N characters) at 'REF'. Preview: ...`; for an image, `image/png (N bytes) at 'REF'`;
        for a file, `application/pdf named 'x.pdf' (N bytes) at 'REF'`.
    """
    if isinstance(block, TextContent):
        text = block.text
        # An ellipsis marks a preview that was cut short, so the model can tell it is not the whole text.
        preview = f"{text[:preview_chars]}{'...' if len(text) > preview_chars else ''}"
        return f"text ({len(text)} characters) at '{reference}'. Preview: {preview}"
    if isinstance(block, ImageContent):
        label, named = block.mime_type or "image", ""
    else:
        label = block.mime_type or "file"
        named = f" named '{block.filename}'" if block.filename else ""
    return f"{label}{named} ({len(payload)} bytes) at '{reference}'"


def pointer_text(descriptions: Sequence[str]) -> str:
    """
    Join the parts' descriptions into the text that replaces the result.

    :param descriptions: One description per part, in order (at least one).
    :returns: One line for a single part; a count line and one numbered line per part otherwise.
    """
    if len(descriptions) == 1:
        return f"Tool result offloaded to {descriptions[0]}"
    numbered = [f"{position}. {description}" for position, description in enumerate(descriptions, start=1)]
    return "\n".join([f"Tool result offloaded to {len(descriptions)} files:", *numbered])


def offloaded_message(
    message: ChatMessage,
    *,
    pointer: str,
    references: Sequence[str],
    compaction: dict[str, Any],
    casstore: dict[str, Any] | None = None,
) -> ChatMessage:
    """
    Build the message that replaces an offloaded tool result.

    :param message: The tool-result message being replaced.
    :param pointer: The pointer text (`pointer_text`).
    :param references: The references, one per part.
    :param compaction: The value for `COMPACTION_META_KEY`, exactly Haystack's:
        `{"strategy": "tool_result_offloading", "original_tokens": 1234}`.
    :param casstore: casstore's own entries, such as `{"compaction_id": "..."}`, merged into the message's
        `CASSTORE_META_KEY` dictionary; None adds nothing.
    :returns: A tool-result message with the same origin, error flag and meta, plus the markers.
    :raises ValueError: If `message` carries no tool result.
    """
    result = message.tool_call_result
    if result is None:
        raise ValueError("Only tool-result messages can be offloaded; this message carries no tool result.")
    meta = {**message.meta, COMPACTION_META_KEY: compaction, OFFLOADED_META_KEY: list(references)}
    if casstore:
        earlier = message.meta.get(CASSTORE_META_KEY)
        meta[CASSTORE_META_KEY] = {**(earlier if isinstance(earlier, dict) else {}), **casstore}
    return ChatMessage.from_tool(tool_result=pointer, origin=result.origin, error=result.error, meta=meta)
