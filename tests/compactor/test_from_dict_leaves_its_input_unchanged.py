"""
`StepArchiveCompactor.from_dict` and `CompactorChain.from_dict` leave the dictionary they are given as it was, even
when a component inside rebuilds itself by changing its own dictionary (Haystack's `MockChatGenerator` does), so the
same dictionary loads twice.
"""

import copy
from collections.abc import Callable
from typing import Any

import pytest
from haystack.components.generators.chat import MockChatGenerator
from haystack.dataclasses import ChatMessage

from casstore import ContentAddressedToolResultStore
from casstore.compactor import CompactorChain, DedupOffloadCompactor, StepArchiveCompactor


def _archive(store: ContentAddressedToolResultStore) -> StepArchiveCompactor:
    summarizer = MockChatGenerator(responses=[ChatMessage.from_assistant("a summary")])
    return StepArchiveCompactor(store=store, summarizer=summarizer)


def _chain(store: ContentAddressedToolResultStore) -> CompactorChain:
    return CompactorChain(compactors=[DedupOffloadCompactor(store=store), _archive(store)])


def _stores(compactor: Any) -> list[Any]:
    members = compactor.compactors if isinstance(compactor, CompactorChain) else [compactor]
    return [member.store for member in members]


@pytest.mark.parametrize("make", [_archive, _chain], ids=["StepArchiveCompactor", "CompactorChain"])
def test_the_same_dictionary_loads_twice_and_stays_as_it_was(
    store: ContentAddressedToolResultStore,
    allow_casstore_deserialization: None,
    make: Callable[[ContentAddressedToolResultStore], Any],
) -> None:
    compactor = make(store)
    data = compactor.to_dict()
    as_written = copy.deepcopy(data)

    first = type(compactor).from_dict(data)
    assert data == as_written
    second = type(compactor).from_dict(data)
    assert data == as_written
    assert first.to_dict() == second.to_dict() == as_written
    for rebuilt in (first, second):
        for opened in _stores(rebuilt):
            opened.close()
