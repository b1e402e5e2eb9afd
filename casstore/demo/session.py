"""
`casstore demo`: a real Haystack `Agent` run that shows the store and the compactor at work.

A scripted model (`MockChatGenerator`) behaves like a coding agent exploring a folder: it lists folders, reads files,
searches, re-reads files it has seen, and now and then reads an offloaded result back by its reference. The tools do
real file I/O; `CompactionHook` with a `CompactorChain` of `DedupOffloadCompactor` and `StepArchiveCompactor` over a
`ContentAddressedToolResultStore` keeps the conversation under a small context window: older results are offloaded,
and older steps archived when that is not enough. At the end the summary compares the run's bytes with what Haystack's
`FileSystemToolResultStore` would have written for the same results (measured by writing them there).
"""

import os
import random
import re
import shlex
import shutil
import socket
import sys
import tempfile
import time
import warnings
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from haystack.components.agents import Agent
from haystack.components.generators.chat import MockChatGenerator
from haystack.dataclasses import ChatMessage, ToolCall
from haystack.hooks.compaction import CompactionHook
from haystack.hooks.tool_result_offloading import FileSystemToolResultStore
from haystack.token_counters import ApproximateTokenCounter
from haystack.tools.tool import Tool
from haystack.utils.experimental import ExperimentalWarning

from casstore.demo.tools import TEXT_SUFFIXES, make_file_tools
from casstore.disk import disk_usage
from casstore.history.figures import format_bytes, format_ratio, ratio
from casstore.namespaces import check_namespace
from casstore.stores.local import ContentAddressedToolResultStore, RepositoryToolResultStore
from casstore.stores.shared import SharedToolResultStore

DEFAULT_STEPS = 80
CONTEXT_WINDOW = 16_000
PREVIEW_CHARS = 120
_REFERENCE_IN_POINTER = re.compile(r"at '(blake3/[^']+)'")
_WITHIN_WINDOW = " (within it at every step)"
_OVER_WINDOW = " (over it: the newest step alone outgrew the window, and compaction always keeps it)"
# Printed after a run, for a person to paste.
EXPLORE_QUERIES = (
    "SELECT * FROM dedup_summary",
    "SELECT tool_name, offloads, saved_tokens FROM offload_summary WHERE namespace = '{namespace}'",
    "SELECT times_written, size, example_key FROM repeated_results ORDER BY bytes_deduplicated DESC LIMIT 5",
)
_SEARCH_WORDS = ("def ", "class ", "import ", "return ", "raise ", "self.", "connection", "digest", ":param")


@dataclass
class DemoSummary:
    """What one demo run did, with its figures read from the store's index."""

    root: str
    namespace: str
    corpus: str
    steps: int
    tool_results: int
    read_backs: int
    results_offloaded: int
    compactions: int
    tokens_saved: int
    archives: int
    steps_archived: int
    context_window: int
    peak_context_tokens: int
    logical_bytes: int
    unique_bytes: int
    stored_bytes: int
    disk_bytes_added: int
    store_disk_bytes: int
    filesystem_store_bytes: int
    filesystem_store_files: int
    seconds: float
    shared: bool = False

    # What the run's figures count: the run's own writes (in its namespace, after the run began) and the distinct
    # blobs they reference, whoever stored them first. `store_disk_bytes` alone is the whole store's.
    scope = "run"

    @property
    def dedup_ratio(self) -> float | None:
        """:returns: The run's logical bytes over its unique bytes; None if it stored nothing."""
        return ratio(self.logical_bytes, self.unique_bytes)

    @property
    def compression_ratio(self) -> float | None:
        """:returns: The run's unique bytes over their stored (compressed) bytes; None if it stored nothing."""
        return ratio(self.unique_bytes, self.stored_bytes)

    @property
    def total_ratio(self) -> float | None:
        """:returns: The run's logical bytes over the stored bytes of what it references; None if nothing."""
        return ratio(self.logical_bytes, self.stored_bytes)

    def to_json(self) -> dict[str, Any]:
        """:returns: Every figure, with `scope` ("run") and the three ratios, as `casstore demo --json` prints it."""
        return {
            "scope": self.scope,
            **asdict(self),
            "dedup_ratio": self.dedup_ratio,
            "compression_ratio": self.compression_ratio,
            "total_ratio": self.total_ratio,
        }


