"""
Every compactor and tool refuses, when it is made, a store without Haystack's `ToolResultStore` methods (a path, None,
anything else), with a `TypeError` that says what to pass; any object with callable `write` and `read` is accepted.
"""

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from haystack.hooks.tool_result_offloading import FileSystemToolResultStore
from hypothesis import given
from hypothesis import strategies as st

from casstore import ContentAddressedToolResultStore
from casstore.compactor import DedupOffloadCompactor, StepArchiveCompactor, make_read_tool, make_search_tool
from casstore.compactor.read_tool import ReadOffloadedResultTool
from casstore.compactor.search_tool import SearchOffloadedResultsTool

MAKERS: dict[str, Callable[[Any], object]] = {
    "DedupOffloadCompactor": DedupOffloadCompactor,
    "StepArchiveCompactor": lambda store: StepArchiveCompactor(store=store),
    "make_read_tool": make_read_tool,
    "make_search_tool": make_search_tool,
    "ReadOffloadedResultTool": lambda store: ReadOffloadedResultTool(store=store),
    "SearchOffloadedResultsTool": lambda store: SearchOffloadedResultsTool(store=store),
}
# The tools' classes are made by their factories, whose names the messages use.
NAMED = {"ReadOffloadedResultTool": "make_read_tool", "SearchOffloadedResultsTool": "make_search_tool"}


class _WriteOnly:
    def write(self, *, key: str, content: str | bytes) -> str:
        return key


class _ReadIsNotCallable:
    read = "not a method"

    def write(self, *, key: str, content: str | bytes) -> str:
        return key


class _DuckStore:
    """A store that only has what Haystack's protocol asks for."""

    def __init__(self) -> None:
        self.held: dict[str, str | bytes] = {}

    def write(self, *, key: str, content: str | bytes) -> str:
        self.held[key] = content
        return key

    def read(self, reference: str) -> str | bytes:
        return self.held[reference]


not_a_store = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.text(max_size=30),
    st.binary(max_size=30),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
    st.builds(Path, st.text(min_size=1, max_size=20)),
    st.sampled_from([_WriteOnly(), _ReadIsNotCallable(), object(), ContentAddressedToolResultStore, _DuckStore]),
)


@pytest.mark.parametrize("maker", sorted(MAKERS))
@given(value=not_a_store)
def test_anything_without_write_and_read_is_refused_with_what_to_pass(maker: str, value: object) -> None:
    with pytest.raises(TypeError, match=re.escape(f"{NAMED.get(maker, maker)} needs a ToolResultStore")) as raised:
        MAKERS[maker](value)
    assert "pass a store" in str(raised.value)
    assert re.search(r"such as \w+\(", str(raised.value))


@pytest.mark.parametrize("maker", sorted(MAKERS))
@pytest.mark.parametrize("path", ["tool_results", Path("tool_results"), b"tool_results"])
def test_a_path_is_refused_with_the_store_to_open_on_it(maker: str, path: object) -> None:
    with pytest.raises(TypeError) as raised:
        MAKERS[maker](path)
    message = str(raised.value)
    assert "got the path 'tool_results'" in message
    assert "ContentAddressedToolResultStore('tool_results'), not a path" in message


@pytest.mark.parametrize("maker", sorted(MAKERS))
def test_the_message_names_the_missing_method(maker: str) -> None:
    with pytest.raises(TypeError, match=r"got a _WriteOnly, which has no callable `read`:"):
        MAKERS[maker](_WriteOnly())
    with pytest.raises(TypeError, match=r"got a _ReadIsNotCallable, which has no callable `read`:"):
        MAKERS[maker](_ReadIsNotCallable())
    with pytest.raises(TypeError, match=r"got None, which has no callable `write` or `read`:"):
        MAKERS[maker](None)


@pytest.mark.parametrize("maker", sorted(MAKERS))
def test_any_store_with_write_and_read_is_accepted(
    maker: str, tmp_path: Path, store: ContentAddressedToolResultStore
) -> None:
    for accepted in (store, FileSystemToolResultStore(tmp_path / "fs"), _DuckStore()):
        made = MAKERS[maker](accepted)
        assert made.store is accepted  # type: ignore[attr-defined]


def test_a_duck_typed_store_is_written_to_and_read_back() -> None:
    duck = _DuckStore()
    reference = duck.write(key="1_run_call_1.txt", content="line\n" * 3)
    assert make_read_tool(duck).invoke(reference=reference) == "line\n" * 3  # type: ignore[arg-type]
