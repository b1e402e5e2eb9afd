"""
What a key of Haystack's `ToolResultOffloadHook` says: the step, the tool and the call id it offloaded.

The hook names each part of a result `{step}_{tool}_{call id}[_{part}].{ext}`, with `call{index}` standing in for the
id of a call that has none. Tool names and ids may both hold `_`, so a key is split only where the call id is of a
kind `CALL_ID_MARKERS` names (OpenAI's `call_...`, Anthropic's `toolu_...`, the Responses API's `fc_...`, the
`chatcmpl-...` of OpenAI-compatible servers, or the hook's `call{index}`) and exactly one split reads the whole key.
Any other key of the hook's shape keeps its tool unknown: it is shown by its stem, never by a guessed tool name.
"""

import re
from typing import NamedTuple

# Where the call id starts in a hook's key, after the tool name: OpenAI's, Anthropic's, and the hook's own
# `call{index}` when a tool call has no id.
CALL_ID_MARKERS = ("_call", "_toolu_", "_fc_", "_chatcmpl")


# What follows an id's marker: the letters, digits and dashes providers put in ids. No `_`, so that an id of a marker
# with one is told apart from the tool before it and the part after it.
_ID_BODY = "[A-Za-z0-9-]+"
# Each marker's ids, whole (a marker's leading `_` separates the id from the tool and is not part of the id).
_IDS_BY_MARKER = {
    "_call": f"call_{_ID_BODY}",
    "_toolu_": f"toolu_{_ID_BODY}",
    "_fc_": f"fc_{_ID_BODY}",
    "_chatcmpl": f"chatcmpl-{_ID_BODY}",
}
assert set(_IDS_BY_MARKER) == set(CALL_ID_MARKERS), "each call-id marker needs the shape of its ids here"
_CALL_ID = re.compile("|".join(_IDS_BY_MARKER.values()), re.ASCII)
# The hook's stand-in for a call without an id: its position in the step's batch of results.
_STAND_IN = re.compile(r"call(?:0|[1-9][0-9]*)", re.ASCII)
# A step or a part as the hook prints an int from a counter: ASCII digits without a leading zero.
_COUNTER = re.compile(r"0|[1-9][0-9]*", re.ASCII)


class HookKey(NamedTuple):
    """A key of the hook's shape: its step, and its tool, call id and part where the key tells them for certain."""

    step: int
    stem: str
    tool_name: str | None
    tool_call_id: str | None
    part: int | None


def parse_hook_key(key: str) -> HookKey | None:
    """
    :param key: A key as a write was given it.
    :returns: What it says as a key of Haystack's `ToolResultOffloadHook`: `stem` is the key without its extension;
        `tool_name` is None unless exactly one tool and call id read the key (then `tool_call_id` is the id, None for
        the hook's `call{index}` stand-in, and `part` the part's position in a result of several). None when the key
        is not of the hook's shape (`{step}_{tool}_{id}.{ext}`).
    """
    stem, dot, extension = key.rpartition(".")
    step_text, underscore, tail = stem.partition("_")
    if not (dot and extension and underscore and _COUNTER.fullmatch(step_text)):
        return None
    # The hook puts `_` between a tool and its id, and both are non-empty.
    if "_" not in tail.strip("_"):
        return None
    step = int(step_text)
    readings = _readings(tail)
    if len(readings) != 1:
        return HookKey(step, stem, None, None, None)
    [(tool_name, call_id, part)] = readings
    return HookKey(step, stem, tool_name, call_id, part)


def _readings(tail: str) -> set[tuple[str, str | None, int | None]]:
    """:returns: Every `(tool, call id, part)` whose key would end in `tail`, with an id of a known kind."""
    segments = tail.split("_")
    found: set[tuple[str, str | None, int | None]] = set()
    for part in (None, segments[-1]):
        if part is not None and not _COUNTER.fullmatch(part):
            continue
        core = segments if part is None else segments[:-1]
        # An id holds at most one `_` (after its marker), so it is the core's last segment or its last two.
        for width in (1, 2):
            tool, call_id = "_".join(core[:-width]), "_".join(core[-width:])
            if len(core) <= width or not tool:
                continue
            number = None if part is None else int(part)
            if _STAND_IN.fullmatch(call_id):
                found.add((tool, None, number))
            elif _CALL_ID.fullmatch(call_id):
                found.add((tool, call_id, number))
    return found