class DemoArgumentError(ValueError):
    """`run_demo` was given a corpus without text files or a namespace the store refuses; nothing was created."""


def text_files(corpus: Path) -> list[str]:
    """
    :returns: The text files under `corpus` the demo agent reads, relative to it, sorted.
    :raises ValueError: If there are none.
    """
    files = sorted(
        str(path.relative_to(corpus))
        for path in corpus.rglob("*")
        if path.is_file() and path.suffix in TEXT_SUFFIXES and "__pycache__" not in path.parts
    )
    if not files:
        suffixes = ", ".join(sorted(TEXT_SUFFIXES))
        raise ValueError(
            f"{corpus} holds no text files for the demo agent to read ({suffixes}); choose another corpus."
        )
    return files


class ScriptedCodingAgent:
    """The demo's model: a seeded, deterministic plan of tool calls that looks like a coding agent's."""

    def __init__(
        self,
        *,
        corpus: Path,
        steps: int,
        read_tool: Tool,
        files: list[str] | None = None,
        seed: int = 7,
        read_backs: bool = True,
    ) -> None:
        """
        :param corpus: The folder being explored.
        :param steps: Tool-calling steps before the final answer.
        :param read_tool: The read-back tool, whose first required parameter takes a reference.
        :param files: `text_files(corpus)`, if the caller has it already.
        :param seed: The plan's random seed.
        :param read_backs: Now and then read back a reference the conversation shows; False re-reads a file instead,
            so that runs under compactors that leave references and compactors that leave none follow one plan.
        """
        self.files = files if files is not None else text_files(corpus)
        self.folders = sorted(
            {str(Path(name).parent) for name in self.files} | {"."}, key=lambda folder: (folder.count("/"), folder)
        )
        self.steps = steps
        self.read_tool_name = read_tool.name
        self.reference_parameter = read_tool.parameters.get("required", ["reference"])[0]
        self.random = random.Random(seed)
        self.read_backs_allowed = read_backs
        self.step = 0
        self.calls = 0
        self.read_backs = 0
        self.seen: list[str] = []
        self.peak_context_tokens = 0
        self.counter = ApproximateTokenCounter()
        self.on_step: Any = None

    def respond(self, messages: list[ChatMessage]) -> ChatMessage:
        """The `response_fn` of `MockChatGenerator`: the next step's tool calls, or the final answer."""
        self.peak_context_tokens = max(self.peak_context_tokens, self.counter.count(messages=messages))
        if self.on_step is not None:
            self.on_step(self, messages)
        if self.step >= self.steps:
            return ChatMessage.from_assistant(f"I explored {len(set(self.seen))} files in {self.steps} steps.")
        calls = self._next_calls(messages)
        self.step += 1
        return ChatMessage.from_assistant(tool_calls=calls)

    def _next_calls(self, messages: list[ChatMessage]) -> list[ToolCall]:
        if self.step == 0:
            return [self._call("list_directory", path=".")]
        choice = self.random.random()
        references = [r for m in messages if m.tool_call_result for r in _REFERENCE_IN_POINTER.findall(m.text or "")]
        references += [
            r for m in messages if m.tool_call_result for r in _REFERENCE_IN_POINTER.findall(_result_text(m))
        ]
        if choice < 0.10 and references and self.read_backs_allowed:
            self.read_backs += 1
            arguments: dict[str, Any] = {self.reference_parameter: self.random.choice(references)}
            if self.random.random() < 0.5:
                arguments["pattern"] = self.random.choice(["def \\w+", "class \\w+", "import"])
            return [self._call(self.read_tool_name, **arguments)]
        if choice < 0.40 and self.seen:
            return [self._call("read_file", path=self.random.choice(self.seen))]
        if choice < 0.55:
            return [self._call("search_text", text=self.random.choice(_SEARCH_WORDS))]
        if choice < 0.65:
            return [self._call("list_directory", path=self.random.choice(self.folders))]
        count = 2 if choice > 0.90 else 1
        return [self._read_next_file() for _ in range(count)]

    def _read_next_file(self) -> ToolCall:
        unseen = [name for name in self.files if name not in self.seen]
        name = unseen[0] if unseen else self.random.choice(self.files)
        self.seen.append(name)
        return self._call("read_file", path=name)

    def _call(self, tool_name: str, **arguments: Any) -> ToolCall:
        self.calls += 1
        return ToolCall(tool_name=tool_name, arguments=arguments, id=f"call_{self.calls}")


