"""
`StepArchiveCompactor` refuses, when it is made, settings it could not work with: a summarizer that is not a chat
generator object, and tool names or an instruction that are not non-empty strings. The message names the argument,
what it got and what it takes, so the run never starts with a compactor that warns at every compaction or tells the
model to read its archives with a tool that does not exist.
"""

import re
from pathlib import Path
from typing import Any

import pytest
from haystack.components.generators.chat import MockChatGenerator
from haystack.hooks.tool_result_offloading import FileSystemToolResultStore

from casstore.compactor import StepArchiveCompactor


@pytest.fixture
def files(tmp_path: Path) -> FileSystemToolResultStore:
    return FileSystemToolResultStore(root=str(tmp_path))


@pytest.mark.parametrize(
    ("value", "got"),
    [
        ("gpt-4o-mini", "the str 'gpt-4o-mini'"),
        (42, "the int 42"),
        ({"type": "haystack.components.generators.chat.openai.OpenAIChatGenerator"}, "the dict {'type'"),
        (MockChatGenerator, "the class MockChatGenerator"),
    ],
)
def test_a_summarizer_that_is_no_chat_generator_object_is_refused(
    files: FileSystemToolResultStore, value: Any, got: str
) -> None:
    with pytest.raises(TypeError) as refused:
        StepArchiveCompactor(store=files, summarizer=value)
    message = str(refused.value)
    assert message.startswith("`summarizer` must be a Haystack chat generator") and got in message
    assert "or None" in message or "pass a generator made from it" in message


@pytest.mark.parametrize("argument", ["read_tool_name", "search_tool_name", "summary_instruction"])
@pytest.mark.parametrize(("value", "got"), [(5, "the int 5"), (b"read", "the bytes b'read'"), (["x"], "the list")])
def test_a_tool_name_or_instruction_that_is_no_string_is_refused(
    files: FileSystemToolResultStore, argument: str, value: Any, got: str
) -> None:
    with pytest.raises(TypeError, match=re.escape(f"`{argument}` must be a non-empty string")) as refused:
        StepArchiveCompactor(store=files, **{argument: value})
    assert f"; got {got}" in str(refused.value)


@pytest.mark.parametrize("argument", ["read_tool_name", "summary_instruction"])
def test_a_read_tool_name_or_instruction_of_none_is_refused(files: FileSystemToolResultStore, argument: str) -> None:
    # Only the search tool may be absent (search_tool_name=None); the read tool and the instruction may not.
    with pytest.raises(TypeError, match=re.escape(f"`{argument}` must be a non-empty string")) as refused:
        StepArchiveCompactor(store=files, **{argument: None})  # type: ignore[arg-type]
    assert str(refused.value).endswith("; got None.")


@pytest.mark.parametrize("argument", ["read_tool_name", "search_tool_name", "summary_instruction"])
@pytest.mark.parametrize("value", ["", "   "])
def test_an_empty_tool_name_or_instruction_is_refused(
    files: FileSystemToolResultStore, argument: str, value: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(f"`{argument}` must be a non-empty string")):
        StepArchiveCompactor(store=files, **{argument: value})  # type: ignore[arg-type]


def test_a_chat_generator_and_string_names_are_taken(files: FileSystemToolResultStore) -> None:
    summarizer = MockChatGenerator()
    compactor = StepArchiveCompactor(
        store=files,
        summarizer=summarizer,
        summary_instruction="Summarize.",
        read_tool_name="fetch_result",
        search_tool_name=None,
    )
    assert (compactor.summarizer, compactor.read_tool_name, compactor.search_tool_name) == (
        summarizer,
        "fetch_result",
        None,
    )
