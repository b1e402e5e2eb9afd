"""
What a user pays for each way of holding an agent's window: the demo's scripted coding agent (a real Haystack `Agent`
over a real folder) for the same steps, under `CompactionHook` with

- `offload`: Haystack's `ToolResultOffloadCompactor` on its `FileSystemToolResultStore`,
- `sliding`: Haystack's `SlidingWindowCompactor`,
- `chain`: casstore's `CompactorChain` of `DedupOffloadCompactor` and `StepArchiveCompactor`,

in windows of 8k and 32k tokens. For each: the context peak (the largest request the model received), the tokens sent
over the run (the sum over steps: what a provider bills), the tool results still recoverable at the end (in the final
conversation, or read back through the references it holds, following each transcript to the references it holds in
turn), the disk used, and the compaction time per step.

    python -m benchmarks.step_archive                  # 200 steps over casstore's own source, about a minute
    python -m benchmarks.step_archive --steps 400 --corpus ~/src/project

The agent follows one plan in every run: it does not read references back (`--read-backs` lets it, and then the runs
differ, since only the store's setups leave references to read).

Prints a markdown table (docs/compactor.md shows one).
"""

import argparse
import re
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from haystack.components.agents import Agent
from haystack.components.generators.chat import MockChatGenerator
from haystack.dataclasses import ChatMessage
from haystack.hooks.compaction import CompactionHook, SlidingWindowCompactor, ToolResultOffloadCompactor
from haystack.hooks.tool_result_offloading import FileSystemToolResultStore
from haystack.hooks.tool_result_offloading.types import ToolResultStore
from haystack.token_counters import TokenCounter
from haystack.utils.experimental import ExperimentalWarning

from casstore import ContentAddressedToolResultStore
from casstore.compactor import CompactorChain, DedupOffloadCompactor, StepArchiveCompactor, make_read_tool
from casstore.demo.agent import ScriptedCodingAgent, default_corpus
from casstore.demo.tools import make_file_tools
from casstore.disk import disk_usage

SETUPS = ("offload", "sliding", "chain")
WINDOWS = (8_000, 32_000)
# A quoted reference in a pointer, a note or a transcript: a hash path, or the file path Haystack's store gives.
_QUOTED = re.compile(r"at '([^']+)'|archived to '([^']+)'|stored at '([^']+)'")


@dataclass(frozen=True)
class Outcome:
    """One setup in one window."""

    setup: str
    window: int
    steps: int
    peak_tokens: int
    tokens_sent: int
    results: int
    recoverable: int
    disk_bytes: int
    compaction_ms_per_step: float


class _Timed:
    """A compactor that adds up the time its wrapped compactor takes."""

    def __init__(self, compactor: Any) -> None:
        self.compactor = compactor
        self.seconds = 0.0

    def compact(
        self, messages: list[ChatMessage], target_tokens: int, token_counter: TokenCounter
    ) -> list[ChatMessage] | None:
        started = time.perf_counter()
        try:
            return self.compactor.compact(messages, target_tokens, token_counter)  # type: ignore[no-any-return]
        finally:
            self.seconds += time.perf_counter() - started

    async def compact_async(
        self, messages: list[ChatMessage], target_tokens: int, token_counter: TokenCounter
    ) -> list[ChatMessage] | None:
        return self.compact(messages, target_tokens, token_counter)

    def to_dict(self) -> dict[str, Any]:
        return {"type": "benchmarks.step_archive._Timed", "init_parameters": {}}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "_Timed":
        raise NotImplementedError("the benchmark's timing wrapper is not serialized")


def _compactor(setup: str, root: Path, window: int) -> tuple[Any, ToolResultStore]:
    """:returns: The setup's compactor and the store its read tool reads."""
    if setup == "offload":
        store: ToolResultStore = FileSystemToolResultStore(root=str(root))
        return ToolResultOffloadCompactor(store=store, min_tokens=100), store
    if setup == "sliding":
        return SlidingWindowCompactor(), FileSystemToolResultStore(root=str(root))
    casstore = ContentAddressedToolResultStore(root, namespace="benchmark")
    chain = CompactorChain(
        compactors=[
            DedupOffloadCompactor(store=casstore, min_tokens=100, context_window=window),
            StepArchiveCompactor(store=casstore, search_tool_name=None, context_window=window),
        ]
    )
    return chain, casstore