def _result_text(message: ChatMessage) -> str:
    result = message.tool_call_result
    return result.result if result is not None and isinstance(result.result, str) else ""


def default_corpus() -> Path:
    """:returns: The installed casstore package's own source folder, which every installation has."""
    return Path(__file__).resolve().parent.parent


def run_demo(
    *,
    root: Path | None = None,
    shared: tuple[str, str] | None = None,
    steps: int | None = None,
    corpus: Path | None = None,
    namespace: str | None = None,
    progress: Any = None,
) -> DemoSummary:
    """
    Run the demo agent and summarize it.

    :param root: The store's folder (created if needed; earlier runs' content is kept and deduplicated against).
    :param shared: Instead of `root`, a shared store's `(index URL, blob URL)`; object-store settings and
        credentials come from the environment.
    :param steps: Tool-calling steps (default `DEFAULT_STEPS`).
    :param corpus: The folder the agent explores (default: the installed package's source).
    :param namespace: The run's namespace (default: `demo-` and the UTC time, so each run is its own).
    :param progress: Called as `progress(agent, messages)` before each model call.
    :returns: The run's summary.
    :raises DemoArgumentError: If `corpus` holds no text files, or `namespace` is not a valid namespace; nothing is
        created then.
    """
    from casstore.compactor import CompactorChain, DedupOffloadCompactor, StepArchiveCompactor, make_read_tool

    corpus = (corpus or default_corpus()).resolve()
    steps = DEFAULT_STEPS if steps is None else steps
    if namespace is None:
        namespace = f"demo-{socket.gethostname()}-" + datetime.now(UTC).strftime("%Y%m%d-%H%M%S-%f")
    try:  # before anything is created: these are the caller's mistakes
        files = text_files(corpus)
        check_namespace(namespace)
    except ValueError as error:
        raise DemoArgumentError(str(error)) from error
    if (root is None) == (shared is None):
        raise DemoArgumentError("Name one store: a folder (root) or a shared store (index and blob URLs).")
    started = time.perf_counter()
    store: RepositoryToolResultStore
    if shared is not None:
        store = SharedToolResultStore(index_url=shared[0], blob_url=shared[1], namespace=namespace)
    else:
        assert root is not None
        store = ContentAddressedToolResultStore(root, namespace=namespace)
    with store:
        disk_before = store.repository.history.disk_bytes()
        before = store.repository.history.mark()  # so the summary counts this run only, even in a namespace used before
        read_tool = make_read_tool(store)
        model = ScriptedCodingAgent(corpus=corpus, steps=steps, read_tool=read_tool, files=files)
        model.on_step = progress
        with warnings.catch_warnings():  # Haystack marks CompactionHook experimental; nothing for a demo user to do
            warnings.simplefilter("ignore", ExperimentalWarning)
            # Offloading shrinks tool results; what still does not fit (the steps' own messages) is archived.
            chain = CompactorChain(
                compactors=[
                    DedupOffloadCompactor(
                        store=store, min_tokens=100, preview_chars=PREVIEW_CHARS, context_window=CONTEXT_WINDOW
                    ),
                    StepArchiveCompactor(store=store, search_tool_name=None, context_window=CONTEXT_WINDOW),
                ]
            )
            hook = CompactionHook(
                compactor=chain,
                context_window=CONTEXT_WINDOW,
                compact_at=0.7,
                compact_to=0.4,
            )
        agent = Agent(
            chat_generator=MockChatGenerator(response_fn=model.respond, meta={"usage": None}),
            tools=[*make_file_tools(corpus), read_tool],
            hooks={"before_llm": [hook]},
            max_agent_steps=steps + 2,
        )
        result = agent.run(messages=[ChatMessage.from_user(f"Explore the project in {corpus.name} and explain it.")])
        figures = store.repository.history.figures_since(namespace=namespace, mark=before)
        writes = store.repository.history.writes_since(namespace=namespace, mark=before)
        filesystem_bytes, filesystem_files = _filesystem_store_cost(store, writes)
        if shared is not None:  # a shared store's footprint is asked of its servers, so while it is open
            disk_after = store.repository.history.disk_bytes()
    if shared is None:  # once closed: a local index's write-ahead log is folded in and removed by then
        disk_after = store.repository.history.disk_bytes()
    where = store.repository.description
    if progress is not None and sys.stderr.isatty():
        sys.stderr.write("\n")
    tool_results = sum(1 for message in result["messages"] if message.tool_call_result is not None)
    return DemoSummary(
        root=where,
        namespace=namespace,
        corpus=str(corpus),
        steps=model.step,
        tool_results=tool_results,
        read_backs=model.read_backs,
        context_window=CONTEXT_WINDOW,
        peak_context_tokens=model.peak_context_tokens,
        disk_bytes_added=disk_after - disk_before,
        store_disk_bytes=disk_after,
        shared=shared is not None,
        filesystem_store_bytes=filesystem_bytes,
        filesystem_store_files=filesystem_files,
        seconds=round(time.perf_counter() - started, 2),
        **figures,
    )


