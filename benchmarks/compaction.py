"""
The compactors over one long conversation: casstore's `DedupOffloadCompactor` against Haystack's
`ToolResultOffloadCompactor` (each with its own store), as `CompactionHook` would drive them.

The conversation is the trace's first tool results, one agent step each (an assistant tool call, then its result;
image results as multi-part results). After each step the running token count is checked against `compact_at` of the
context window; when it is reached the compactor is asked to bring the conversation down to `compact_to`, exactly as
`CompactionHook` does. Each `compact` call is timed; the tokens it removed are added up.

`DedupOffloadCompactor` is imported lazily, so the rest of the benchmark runs while it does not exist yet.
"""

import base64
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from haystack.dataclasses import ChatMessage, ImageContent, TextContent, ToolCall
from haystack.hooks.compaction import ToolResultOffloadCompactor
from haystack.hooks.tool_result_offloading import FileSystemToolResultStore
from haystack.token_counters import ApproximateTokenCounter

from benchmarks.measure import disk_usage
from benchmarks.trace import PackedTrace
from casstore import ContentAddressedToolResultStore

DEDUP = "DedupOffloadCompactor"
HAYSTACK = "ToolResultOffloadCompactor"


def _conversation_steps(trace: PackedTrace, results: int) -> list[tuple[ChatMessage, ChatMessage]]:
    """Build `(assistant tool call, tool result)` pairs for the trace's first `results` results."""
    steps: list[tuple[ChatMessage, ChatMessage]] = []
    last_write = 0
    while last_write < len(trace) and trace.result_of[last_write] < results:
        last_write += 1
    writes = trace.load(0, last_write)
    position = 0
    while position < len(writes):
        result = trace.result_of[position]
        parts: list[tuple[str, str | bytes]] = []
        while position < len(writes) and trace.result_of[position] == result:
            parts.append(writes[position])
            position += 1
        call = ToolCall(tool_name=trace.tools[result], arguments={"result": result}, id=trace.call_ids[result])
        content: str | list[TextContent | ImageContent]
        if len(parts) == 1 and isinstance(parts[0][1], str):
            content = parts[0][1]
        else:
            content = [
                TextContent(text=value)
                if isinstance(value, str)
                else ImageContent(
                    base64_image=base64.b64encode(value).decode("ascii"),
                    mime_type="image/png" if name.endswith(".png") else "image/jpeg",
                    validation=False,
                )
                for name, value in parts
            ]
        steps.append((ChatMessage.from_assistant(tool_calls=[call]), ChatMessage.from_tool(content, origin=call)))
    return steps


def _make_compactor(name: str, root: Path) -> tuple[Any, Callable[[], None]]:
    if name == DEDUP:
        from casstore.compactor import DedupOffloadCompactor  # the other half of this project; may not exist yet

        store = ContentAddressedToolResultStore(root)
        return DedupOffloadCompactor(store, min_keep_steps=1, min_tokens=200, preview_chars=200), store.close
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Haystack marks it experimental; the comparison is the point here
        baseline = ToolResultOffloadCompactor(
            FileSystemToolResultStore(root), min_keep_steps=1, min_tokens=200, preview_chars=200
        )
    return baseline, lambda: None


def _run_one(
    name: str,
    steps: list[tuple[ChatMessage, ChatMessage]],
    root: Path,
    *,
    compact_at: int,
    target_tokens: int,
) -> dict[str, float]:
    counter = ApproximateTokenCounter()
    compactor, close = _make_compactor(name, root)
    messages: list[ChatMessage] = [
        ChatMessage.from_system("You are a coding agent."),
        ChatMessage.from_user("Work through the task; read and search the code as you need."),
    ]
    tokens = counter.count(messages=messages)
    calls: list[int] = []
    saved = 0
    try:
        for assistant, tool_message in steps:
            messages.append(assistant)
            messages.append(tool_message)
            tokens += counter.count(messages=[assistant, tool_message])
            if tokens < compact_at:
                continue
            before = time.perf_counter_ns()
            compacted = compactor.compact(messages, target_tokens, counter)
            calls.append(time.perf_counter_ns() - before)
            if compacted is not None:
                after = counter.count(messages=compacted)
                saved += max(0, counter.count(messages=messages) - after)
                messages = compacted
                tokens = after
            else:
                tokens = counter.count(messages=messages)
    finally:
        close()
    ordered = sorted(calls)
    return {
        "calls": len(calls),
        "call_p50_us": ordered[len(ordered) // 2] / 1e3 if ordered else float("nan"),
        "call_p90_us": ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))] / 1e3 if ordered else float("nan"),
        "call_total_s": sum(calls) / 1e9,
        "tokens_saved": saved,
        "final_tokens": tokens,
        "du_bytes": float(disk_usage(root).blocks_bytes),
        "files": float(disk_usage(root).files),
    }


def compare(
    trace: PackedTrace,
    workdir: Path,
    *,
    results: int,
    repetitions: int,
    context_window: int = 400_000,
    compact_at: float = 0.7,
    compact_to: float = 0.4,
) -> dict[str, Any]:
    """
    Run both compactors over the same conversation, alternating which goes first, with fresh stores each time.

    :param trace: The packed trace; its first `results` results make the conversation.
    :param workdir: Where the stores go (removed afterwards).
    :param results: How many tool results the conversation has.
    :param repetitions: How many times each compactor runs; figures are medians.
    :param context_window: The model's window in tokens, as given to `CompactionHook`.
    :param compact_at: Fraction of the window at which compaction starts.
    :param compact_to: Fraction of the window the compactor is asked to reach.
    :returns: Per compactor: calls, time per call (p50, p90, total), tokens saved, final tokens, store du and files.
    """
    import shutil

    steps = _conversation_steps(trace, results)
    runs: dict[str, list[dict[str, float]]] = {DEDUP: [], HAYSTACK: []}
    for repetition in range(repetitions):
        order = (DEDUP, HAYSTACK) if repetition % 2 == 0 else (HAYSTACK, DEDUP)
        for name in order:
            root = workdir / f"compactor{repetition}-{name}"
            shutil.rmtree(root, ignore_errors=True)
            runs[name].append(
                _run_one(
                    name,
                    steps,
                    root,
                    compact_at=int(context_window * compact_at),
                    target_tokens=int(context_window * compact_to),
                )
            )
            shutil.rmtree(root, ignore_errors=True)
    summary: dict[str, Any] = {
        "tool_results": len(steps),
        "context_window": context_window,
        "compact_at": int(context_window * compact_at),
        "target_tokens": int(context_window * compact_to),
    }
    for name, samples in runs.items():
        summary[name] = {key: sorted(sample[key] for sample in samples)[len(samples) // 2] for key in samples[0]}
    return summary
