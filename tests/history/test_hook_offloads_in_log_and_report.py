"""
What Haystack's `ToolResultOffloadHook` offloads shows in `casstore log` and in the report, beside the compactor's
offloads, with the tool names and call ids its keys carry: real `Agent` runs (`MockChatGenerator` playing the model)
on a local store and on a shared one (real PostgreSQL and SeaweedFS).
"""

import base64
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from haystack.components.agents import Agent
from haystack.components.generators.chat import MockChatGenerator
from haystack.dataclasses import ChatMessage, FileContent, ToolCall
from haystack.hooks.tool_result_offloading import AlwaysOffload, ToolResultOffloadHook
from haystack.tools.from_function import create_tool_from_function, tool
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from casstore import ContentAddressedToolResultStore, SharedToolResultStore
from casstore.cli import cli
from casstore.history.report import build_report
from casstore.history.stats import count_offloads, offload_log
from casstore.index.writes import OffloadRecord
from casstore.stores.local import RepositoryToolResultStore
from tests.servers import S3Location
from tests.store_backends import make_backend

pytestmark = pytest.mark.filterwarnings("ignore::haystack.utils.experimental.ExperimentalWarning")

SALES = "region,units\n" + "".join(f"region {number},{number * 7}\n" for number in range(40))
# The calls the model makes, step by step: OpenAI's ids, a call without one, Anthropic's ids; `make_call` ends in
# `_call`, so with Anthropic's id its key reads two ways (tool `make` with id `call_toolu_...` and part 2).
STEPS = [
    [
        ToolCall(tool_name="read_file", arguments={"path": "a.py"}, id="call_Ab12"),
        ToolCall(tool_name="read_file", arguments={"path": "b.py"}),
    ],
    [
        ToolCall(tool_name="export_sales", arguments={}, id="toolu_01Xy"),
        ToolCall(tool_name="make_call", arguments={"number": "5"}, id="toolu_2"),
    ],
]


@tool
def read_file(path: str) -> str:
    """Read a file."""
    return f"the contents of {path}\n" * 50


@tool
def make_call(number: str) -> str:
    """Call a number."""
    return f"called {number}\n" * 50


def export_sales() -> list[FileContent]:
    """Export the sales table as two CSV files."""
    data = base64.b64encode(SALES.encode()).decode()
    return [
        FileContent(base64_data=data, mime_type="text/csv", filename="north.csv"),
        FileContent(base64_data=data, mime_type="text/csv", filename="south.csv"),
    ]


def _model(messages: list[ChatMessage]) -> ChatMessage:
    made = sum(1 for message in messages if message.tool_calls)
    if made < len(STEPS):
        return ChatMessage.from_assistant(tool_calls=STEPS[made])
    return ChatMessage.from_assistant("Done.")


def _run_agent(store: RepositoryToolResultStore) -> None:
    export = create_tool_from_function(export_sales, outputs_to_string={"raw_result": True})
    hook = ToolResultOffloadHook(store=store, offload_strategies={"*": AlwaysOffload()})
    agent = Agent(
        chat_generator=MockChatGenerator(response_fn=_model, meta={"usage": None}),
        tools=[read_file, export, make_call],
        hooks={"after_tool": [hook]},
        max_agent_steps=5,
    )
    agent.warm_up()
    assert agent.run(messages=[ChatMessage.from_user("Go.")])["last_message"].text == "Done."


