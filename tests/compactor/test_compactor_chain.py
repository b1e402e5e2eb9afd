"""
`CompactorChain`: its compactors run in order, each on the previous one's output, until the conversation fits; it is
one `Compactor` for Haystack's hook, serializable and async like the others.
"""

import asyncio
from typing import Any

import pytest
from haystack.dataclasses import ChatMessage
from haystack.hooks.compaction import CompactionHook, SlidingWindowCompactor
from haystack.token_counters import TokenCounter

from casstore import ContentAddressedToolResultStore
from casstore.compactor import CompactorChain, DedupOffloadCompactor, StepArchiveCompactor
from tests.compactor_helpers import PayloadCounter, tool_call, tool_result, zoo_conversation

COUNTER = PayloadCounter()


class Recording:
    """A compactor that records the conversations it was given and hands back a fixed answer."""

    def __init__(self, answer: list[ChatMessage] | None) -> None:
        self.answer = answer
        self.seen: list[list[ChatMessage]] = []

    def compact(self, messages: list[ChatMessage], target: int, counter: TokenCounter) -> list[ChatMessage] | None:
        self.seen.append(messages)
        return self.answer

    async def compact_async(
        self, messages: list[ChatMessage], target: int, counter: TokenCounter
    ) -> list[ChatMessage] | None:
        return self.compact(messages, target, counter)

    def to_dict(self) -> dict[str, Any]:
        return {"type": "tests.compactor.test_compactor_chain.Recording", "init_parameters": {"answer": None}}


def test_each_compactor_gets_the_previous_ones_output_until_it_fits() -> None:
    messages = zoo_conversation()
    smaller = messages[:-4] + messages[-3:]
    tiny = [messages[0], messages[5]]
    first, declines, second, never = Recording(smaller), Recording(None), Recording(tiny), Recording(None)
    chain = CompactorChain(compactors=[first, declines, second, never])

    assert chain.compact(messages, COUNTER.count(tiny), COUNTER) == tiny
    assert first.seen == [messages] and declines.seen == [smaller] and second.seen == [smaller]
    assert never.seen == []  # the conversation fit: the chain stopped


def test_it_returns_none_when_nothing_changed_or_it_already_fits() -> None:
    messages = zoo_conversation()
    declining = Recording(None)
    assert CompactorChain(compactors=[declining, Recording(None)]).compact(messages, 0, COUNTER) is None
    fits = Recording(messages[:2])
    assert CompactorChain(compactors=[fits]).compact(messages, COUNTER.count(messages), COUNTER) is None
    assert fits.seen == []


def test_async_runs_the_same_chain() -> None:
    messages = zoo_conversation()
    tiny = [messages[0], messages[5]]
    first, second = Recording(None), Recording(tiny)
    chain = CompactorChain(compactors=[first, second])
    assert asyncio.run(chain.compact_async(messages, 10, COUNTER)) == tiny
    assert first.seen == second.seen == [messages]


def test_offloading_comes_first_and_archiving_only_when_it_is_not_enough(
    store: ContentAddressedToolResultStore,
) -> None:
    steps = [m for n in range(8) for m in (tool_call(f"c{n}"), tool_result("result text " * 80, call_id=f"c{n}"))]
    messages = [ChatMessage.from_user("Task."), *steps]
    chain = CompactorChain(
        compactors=[DedupOffloadCompactor(store=store, min_tokens=10), StepArchiveCompactor(store=store)]
    )
    # A target offloading reaches: nothing archived.
    offloaded = chain.compact(messages, COUNTER.count(messages) // 2, COUNTER)
    assert offloaded is not None and len(offloaded) == len(messages)
    assert not any("context_compaction" in message.meta and message.is_from("user") for message in offloaded)
    # A target only archiving reaches.
    archived = chain.compact(messages, 60, COUNTER)
    assert archived is not None and archived[1].meta["context_compaction"]["strategy"] == "step_archive"
    assert archived[2:] == messages[-2:]


@pytest.mark.parametrize("compactors", [[], ()])
def test_an_empty_chain_is_refused(compactors: Any) -> None:
    with pytest.raises(ValueError, match="`compactors` is empty"):
        CompactorChain(compactors=compactors)


@pytest.mark.parametrize("compactors", [SlidingWindowCompactor(), "sliding", [object()]])
def test_anything_but_a_list_of_compactors_is_refused(compactors: Any) -> None:
    with pytest.raises(TypeError, match="compactors"):
        CompactorChain(compactors=compactors)


@pytest.mark.parametrize("cls", [StepArchiveCompactor, DedupOffloadCompactor, SlidingWindowCompactor])
def test_a_compactor_class_is_refused_when_the_chain_is_made(cls: type) -> None:
    # Among compactor objects too: the class's `compact` is callable, but would fail only once a run calls it.
    for compactors in ([cls], [SlidingWindowCompactor(), cls]):
        with pytest.raises(TypeError, match=f"got the class {cls.__name__}: pass a compactor made from it"):
            CompactorChain(compactors=compactors)


def test_it_serializes_inside_haystacks_hook(
    store: ContentAddressedToolResultStore, allow_casstore_deserialization: None
) -> None:
    chain = CompactorChain(
        compactors=[DedupOffloadCompactor(store=store), StepArchiveCompactor(store=store), SlidingWindowCompactor()]
    )
    hook = CompactionHook(compactor=chain, context_window=8_000)
    rebuilt = CompactionHook.from_dict(hook.to_dict())

    assert isinstance(rebuilt.compactor, CompactorChain)
    assert [type(compactor) for compactor in rebuilt.compactor.compactors] == [
        DedupOffloadCompactor,
        StepArchiveCompactor,
        SlidingWindowCompactor,
    ]
    assert rebuilt.to_dict() == hook.to_dict()
    for compactor in rebuilt.compactor.compactors[:2]:
        compactor.store.close()
