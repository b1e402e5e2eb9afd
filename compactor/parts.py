"""
The parts of a tool result as a store is given them: each part's payload and the key it is written under.

Keys follow Haystack's scheme, `compacted_<tool>_<id><ext>` for a single part and `compacted_<tool>_<id>_<n><ext>`
for the n-th of several, with the tool name and id reduced to characters that are safe in any store's key.
"""

import re
from dataclasses import dataclass

from haystack.dataclasses import ToolCallResult

from casstore.compactor.pointers import ContentBlock, block_extension, block_payload

# Characters kept from a tool name or tool call id in a store key; anything else becomes `_`.
_UNSAFE_KEY_CHARACTERS = re.compile(r"[^A-Za-z0-9_.-]")
_MAX_KEY_PART = 64


@dataclass(frozen=True, slots=True)
class Part:
    """One part of a tool result, ready to write."""

    block: ContentBlock
    payload: str | bytes
    key: str
    extension: str

    @property
    def identity(self) -> tuple[bool, str, str | bytes]:
        """Parts with equal identity are the same content under the same extension, so they share a reference."""
        return isinstance(self.payload, str), self.extension, self.payload


def result_parts(result: ToolCallResult, blocks: list[ContentBlock], *, key_id: str) -> list[Part]:
    """
    Pair each part of a result with its payload and store key, as Haystack names them.

    :param result: The tool result, for its tool name.
    :param blocks: Its content blocks (`content_blocks(result)`).
    :param key_id: What identifies the result in its keys: the tool call id, or a random hex string.
    :returns: One part per block, in order.
    :raises binascii.Error: If an image's or a file's base64 payload does not decode.
    """
    prefix = f"compacted_{key_part(result.origin.tool_name)}_{key_id}"
    single = len(blocks) == 1
    parts: list[Part] = []
    for position, block in enumerate(blocks):
        extension = block_extension(block)
        key = f"{prefix if single else f'{prefix}_{position}'}{extension}"
        parts.append(Part(block=block, payload=block_payload(block), key=key, extension=extension))
    return parts


def key_part(text: str) -> str:
    """
    Make a tool name or a tool call id safe for a store key.

    :param text: The name or id.
    :returns: It with every character but letters, digits, `_`, `.` and `-` replaced by `_`, cut to 64 characters.
    """
    return _UNSAFE_KEY_CHARACTERS.sub("_", text)[:_MAX_KEY_PART] or "_"
