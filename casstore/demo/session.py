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
from haystack.dataclasses import ChatMessage
from haystack.hooks.compaction import CompactionHook
from haystack.hooks.tool_result_offloading import FileSystemToolResultStore
from haystack.utils.experimental import ExperimentalWarning

from casstore.demo.agent import ScriptedCodingAgent, default_corpus, text_files
from casstore.demo.store_checks import counting_failed_writes, unwritable_reason
from casstore.demo.tools import make_file_tools
from casstore.disk import disk_usage
from casstore.history.figures import format_bytes, format_ratio, ratio
from casstore.namespaces import check_namespace
from casstore.stores.local import ContentAddressedToolResultStore, RepositoryToolResultStore
from casstore.stores.shared import SharedToolResultStore

DEFAULT_STEPS = 80
CONTEXT_WINDOW = 16_000
PREVIEW_CHARS = 120
_WITHIN_WINDOW = " (within it at every step)"
_OVER_WINDOW = " (over it: the newest step alone outgrew the window, and compaction always keeps it)"
_OVER_WINDOW_FAILED = " (over it: the store failed writes, so their results stayed in the conversation)"
# Printed after a run, for a person to paste.
EXPLORE_QUERIES = (
    "SELECT * FROM dedup_summary",
    "SELECT tool_name, offloads, saved_tokens FROM offload_summary WHERE namespace = '{namespace}'",
    "SELECT times_written, size, example_key FROM repeated_results ORDER BY bytes_deduplicated DESC LIMIT 5",
)


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
    # Attempts to write that the store failed during the run (a full disk, say), and the first one's error: the
    # compactors go on without them (and try a result again at the next step), so the figures count what it took.
    failed_write_attempts: int = 0
    first_failure: str | None = None

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
    """
    `run_demo` was given a corpus without text files, a namespace the store refuses, or a store it cannot write;
    nothing was created.
    """


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
    :raises DemoArgumentError: If `corpus` holds no text files, `namespace` is not a valid namespace, or the store
        cannot be written (a read-only folder or store, or a file for `root`); nothing is created then.
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
        reason = unwritable_reason(root)
        if reason is not None:
            raise DemoArgumentError(reason)
        store = ContentAddressedToolResultStore(root, namespace=namespace)
    if store.repository.read_only:  # an existing store on read-only media, or one this process may not write
        refusal = store.repository.read_only_error("the demo cannot write its run into it")
        store.close()
        raise DemoArgumentError(f"{refusal} Or run the demo in another folder with --root.")
    with store, counting_failed_writes() as failed:
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
        agent.run(messages=[ChatMessage.from_user(f"Explore the project in {corpus.name} and explain it.")])
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
    return DemoSummary(
        root=where,
        namespace=namespace,
        corpus=str(corpus),
        steps=model.step,
        tool_results=model.calls,  # every call got its result, whether it is still in the conversation or not
        read_backs=model.read_backs,
        context_window=CONTEXT_WINDOW,
        peak_context_tokens=model.peak_context_tokens,
        disk_bytes_added=disk_after - disk_before,
        store_disk_bytes=disk_after,
        shared=shared is not None,
        filesystem_store_bytes=filesystem_bytes,
        filesystem_store_files=filesystem_files,
        seconds=round(time.perf_counter() - started, 2),
        failed_write_attempts=failed.count,
        first_failure=failed.first,
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
        + _window_note(summary),
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
    if summary.failed_write_attempts:  # what the store holds is not the run: no commands to explore it
        lines.append(failure_message(summary))
    elif not summary.shared and not index.exists():
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


def _window_note(summary: DemoSummary) -> str:
    if summary.peak_context_tokens <= summary.context_window:
        return _WITHIN_WINDOW
    return _OVER_WINDOW_FAILED if summary.failed_write_attempts else _OVER_WINDOW


def failure_message(summary: DemoSummary) -> str:
    """:returns: What a run whose writes failed says of it: how many failed, the first error, and what to do."""
    return (
        f"Offloading failed: the store at {summary.root} failed {summary.failed_write_attempts} attempts to write (a "
        f"result it did not take stays in the conversation and is tried again at the next step), and the figures above "
        f"count only what it took. The first error: {summary.first_failure or 'not known'} Then run the demo again."
    )


def shared_store_flags(index_url: str, blob_url: str) -> str:
    """:returns: `--index URL --blobs URL` as shell words, for commands that are to open the same shared store."""
    return f"--index {shlex.quote(index_url)} --blobs {shlex.quote(blob_url)}"
