"""
What a user must put on Haystack's deserialization allowlist for casstore, as docs/store.md says: `casstore`, and
nothing of casstore's besides.

An Agent with casstore's read tool, Haystack's `ToolResultOffloadHook` over a casstore store and a `CompactionHook`
with `DedupOffloadCompactor`, inside a Pipeline, is serialized here and loaded in a fresh interpreter (the allowlist
that `allow_deserialization_module` widens cannot be narrowed again within a process) by each of Haystack's three
ways of opting in, with only `casstore` allowed; and refused with less.
"""

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from haystack import Pipeline
from haystack.components.agents import Agent
from haystack.components.generators.chat import MockChatGenerator
from haystack.hooks.compaction import CompactionHook
from haystack.hooks.tool_result_offloading import AlwaysOffload, ToolResultOffloadHook

from casstore import ContentAddressedToolResultStore, SharedToolResultStore
from casstore.compactor import DedupOffloadCompactor, keep_in_context, make_read_tool

STORE_PAGE = Path(__file__).resolve().parents[2] / "docs" / "store.md"
SECTION = "## Serialization and Haystack's deserialization allowlist"

# Loads pipeline.yaml the way argv[1] says, with the modules argv[2:] allowed, then uses what it loaded.
LOADER = """
import os
import sys
from pathlib import Path

from haystack import Pipeline
from haystack.core.errors import DeserializationError

way, allowed = sys.argv[1], sys.argv[2:]
text = Path("pipeline.yaml").read_text()
try:
    if way == "call":
        pipeline = Pipeline.loads(text, allowed_modules=allowed)
    elif way == "process":
        exec(Path("opt_in.py").read_text())  # the docs' own example
        pipeline = Pipeline.loads(text)
    else:
        assert way == "environment" and os.environ["HAYSTACK_DESERIALIZATION_ALLOWLIST"] == ",".join(allowed)
        pipeline = Pipeline.loads(text)
except DeserializationError as error:
    print("refused:", error)
    raise SystemExit(0)
agent = pipeline.get_component("agent")
read_tool = next(tool for tool in agent.tools if tool.name == "read_offloaded_result")
[offload] = agent.hooks["after_tool"]
[compaction] = agent.hooks["before_llm"]
print(type(read_tool).__name__, type(offload.store).__name__, type(compaction.compactor).__name__)
print(read_tool.invoke(reference=Path("reference.txt").read_text(), offset=2, limit=1))
for store in (read_tool.store, offload.store, compaction.compactor.store):
    store.close()
"""


def _section() -> str:
    page = STORE_PAGE.read_text(encoding="utf-8")
    return page.split(SECTION, 1)[1].split("\n## ", 1)[0]


