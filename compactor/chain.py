"""
`CompactorChain`: several compactors as one, for Haystack's `CompactionHook`, which takes a single compactor.
"""

import copy
from collections.abc import Sequence
from typing import Any

from haystack.core.serialization import component_to_dict, default_to_dict
from haystack.dataclasses import ChatMessage
from haystack.hooks.compaction.types import Compactor
from haystack.token_counters import TokenCounter
from haystack.utils.deserialization import deserialize_component_inplace


class CompactorChain(Compactor):
    """
    Runs compactors in order, each on the previous one's output, until the conversation fits the target.

    The recommended setup offloads large tool results first and archives whole steps only when that is not enough:

    ```python
    from haystack.hooks.compaction import CompactionHook

    from casstore import ContentAddressedToolResultStore
    from casstore.compactor import CompactorChain, DedupOffloadCompactor, StepArchiveCompactor

    store = ContentAddressedToolResultStore("tool_results", namespace="run-42")
    chain = CompactorChain(compactors=[DedupOffloadCompactor(store=store), StepArchiveCompactor(store=store)])
    hook = CompactionHook(compactor=chain, context_window=128_000)
    ```

    A compactor that returns None leaves the conversation to the next one, and so does one that returns a conversation
    no smaller than it was given (Haystack's contract asks for None then); the chain stops as soon as the conversation
    is at or under the target, and returns None only when no compactor made it smaller.
    """

    def __init__(self, *, compactors: Sequence[Compactor] | Any) -> None:
        """
        :param compactors: The compactors, in the order they run.
        :raises ValueError: If `compactors` is empty.
        :raises TypeError: If `compactors` is not a sequence, or one of them is a class rather than a compactor made
            from it, or has no `compact` method.
        """
        if isinstance(compactors, (str, bytes)) or not isinstance(compactors, Sequence):
            raise TypeError(f"`compactors` must be a list of compactors, got {type(compactors).__name__}.")
        if not compactors:
            raise ValueError(
                "`compactors` is empty: give at least one compactor, such as "
                "[DedupOffloadCompactor(store=store), StepArchiveCompactor(store=store)]."
            )
        for compactor in compactors:
            if isinstance(compactor, type):
                # The class's `compact` is callable too, but calling it mid-run fails for want of an instance.
                raise TypeError(
                    f"Every entry of `compactors` must be a compactor object, got the class {compactor.__name__}: "
                    f"pass a compactor made from it, such as {compactor.__name__}(...)."
                )
            if not callable(getattr(compactor, "compact", None)):
                raise TypeError(
                    f"Every entry of `compactors` must be a compactor object (with a `compact` method), got "
                    f"{compactor!r:.80}: pass one such as StepArchiveCompactor(store=store)."
                )
        self.compactors = list(compactors)

    def compact(
        self, messages: list[ChatMessage], target_tokens: int, token_counter: TokenCounter
    ) -> list[ChatMessage] | None:
        """
        Run each compactor on the previous one's result until the conversation fits `target_tokens`.

        :param messages: The conversation, oldest to newest. It is not changed.
        :param target_tokens: The size the conversation should come in under.
        :param token_counter: Measures the conversation; handed to every compactor.
        :returns: The last compacted conversation, or None when no compactor made it smaller.
        """
        run = _Run(messages, token_counter)
        for compactor in self.compactors:
            if run.tokens <= target_tokens:
                break
            run.take(compactor.compact(run.conversation, target_tokens, token_counter))
        return run.result

    async def compact_async(
        self, messages: list[ChatMessage], target_tokens: int, token_counter: TokenCounter
    ) -> list[ChatMessage] | None:
        """
        As `compact`, awaiting each compactor's `compact_async`.

        :param messages: The conversation, oldest to newest. It is not changed.
        :param target_tokens: The size the conversation should come in under.
        :param token_counter: Measures the conversation; handed to every compactor.
        :returns: The last compacted conversation, or None when no compactor made it smaller.
        """
        run = _Run(messages, token_counter)
        for compactor in self.compactors:
            if run.tokens <= target_tokens:
                break
            run.take(await compactor.compact_async(run.conversation, target_tokens, token_counter))
        return run.result

    def warm_up(self) -> None:
        """Warm up every compactor that has something to warm up."""
        for compactor in self.compactors:
            if hasattr(compactor, "warm_up"):
                compactor.warm_up()

    def close(self) -> None:
        """Release every compactor's resources that has any (the stores are the caller's to close)."""
        for compactor in self.compactors:
            if hasattr(compactor, "close"):
                compactor.close()

    def to_dict(self) -> dict[str, Any]:
        """
        Serialize the chain with every compactor.

        :returns: A dictionary for Haystack's serialization.
        """
        return default_to_dict(
            self, compactors=[component_to_dict(obj=compactor, name="compactor") for compactor in self.compactors]
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "CompactorChain":
        """
        Rebuild the chain and its compactors from what `to_dict` produced.

        :param data: A dictionary produced by `to_dict`. It is not changed.
        :returns: The chain.
        :raises DeserializationError: If a compactor's class cannot be imported or is not on Haystack's
            deserialization allowlist.
        """
        compactors = []
        # A deep copy: a compactor's own `from_dict` may change the dictionary it is given.
        for entry in copy.deepcopy(data).get("init_parameters", {}).get("compactors", []):
            holder = {"compactor": entry}
            deserialize_component_inplace(holder, key="compactor")
            compactors.append(holder["compactor"])
        return cls(compactors=compactors)

    def __repr__(self) -> str:
        return f"CompactorChain(compactors={self.compactors!r})"


class _Run:
    """The conversation as the chain's compactors have made it so far, and its size."""

    def __init__(self, messages: list[ChatMessage], token_counter: TokenCounter) -> None:
        self.conversation = messages
        self.tokens = token_counter.count(messages=messages)
        self.result: list[ChatMessage] | None = None
        self._counter = token_counter

    def take(self, compacted: list[ChatMessage] | None) -> None:
        """Go on from `compacted` if it is smaller than the conversation so far; otherwise leave it."""
        if compacted is None:
            return
        tokens = self._counter.count(messages=compacted)
        if tokens < self.tokens:
            self.conversation, self.tokens, self.result = compacted, tokens, compacted
