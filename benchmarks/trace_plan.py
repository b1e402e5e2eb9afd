"""
What a trace is before it is built: its sizes, the mix of tool calls each size uses, and the shape of one result.

The generator (`benchmarks.agent`) follows this plan; changing anything here changes the trace for the same seed, so
bump `GENERATOR_VERSION` with it.
"""

from dataclasses import dataclass

#: Bump when the generator changes in a way that changes the trace for the same seed.
GENERATOR_VERSION = 1


@dataclass(frozen=True, slots=True)
class TraceSize:
    """How long a trace is and which mix of tools it uses."""

    name: str
    results: int
    profile: str
    description: str


SIZES: dict[str, TraceSize] = {
    "small": TraceSize("small", 2_000, "coding", "~2k results, runs in seconds"),
    "medium": TraceSize("medium", 20_000, "coding", "~20k results, ~150 MB logical"),
    "scale": TraceSize("scale", 120_000, "scale", "120k results, mostly small"),
}

#: Relative frequency of each kind of tool call, by profile. "scale" is the same agent doing mostly small, targeted
#: calls. The order of the tools matters: it is the order the weighted choice walks.
TOOL_WEIGHTS: dict[str, dict[str, float]] = {
    "coding": {
        "read_file": 30,
        "read_range": 14,
        "read_page": 3,
        "edit_file": 9,
        "grep": 13,
        "list_dir": 10,
        "git_diff": 5,
        "git_status": 4,
        "git_log": 3,
        "git_show": 2,
        "view_image": 3,
    },
    "scale": {
        "read_file": 12,
        "read_range": 30,
        "read_page": 1,
        "edit_file": 12,
        "grep": 16,
        "list_dir": 12,
        "git_diff": 4,
        "git_status": 10,
        "git_log": 1,
        "git_show": 0.5,
        "view_image": 1.5,
    },
}

#: Largest file the "scale" profile reads whole; larger ones it reads by line range.
SCALE_READ_MAX_BYTES = 12 * 1024


@dataclass(frozen=True, slots=True)
class Part:
    """One part of a tool result, written under its own key: text, or bytes for an image."""

    key: str
    content: str | bytes


@dataclass(frozen=True, slots=True)
class ToolResult:
    """One tool call's result, as Haystack's offload hook would write it: one or more parts."""

    step: int
    tool: str
    call_id: str
    arguments: dict[str, object]
    parts: tuple[Part, ...]