@pytest.fixture(params=["local", "shared"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[RepositoryToolResultStore, list[str]]]:
    """A store the agent ran on (and a compactor recorded one offload in), and the flags naming it to the command."""
    store: RepositoryToolResultStore
    if request.param == "local":
        store = ContentAddressedToolResultStore(tmp_path / "store", namespace="agent")
        flags = ["--root", str(tmp_path / "store")]
    else:
        postgres_url: str = request.getfixturevalue("postgres_url")
        s3: S3Location = request.getfixturevalue("s3_bucket_url")  # sets the credentials in the environment
        store = SharedToolResultStore(
            index_url=postgres_url, blob_url=s3.url, blob_options=s3.options, namespace="agent"
        )
        flags = ["--index", postgres_url, "--blobs", s3.url]
    with store:
        _run_agent(store)
        reference = store.write(key="compacted_search_call_9.txt", content="search results\n" * 40)
        store.record_offloads(compaction_id="c1", offloads=[OffloadRecord("search", "call_9", [reference], 120, 100)])
        yield store, flags


def _log(flags: list[str], *arguments: str) -> Result:
    result = CliRunner().invoke(cli, ["log", *flags, *arguments], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


def test_log_shows_the_hooks_offloads_with_their_tools_and_call_ids(
    location: tuple[RepositoryToolResultStore, list[str]],
) -> None:
    _, flags = location
    entries = json.loads(_log(flags, "--json").stdout)
    assert [(entry["source"], entry["tool_name"], entry["tool_call_id"], entry["part"]) for entry in entries] == [
        ("compactor", "search", "call_9", None),
        ("hook", None, None, None),  # make_call with Anthropic's id: its key reads two ways, so no tool is named
        ("hook", "export_sales", "toolu_01Xy", 1),
        ("hook", "export_sales", "toolu_01Xy", 0),
        ("hook", "read_file", None, None),  # a call without an id: the hook's `call1` is no id
        ("hook", "read_file", "call_Ab12", None),
    ]
    hooked = [entry for entry in entries if entry["source"] == "hook"]
    assert all(
        (entry["original_tokens"], entry["saved_tokens"], entry["compaction_id"]) == (None, None, None)
        for entry in hooked
    )
    assert [entry["key"].partition("_")[2] for entry in hooked] == [
        "make_call_toolu_2.txt",
        "export_sales_toolu_01Xy_1.csv",
        "export_sales_toolu_01Xy_0.csv",
        "read_file_call1.txt",
        "read_file_call_Ab12.txt",
    ]

    lines = _log(flags).stdout.splitlines()
    assert [line.split("  ")[2:-1] for line in lines] == [
        ["search", "call=call_9", "saved 100/120 tokens"],
        [f"key={hooked[0]['key'].removesuffix('.txt')}", "call=?", "hook, tokens -"],  # which call: unknown
        ["export_sales", "call=toolu_01Xy", "part=1", "hook, tokens -"],
        ["export_sales", "call=toolu_01Xy", "part=0", "hook, tokens -"],
        ["read_file", "call=-", "hook, tokens -"],
        ["read_file", "call=call_Ab12", "hook, tokens -"],
    ]
    assert [line.split("  ")[-1] for line in lines] == [" ".join(entry["references"]) for entry in entries]


def test_log_filters_the_hooks_offloads_as_the_compactors(
    location: tuple[RepositoryToolResultStore, list[str]],
) -> None:
    _, flags = location
    read = json.loads(_log(flags, "--tool", "read_file", "--json").stdout)
    assert [(entry["tool_name"], entry["tool_call_id"]) for entry in read] == [
        ("read_file", None),
        ("read_file", "call_Ab12"),
    ]
    assert json.loads(_log(flags, "--tool", "read", "--json").stdout) == []  # no key names `read` for certain
    assert len(json.loads(_log(flags, "--namespace", "agent", "--since", "1h", "--json").stdout)) == 6
    cut = _log(flags, "--limit", "2")
    assert len(cut.stdout.splitlines()) == 2
    assert cut.stderr == "4 more lines match: raise --limit to see them\n"


def test_the_report_counts_the_hooks_offloads_per_tool(location: tuple[RepositoryToolResultStore, list[str]]) -> None:
    store, _ = location
    page, figures = build_report(store)
    assert [(tool.tool_name, tool.results, tool.parts) for tool in figures.hook_tools] == [
        ("read_file", 2, 2),
        ("export_sales", 1, 2),
        (None, 1, 1),
    ]
    hook_section = page.split('<section id="hook">', 1)[1].split("</section>", 1)[0]
    assert "<td>read_file</td>" in hook_section and "<td>export_sales</td>" in hook_section
    assert "<dt>offloaded by the hook</dt><dd>4</dd>" in page


# Tool names with the characters SQL's LIKE treats apart (`%`, `_`, an escape character, `\`) and case; no word of
# them begins a call id, so each key reads one way.
NAMES = ["a%b", "a_b", "axb", "a!b", "a\\b", "A_B", "a", "b"]


def _filtered(store: RepositoryToolResultStore, names: list[str]) -> None:
    for step, name in enumerate(names):
        store.write(key=f"{step}_{name}_call_{step}x.txt", content=f"result of {name}\n")
    for name in set(names):
        entries = offload_log(store, tool=name)
        assert [entry.tool_name for entry in entries] == [name] * names.count(name), name
        assert count_offloads(store, tool=name) == names.count(name)


@pytest.mark.parametrize("backend", ["local", "shared"])
def test_the_tool_filter_selects_the_tool_named_exactly(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    opened = make_backend(backend, request, tmp_path)
    try:
        _filtered(opened.open(namespace="agent"), NAMES)
    finally:
        opened.close()


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(names=st.lists(st.text(alphabet="ab%_!\\A.-", min_size=1, max_size=6), min_size=1, max_size=8))
def test_the_tool_filter_selects_any_tool_named_exactly(
    tmp_path_factory: pytest.TempPathFactory, names: list[str]
) -> None:
    with ContentAddressedToolResultStore(tmp_path_factory.mktemp("store"), namespace="agent") as store:
        _filtered(store, names)