def _types(data: Any) -> Iterator[str]:
    """Every class the serialized data names: `type` fields, and the functions of tools (`function`)."""
    if isinstance(data, dict):
        for key, value in data.items():
            # A dotted name: JSON schemas of tool parameters hold `"type": "object"` too.
            if key in ("type", "function") and isinstance(value, str) and "." in value:
                yield value
            else:
                yield from _types(value)
    elif isinstance(data, list):
        for item in data:
            yield from _types(item)


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder holding a store with one result, a pipeline.yaml that uses it, and a user's own tool module."""
    (tmp_path / "myapp_tools.py").write_text(
        "from haystack.tools import tool\n\n\n"
        "@tool\ndef run_tests() -> str:\n"
        '    """Run the test suite."""\n'
        '    return "ok"\n'
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    from myapp_tools import run_tests  # type: ignore[import-not-found]  # the module written just above

    store = ContentAddressedToolResultStore(tmp_path / "tool_results", namespace="served")
    (tmp_path / "reference.txt").write_text(store.write(key="log.txt", content="first\nsecond\nthird\n"))
    agent = Agent(
        chat_generator=MockChatGenerator(),
        tools=[run_tests, make_read_tool(store)],
        hooks={
            "before_llm": [CompactionHook(compactor=DedupOffloadCompactor(store), context_window=8_000)],
            "after_tool": [
                ToolResultOffloadHook(store=store, offload_strategies=keep_in_context({"*": AlwaysOffload()}))
            ],
        },
    )
    pipeline = Pipeline()
    pipeline.add_component("agent", agent)
    (tmp_path / "pipeline.yaml").write_text(pipeline.dumps())
    (tmp_path / "pipeline.json").write_text(json.dumps(pipeline.to_dict()))
    store.close()
    (tmp_path / "loader.py").write_text(LOADER)
    return tmp_path


def _load(folder: Path, way: str, allowed: list[str]) -> str:
    env = {key: value for key, value in os.environ.items() if not key.startswith("HAYSTACK_")}
    if way == "environment":
        env["HAYSTACK_DESERIALIZATION_ALLOWLIST"] = ",".join(allowed)
    if way == "process":
        (folder / "opt_in.py").write_text(
            "from haystack.core.serialization_security import allow_deserialization_module\n\n"
            + "".join(f"allow_deserialization_module({module!r})\n" for module in allowed)
        )
    completed = subprocess.run(
        [sys.executable, "loader.py", way, *allowed],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    return completed.stdout


def test_the_documented_types_are_exactly_what_casstore_serializes(folder: Path) -> None:
    named = set(_types(json.loads((folder / "pipeline.json").read_text())))
    casstore_types = {name for name in named if name.startswith("casstore.")}
    # The table's "its `type` in the data" column.
    rows = [line.split("|") for line in _section().splitlines() if line.startswith("| ")]
    documented = {cells[2].strip().strip("`") for cells in rows if cells[2].strip().startswith("`casstore.")}
    shared = f"{SharedToolResultStore.__module__}.{SharedToolResultStore.__qualname__}"
    assert documented == casstore_types | {shared}
    # Everything else the data names is Haystack's (always allowed) or the user's own tool.
    assert {name for name in named - casstore_types if not name.startswith("haystack.")} == {"myapp_tools.run_tests"}


@pytest.mark.parametrize("way", ["call", "process", "environment"])
def test_casstore_and_the_users_own_tools_are_all_a_pipeline_needs(folder: Path, way: str) -> None:
    printed = _load(folder, way, ["casstore", "myapp_tools"])
    assert printed.splitlines()[0] == "ReadOffloadedResultTool ContentAddressedToolResultStore DedupOffloadCompactor"
    assert "second" in printed and "first" not in printed and "third" not in printed


def test_the_docs_own_opt_in_example_is_what_the_process_way_runs(folder: Path) -> None:
    """The store page's example, as written, with the user's tool module allowed beside it."""
    (example,) = re.findall(r"```python\n(.*?)```", _section(), flags=re.DOTALL)
    assert 'allow_deserialization_module("casstore")' in example
    env = {key: value for key, value in os.environ.items() if not key.startswith("HAYSTACK_")}
    env["HAYSTACK_DESERIALIZATION_ALLOWLIST"] = "myapp_tools"
    (folder / "opt_in.py").write_text(example)
    completed = subprocess.run(
        [sys.executable, "loader.py", "process"],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.startswith("ReadOffloadedResultTool ContentAddressedToolResultStore"), completed.stdout


@pytest.mark.parametrize(
    ("allowed", "refused_module"),
    [
        (["myapp_tools"], "casstore."),  # nothing of casstore's
        (
            ["casstore.compactor", "myapp_tools"],
            "casstore.stores.local",
        ),  # the compactor package alone: its store is not
        (["compactor", "myapp_tools"], "casstore."),  # the package's old top-level name
        (["casstore"], "myapp_tools"),  # the user's own tool still needs its module allowed
    ],
)
@pytest.mark.parametrize("way", ["call", "environment"])
def test_less_is_refused_and_the_refusal_names_the_module(
    folder: Path, way: str, allowed: list[str], refused_module: str
) -> None:
    printed = _load(folder, way, allowed)
    assert printed.startswith("refused:"), printed
    assert f"'{refused_module}" in printed, printed