def _filesystem_store_cost(store: RepositoryToolResultStore, writes: list[tuple[str, str]]) -> tuple[int, int]:
    """Write the run's results to Haystack's store, one file per write as its compactor does, and measure them."""
    with tempfile.TemporaryDirectory(prefix="casstore-demo-fs-") as folder:
        baseline = FileSystemToolResultStore(root=folder)
        for number, (key, reference) in enumerate(writes):
            baseline.write(key=f"{number}_{key}", content=store.read(reference))
        return disk_usage(Path(folder)), len(writes)


def print_progress(agent: ScriptedCodingAgent, messages: list[ChatMessage]) -> None:
    """A progress line on stderr: rewritten in place on a terminal, every 20 steps elsewhere."""
    on_terminal = sys.stderr.isatty()
    if not on_terminal and agent.step % 20 != 0:
        return
    offloaded = sum(1 for message in messages if message.meta.get("tool_result_offloaded"))
    sys.stderr.write(
        f"{chr(13) if on_terminal else ''}  step {agent.step}/{agent.steps}  messages {len(messages)}  "
        f"offloaded results {offloaded}  context {agent.counter.count(messages=messages)}/{CONTEXT_WINDOW} tokens"
        f"{'   ' if on_terminal else chr(10)}"
    )
    sys.stderr.flush()


# Set by `python3 dev.py demo` to how the user's shell reaches this casstore (`.venv/bin/casstore`), which is not on
# their PATH; without it the demo works it out (`command_name`).
COMMAND_VARIABLE = "CASSTORE_COMMAND"


def command_name(environ: Mapping[str, str] | None = None) -> str:
    """
    :returns: How to run this installation's `casstore` from the user's shell: `$CASSTORE_COMMAND` if set (dev.py
        sets it), else `casstore` if that is what `PATH` finds, else the console script's own path beside the running
        Python (absolute), else `python -m casstore` with this interpreter.
    """
    environ = os.environ if environ is None else environ
    if environ.get(COMMAND_VARIABLE):
        return environ[COMMAND_VARIABLE]
    script = Path(sys.executable).parent / "casstore"
    on_path = shutil.which("casstore", path=environ.get("PATH"))
    if on_path is not None and script.exists() and Path(on_path).resolve() == script.resolve():
        return "casstore"
    if script.exists():
        return shlex.quote(str(script.absolute()))
    return f"{shlex.quote(sys.executable)} -m casstore"