def _recoverable(results: dict[str, str], final: list[ChatMessage], store: ToolResultStore) -> int:
    """:returns: How many of the run's results (by call id) the final conversation holds or reaches by reference."""
    seen_text: list[str] = []
    pending: list[str] = []
    for message in final:
        text = "\n".join([*message.texts, *(str(result.result) for result in message.tool_call_results)])
        seen_text.append(text)
        pending += [next(group for group in match if group) for match in _QUOTED.findall(text)]
    read: set[str] = set()
    while pending:
        reference = pending.pop()
        if reference in read:
            continue
        read.add(reference)
        try:
            content = store.read(reference)
        except Exception:  # a reference this store cannot read: nothing more is reachable through it
            continue
        if isinstance(content, str):
            seen_text.append(content)
            pending += [next(group for group in match if group) for match in _QUOTED.findall(content)]
    everything = "\n".join(seen_text)
    return sum(1 for text in results.values() if text in everything)


def run_one(setup: str, *, window: int, steps: int, corpus: Path, folder: Path, read_backs: bool = False) -> Outcome:
    """
    Run the scripted agent under one setup and measure it.

    :param read_backs: Let the agent read back references it sees. Off by default: only the store's setups leave
        references, so with read-backs the runs would follow different plans.
    """
    root = folder / f"{setup}-{window}"
    with warnings.catch_warnings():  # Haystack marks its compactors experimental
        warnings.simplefilter("ignore", ExperimentalWarning)
        compactor, store = _compactor(setup, root, window)
    timed = _Timed(compactor)
    read_tool = make_read_tool(store)
    model = ScriptedCodingAgent(corpus=corpus, steps=steps, read_tool=read_tool, read_backs=read_backs)
    sent = [0]
    # Every result the model received, by call id, as it first saw it: the newest step is never compacted, so each
    # result reaches the model whole once.
    results: dict[str, str] = {}

    def on_step(agent: ScriptedCodingAgent, messages: list[ChatMessage]) -> None:
        sent[0] += agent.counter.count(messages=messages)
        for message in messages:
            result = message.tool_call_result
            if result is not None and result.origin.id not in results and "context_compaction" not in message.meta:
                results[result.origin.id or ""] = str(result.result)

    model.on_step = on_step
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExperimentalWarning)
        hook = CompactionHook(compactor=timed, context_window=window, compact_at=0.7, compact_to=0.4)
    agent = Agent(
        chat_generator=MockChatGenerator(response_fn=model.respond, meta={"usage": None}),
        tools=[*make_file_tools(corpus), read_tool],
        hooks={"before_llm": [hook]},
        max_agent_steps=steps + 2,
    )
    messages = agent.run(messages=[ChatMessage.from_user(f"Explore the project in {corpus.name}.")])["messages"]
    recoverable = _recoverable(results, messages, store)
    if isinstance(store, ContentAddressedToolResultStore):
        store.close()
    return Outcome(
        setup=setup,
        window=window,
        steps=model.step,
        peak_tokens=model.peak_context_tokens,
        tokens_sent=sent[0],
        results=len(results),
        recoverable=recoverable,
        disk_bytes=disk_usage(root) if root.exists() else 0,
        compaction_ms_per_step=round(1000 * timed.seconds / max(model.step, 1), 3),
    )


def main(argv: list[str] | None = None) -> list[Outcome]:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.step_archive", description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--corpus", type=Path, default=None, help="the folder the agent explores")
    parser.add_argument(
        "--read-backs", action="store_true", help="let the agent read back references (the runs' plans then differ)"
    )
    arguments = parser.parse_args(argv)
    corpus = (arguments.corpus or default_corpus()).resolve()
    outcomes = []
    with tempfile.TemporaryDirectory(prefix="casstore-step-archive-") as folder:
        for window in WINDOWS:
            for setup in SETUPS:
                outcomes.append(
                    run_one(
                        setup,
                        window=window,
                        steps=arguments.steps,
                        corpus=corpus,
                        folder=Path(folder),
                        read_backs=arguments.read_backs,
                    )
                )
    print(f"{arguments.steps} steps of the demo's agent over {corpus}\n")
    print("| window | setup | context peak | tokens sent | results recoverable | disk | compaction per step |")
    print("| ---: | --- | ---: | ---: | ---: | ---: | ---: |")
    for outcome in outcomes:
        print(
            f"| {outcome.window:,} | {outcome.setup} | {outcome.peak_tokens:,} | {outcome.tokens_sent:,} | "
            f"{outcome.recoverable} of {outcome.results} | {outcome.disk_bytes / 1024:,.0f} KiB | "
            f"{outcome.compaction_ms_per_step:.2f} ms |"
        )
    return outcomes


if __name__ == "__main__":
    main()
