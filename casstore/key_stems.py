"""
A key's stem: the part of a Haystack key that its tool's every write repeats, kept once in the index (migration 0021).

Haystack's offload hook names a result `{step}_{tool}_{call id}[_{part}].{ext}` (`3788_read_file_call_5f0c...txt`),
its compactor `compacted_{tool}_{32 hex}[_{part}].{ext}`, and casstore's `compacted_{tool}_{call id}[_{part}].{ext}`.
Of a key's 40 characters on the benchmark's trace, the step and the tool are 20: `write_log` keeps the step as an
integer, the stem (`read_file_call`) as the id of a `key_stems` row, and only the rest of the key as text. The views
show the whole key, as before.

A key of another shape is kept whole. `split_key` and `KeyParts.key` are exact inverses: whatever is split joins back
to the same string (a property test holds them to it).
"""

import re
from typing import NamedTuple

# Where the call id starts in a hook's key, after the tool name: OpenAI's, Anthropic's, and the hook's own
# `call{index}` when a tool call has no id.
CALL_ID_MARKERS = ("_call", "_toolu_", "_fc_", "_chatcmpl")
# Haystack's compactor's keys: `compacted_{tool}_`, the stem, then 32 hex digits, maybe `_{part}` and an extension.
_COMPACTED = "compacted_"
_COMPACTED_KEY = re.compile(r"(compacted_.+?_)([0-9a-f]{32}(?:[_.].*)?)", re.DOTALL)
# The steps kept as integers: ASCII digits without a leading zero that fit in 64 bits with room to spare.
_MAX_STEP_DIGITS = 18
# A stem longer than this is no tool name: such a key is kept whole.
MAX_STEM_LENGTH = 200
# At most this many stems are kept; past it, keys of new stems are kept whole (a key of any shape is accepted, so
# their number is bounded here, not by the tools an agent has).
MAX_KEY_STEMS = 4096


class KeyParts(NamedTuple):
    """A key as `write_log` keeps it: `{step}_` (if any), the stem, and the rest."""

    step: int | None
    stem: str
    rest: str

    @property
    def key(self) -> str:
        """:returns: The whole key, as the views show it."""
        prefix = "" if self.step is None else f"{self.step}_"
        return f"{prefix}{self.stem}{self.rest}"


def split_key(key: str) -> KeyParts | None:
    """
    :param key: A key as a write was given it.
    :returns: Its step, stem and rest, or None if it has no stem worth keeping apart (it is kept whole).
    """
    step_text, underscore, tail = key.partition("_")
    if underscore and _is_step(step_text):
        return _split_at_call_id(int(step_text), "", tail)
    if not key.startswith(_COMPACTED):
        return None
    compacted = _COMPACTED_KEY.fullmatch(key)
    if compacted is not None:
        return _parts(None, compacted.group(1), compacted.group(2))
    # casstore's compactor names a result by its tool call's id: `compacted_{tool}_{call id}...`.
    return _split_at_call_id(None, _COMPACTED, key[len(_COMPACTED) :])


def _split_at_call_id(step: int | None, prefix: str, tail: str) -> KeyParts | None:
    for marker in CALL_ID_MARKERS:
        cut = tail.rfind(marker)
        if cut > 0:
            end = cut + len(marker)
            return _parts(step, prefix + tail[:end], tail[end:])
    return None


def _parts(step: int | None, stem: str, rest: str) -> KeyParts | None:
    return KeyParts(step, stem, rest) if len(stem) <= MAX_STEM_LENGTH else None


def _is_step(text: str) -> bool:
    # Kept as an integer, the step must print back as the same text: no sign, no leading zero, no other digits.
    return (
        0 < len(text) <= _MAX_STEP_DIGITS
        and text.isascii()
        and text.isdigit()
        and (text == "0" or not text.startswith("0"))
    )