def _shell_word(text: str) -> str:
    """:returns: `text` as one shell word: in double quotes when that is safe (SQL reads better), else quoted."""
    return f'"{text}"' if not set(text) & set('"$`\\!') else shlex.quote(text)


def print_summary(summary: DemoSummary, *, command: str | None = None, store_flags: str | None = None) -> None:
    """
    Print the run's summary, then commands to explore the store that work in the user's shell.

    :param command: How the user's shell runs `casstore` (default: `command_name()`).
    :param store_flags: For a shared store named by options rather than by the URL variables, those options as
        shell words (`shared_store_flags`), so that the commands printed name the same store.
    """
    command = command_name() if command is None else command
    index = Path(summary.root) / "index.db"
    lines = [
        f"casstore demo: {summary.steps} agent steps over {summary.corpus} in {summary.seconds:.1f} s",
        f"this run, in namespace {summary.namespace} (its own writes and the blobs they reference):",
        f"  tool results           {summary.tool_results} ({summary.read_backs} read back from the store)",
        f"  results offloaded      {summary.results_offloaded} in {summary.compactions} compactions",
        f"  tokens saved           {summary.tokens_saved} (by offloading)",
        f"  steps archived         {summary.steps_archived} in {summary.archives} archives (readable by reference)",
        f"  context peak           {summary.peak_context_tokens} of a {summary.context_window}-token window"
        + (_WITHIN_WINDOW if summary.peak_context_tokens <= summary.context_window else _OVER_WINDOW),
        f"  logical bytes          {format_bytes(summary.logical_bytes)} offloaded",
        f"  unique bytes           {format_bytes(summary.unique_bytes)} (each distinct result once)",
        f"  stored bytes           {format_bytes(summary.stored_bytes)} (compressed)",
        f"  dedup ratio            {format_ratio(summary.dedup_ratio)} (logical / unique bytes)",
        f"  compression            {format_ratio(summary.compression_ratio)} (unique / stored bytes)",
        f"  on disk, added         {format_bytes(summary.disk_bytes_added)}",
        f"  FileSystemToolResultStore would have used {format_bytes(summary.filesystem_store_bytes)} in "
        f"{summary.filesystem_store_files} files",
        "",
    ]
    if not summary.shared and not index.exists():
        lines.append(
            f"Nothing was offloaded, so no store was created in {summary.root} (a store is created by its first "
            f"write): run more steps, such as --steps {DEFAULT_STEPS}, for the compactor to have work."
        )
    elif summary.shared and store_flags:
        lines.append(
            f"The shared store {summary.root} keeps the run: try `{command} stats {store_flags}` and `{command} log "
            f"{store_flags} --namespace {shlex.quote(summary.namespace)}`, or ask its tables in psql."
        )
    elif summary.shared:
        lines.append(
            f"The shared store {summary.root} keeps the run: try `{command} stats` and `{command} log --namespace "
            f"{shlex.quote(summary.namespace)}` with the same CASSTORE_INDEX_URL and CASSTORE_BLOB_URL, or ask its "
            f"tables in psql."
        )
    else:
        root = shlex.quote(summary.root)
        lines += [
            f"The store stays in {summary.root}: {format_bytes(summary.store_disk_bytes)} on disk, every run's (its "
            f"stats count them all; --namespace counts this run's namespace). Explore it with these commands:",
            f"  {command} stats --root {root}",
            f"  {command} stats --root {root} --namespace {shlex.quote(summary.namespace)}",
            f"  {command} log --root {root} --namespace {shlex.quote(summary.namespace)} --limit 5",
            "and its history with sqlite3:",
            *(
                f"  sqlite3 {shlex.quote(str(index))} {_shell_word(query.format(namespace=summary.namespace))}"
                for query in EXPLORE_QUERIES
            ),
        ]
    print("\n".join(lines))


def shared_store_flags(index_url: str, blob_url: str) -> str:
    """:returns: `--index URL --blobs URL` as shell words, for commands that are to open the same shared store."""
    return f"--index {shlex.quote(index_url)} --blobs {shlex.quote(blob_url)}"
