"""
`make_search_tool(read_tool_name=...)`: the description and every answer send the model to the read tool under the
name it is registered with, the default name stays as it was, and the setting survives serialization.
"""

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from haystack.hooks.tool_result_offloading import FileSystemToolResultStore

from casstore import ContentAddressedToolResultStore
from casstore.compactor import make_read_tool, make_search_tool
from casstore.compactor.read_tool import DEFAULT_NAME as READ_TOOL_NAME
from casstore.compactor.search_tool import SearchOffloadedResultsTool

CUSTOM = "fetch_archive"
SOURCE = "import os\n\nclass ToolResultStore:\n    def write(self, *, key, content):\n        raise KeyError(key)\n"


@pytest.fixture
def indexed(store_root: Path) -> Iterator[ContentAddressedToolResultStore]:
    with ContentAddressedToolResultStore(store_root, namespace="alice", search_index=True) as opened:
        yield opened


def test_the_description_names_the_read_tool_as_registered(indexed: ContentAddressedToolResultStore) -> None:
    tool = make_search_tool(indexed, read_tool_name=CUSTOM)
    assert f"read one further with {CUSTOM}(reference, offset=LINE)" in tool.description
    assert READ_TOOL_NAME not in tool.description
    assert READ_TOOL_NAME not in json.dumps(tool.tool_spec)


def test_an_answer_names_the_read_tool_as_registered_and_that_tool_reads_the_hit(
    indexed: ContentAddressedToolResultStore,
) -> None:
    reference = indexed.write(key="compacted_read_file_0123456789abcdef.txt", content=SOURCE)
    answer = make_search_tool(indexed, read_tool_name=CUSTOM).invoke(query="raise KeyError")
    assert f"1. '{reference}' " in answer
    assert answer.endswith(f"Read one with {CUSTOM}(reference, offset=LINE).")
    assert READ_TOOL_NAME not in answer
    # The tool the answer names, registered under that name, reads the line the answer numbered.
    line = re.search(r"^   (\d+): +raise KeyError\(key\)$", answer, flags=re.MULTILINE)
    assert line, answer
    read = make_read_tool(indexed, name=CUSTOM)
    assert read.name == CUSTOM
    assert "raise KeyError(key)" in read.invoke(reference=reference, offset=int(line.group(1)), limit=1)


def test_an_answer_that_lists_some_of_many_results_names_the_read_tool_as_registered(
    indexed: ContentAddressedToolResultStore,
) -> None:
    for number in range(5):
        indexed.write(key=f"{number}.txt", content=f"shared marker {number}\n")
    answer = make_search_tool(indexed, read_tool_name=CUSTOM, max_hits=2).invoke(query="marker")
    assert "3 more results hold a term" in answer
    assert f"Read one with {CUSTOM}(reference, offset=LINE)." in answer and READ_TOOL_NAME not in answer


def test_stores_that_cannot_be_searched_point_to_the_read_tool_as_registered(
    store: ContentAddressedToolResultStore, tmp_path: Path
) -> None:
    store.write(key="a.txt", content=SOURCE)
    unindexed = make_search_tool(store, read_tool_name=CUSTOM).invoke(query="KeyError")
    assert unindexed.startswith("This store has no search index") and f"with {CUSTOM}." in unindexed
    foreign = make_search_tool(FileSystemToolResultStore(tmp_path), read_tool_name=CUSTOM).invoke(query="KeyError")
    assert foreign.startswith("Error: this agent's store") and foreign.endswith(f"with {CUSTOM}.")
    assert READ_TOOL_NAME not in unindexed + foreign


def test_by_default_the_read_tool_is_named_by_its_default_name(indexed: ContentAddressedToolResultStore) -> None:
    indexed.write(key="a.txt", content=SOURCE)
    tool = make_search_tool(indexed)
    assert f"read one further with {READ_TOOL_NAME}(reference, offset=LINE)" in tool.description
    answer = tool.invoke(query="KeyError")
    assert answer.endswith(f"Read one with {READ_TOOL_NAME}(reference, offset=LINE).")


def test_the_read_tool_name_round_trips_through_serialization(
    indexed: ContentAddressedToolResultStore, allow_casstore_deserialization: None
) -> None:
    data = json.loads(json.dumps(make_search_tool(indexed, read_tool_name=CUSTOM).to_dict()))
    assert data["data"]["read_tool_name"] == CUSTOM
    restored = SearchOffloadedResultsTool.from_dict(data)
    assert isinstance(restored.store, ContentAddressedToolResultStore)
    try:
        assert restored.to_dict() == data
        assert f"with {CUSTOM}(reference" in restored.description and READ_TOOL_NAME not in restored.description
    finally:
        restored.store.close()


def test_a_tool_serialized_without_a_read_tool_name_loads_with_the_default(
    indexed: ContentAddressedToolResultStore, allow_casstore_deserialization: None
) -> None:
    data = json.loads(json.dumps(make_search_tool(indexed, name="find_again").to_dict()))
    del data["data"]["read_tool_name"]
    restored = SearchOffloadedResultsTool.from_dict(data)
    assert isinstance(restored.store, ContentAddressedToolResultStore)
    try:
        assert restored.name == "find_again"
        assert restored.to_dict()["data"]["read_tool_name"] == READ_TOOL_NAME
        assert f"with {READ_TOOL_NAME}(reference" in restored.description
    finally:
        restored.store.close()


@pytest.mark.parametrize("bad", ["", "has space", "x" * 65, "read.tool", None, 42])
def test_a_read_tool_name_that_is_no_tool_name_is_refused(
    indexed: ContentAddressedToolResultStore, bad: object
) -> None:
    with pytest.raises(ValueError, match=re.escape("`read_tool_name` must be the name the read tool is registered")):
        make_search_tool(indexed, read_tool_name=bad)  # type: ignore[arg-type]
