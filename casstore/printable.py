"""
Text from the store, made safe to show: tool names, call ids and hook keys come from tools and models, and may hold
characters a terminal or a page acts on rather than shows.

`visible` replaces each control character (C0, DEL, C1, and the line and paragraph separators) and each bidi control
with the escape `repr` writes (`\\n`, `\\x1b`, `\\u202e`), so every value stays on its own line, in its own place and
reading order, and shows what it holds. Backslashes are left as they are: `--json` gives the values exactly.
"""

import re

__all__ = ["visible"]

# C0, DEL and C1; the Unicode line and paragraph separators; the bidi embeddings, overrides, isolates and marks.
_UNSHOWABLE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]")


_SHORT = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape(match: re.Match[str]) -> str:
    character = match.group()
    code = ord(character)
    return _SHORT.get(character) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def visible(text: str) -> str:
    """
    :param text: A value read from the store.
    :returns: `text` with every control and bidi control character written as its escape (`\\x07`, `\\u202e`); the
        same text when it has none.
    """
    return _UNSHOWABLE.sub(_escape, text)
