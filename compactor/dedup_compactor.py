"""
`DedupOffloadCompactor`: offloads older tool results to a store and leaves a reference in their place.

It does the job of Haystack's `ToolResultOffloadCompactor`, with the same rules and the same reference text, but with a
content-addressed store underneath it writes only what it replaces, stores identical results once, and records every
offload in the store's history.
"""

import asyncio
from collections.abc import Iterable
from typing import Any

from haystack import logging
from haystack.core.serialization import default_from_dict, default_to_dict
from haystack.dataclasses import ChatMessage
from haystack.hooks.compaction.types import Compactor
from haystack.hooks.tool_result_offloading.types import ToolResultStore
from haystack.token_counters import TokenCounter
from haystack.utils.deserialization import deserialize_component_inplace

from casstore import CompactionRecord
from casstore.compactor.offload_strategies import CASSTORE_TOOL_NAMES, tool_name_list
from casstore.compactor.result_offload import Compaction, ResultOffloader
from casstore.compactor.steps import protected_result_positions
from casstore.compactor.store_protocols import CompactionHistoryStore, HistoryStore, check_store

logger = logging.getLogger(__name__)


class DedupOffloadCompactor(Compactor):
    """
    Offloads older tool results to a `ToolResultStore` and leaves a reference in their place, writing each once.

    A drop-in replacement for Haystack's `ToolResultOffloadCompactor` in a `CompactionHook`:

    ```python
    from haystack.hooks.compaction import CompactionHook

    from casstore import ContentAddressedToolResultStore
    from casstore.compactor import DedupOffloadCompactor, make_read_tool

    store = ContentAddressedToolResultStore("tool_results", namespace="run-42")
    hook = CompactionHook(compactor=DedupOffloadCompactor(store), context_window=128_000)
    # Agent(chat_generator=..., tools=[*my_tools, make_read_tool(store)], hooks={"before_llm": [hook]})
    ```

    Results are offloaded oldest first until the conversation fits the target. Results of the latest `min_keep_steps`
    tool-calling steps, the answers of casstore's read and search tools (what the model asked to see: offloaded, they
    would become one more reference to read), error results, results already offloaded or compacted, empty results,
    small results, and image or file results for a store without binary support stay. The reference text and the
    message meta are what Haystack's compactor writes, so Haystack's hooks and compactors treat the message as
    offloaded.

    With a `ContentAddressedToolResultStore` (any store with `prepare_write` and `write_prepared_many`), each reference
    is known before anything is written, so a result is written only once it is certain to be replaced: a result that
    stays in the conversation leaves nothing in the store, and a result's parts are stored together or not at all.
    Identical results share one blob and one reference, every offload is appended to the store's `offloads` table, and
    every call that found the conversation over its target to its `compactions` table (tokens before and after, the
    target, and the model's window when `context_window` is given).
    With any other store, results are written first and measured after, as Haystack does, but identical parts within
    one `compact` call still share one reference.
    """

    def __init__(
        self,
        store: ToolResultStore,
        *,
        min_keep_steps: int = 1,
        min_tokens: int = 200,
        preview_chars: int = 200,
        context_window: int | None = None,
        keep_tool_names: Iterable[str] = (),
    ) -> None:
        """
        Create the compactor.

        :param store: Where offloaded results are written. Image and file results are only offloaded to a store that
            sets `supports_binary_content`. A result whose write fails stays in the conversation, with a warning.
        :param min_keep_steps: How many of the most recent tool-calling Agent steps keep their results, even when the
            target is missed. At least 1, so the model always sees its latest results.
        :param min_tokens: Only results larger than this many tokens are offloaded.
        :param preview_chars: How many leading characters of each offloaded text the reference quotes. Images and files
            are described by MIME type and size instead.
        :param context_window: The model's context window in tokens (the `CompactionHook`'s `context_window`), for
            the store's `compactions` history and the report's timeline; Haystack does not tell a compactor, so it is
            recorded as NULL unless given here.
        :param keep_tool_names: More tools whose results are never offloaded: the `name` given to `make_read_tool`
            or `make_search_tool` when it is not the default. The default names (`read_offloaded_result`,
            `search_offloaded_results`) are kept either way, as `keep_in_context` keeps them from Haystack's hook.
        :raises TypeError: If `store` has no callable `write` and `read` (a path, None: pass a store), if
            `keep_tool_names` is a single string rather than a collection of names, or a name is not a string.
        :raises ValueError: If `min_keep_steps` is less than 1, `min_tokens` or `preview_chars` is negative, or
            `context_window` is given and not a positive whole number.
        """
        check_store(store, owner="DedupOffloadCompactor")
        if min_keep_steps < 1:
            raise ValueError(
                f"`min_keep_steps` must be at least 1, got {min_keep_steps}. The most recent tool-calling step "
                f"holds results the model may still need."
            )
        if min_tokens < 0:
            raise ValueError(f"`min_tokens` must be at least 0, got {min_tokens}.")
        if preview_chars < 0:
            raise ValueError(f"`preview_chars` must be at least 0, got {preview_chars}.")
        if context_window is not None and (
            isinstance(context_window, bool) or not isinstance(context_window, int) or context_window < 1
        ):
            raise ValueError(
                f"`context_window` must be a positive number of tokens (the CompactionHook's), or None when it is not "
                f"known; got {context_window!r}."
            )
        names = tool_name_list(keep_tool_names, parameter="keep_tool_names")
        self.keep_tool_names = names
        self._kept_tools = frozenset((*CASSTORE_TOOL_NAMES, *names))
        self.store = store
        self.min_keep_steps = min_keep_steps
        self.min_tokens = min_tokens
        self.preview_chars = preview_chars
        self.context_window = context_window

    def compact(
        self, messages: list[ChatMessage], target_tokens: int, token_counter: TokenCounter
    ) -> list[ChatMessage] | None:
        """
        Offload tool results, oldest first, until the conversation fits within `target_tokens`.

        :param messages: The conversation, oldest to newest. It is not changed.
        :param target_tokens: The token count the conversation should fit within.
        :param token_counter: Measures the conversation, each result, and each reference.
        :returns: A new list with older results replaced by references, or None when nothing was offloaded.
        """
        tokens_before = current_tokens = token_counter.count(messages=messages)
        if current_tokens <= target_tokens:
            return None
        protected = protected_result_positions(messages, keep_steps=self.min_keep_steps)
        compaction = Compaction()
        offloader = ResultOffloader(
            store=self.store, kept_tools=self._kept_tools, min_tokens=self.min_tokens, preview_chars=self.preview_chars
        )
        compacted = list(messages)
        changed = False
        for index, message in enumerate(messages):
            if message.tool_call_result is None or index in protected:
                continue
            replacement = offloader.offload(message, token_counter=token_counter, compaction=compaction)
            if replacement is None:
                continue
            compacted[index], saved_tokens = replacement
            current_tokens -= saved_tokens
            changed = True
            if current_tokens <= target_tokens:
                break
        # Measured afresh rather than summed from each result's saving, so the history holds what the model will see.
        self._record_history(
            compaction,
            CompactionRecord(
                tokens_before=tokens_before,
                tokens_after=token_counter.count(messages=compacted) if changed else tokens_before,
                target_tokens=target_tokens,
                context_window=self.context_window,
            ),
        )
        return compacted if changed else None

    async def compact_async(
        self, messages: list[ChatMessage], target_tokens: int, token_counter: TokenCounter
    ) -> list[ChatMessage] | None:
        """
        Run `compact` in a worker thread, so store writes and token counting do not block the event loop.

        :param messages: The conversation, oldest to newest. It is not changed.
        :param target_tokens: The token count the conversation should fit within.
        :param token_counter: Measures the conversation, each result, and each reference.
        :returns: A new list with older results replaced by references, or None when nothing was offloaded.
        """
        return await asyncio.to_thread(self.compact, messages, target_tokens, token_counter)

    def _record_history(self, compaction: Compaction, record: CompactionRecord) -> None:
        """Append one `compact` call (and its offloads) to the store's history, if it keeps one."""
        try:
            if isinstance(self.store, CompactionHistoryStore):
                self.store.record_compaction(
                    compaction_id=compaction.compaction_id, compaction=record, offloads=compaction.offloads
                )
            elif compaction.offloads and isinstance(self.store, HistoryStore):
                self.store.record_offloads(compaction_id=compaction.compaction_id, offloads=compaction.offloads)
        except Exception as error:
            # The results are stored and referenced; only the history row is missing, so the run goes on.
            what = f"Offloaded {len(compaction.offloads)} tool results to" if compaction.offloads else "Compacted with"
            logger.warning(
                "{what} {store}, but could not record the compaction in its history. Error: {error}",
                what=what,
                store=type(self.store).__name__,
                error=error,
            )

    def to_dict(self) -> dict[str, Any]:
        """
        Serialize the compactor, including its store.

        :returns: A dictionary for Haystack's serialization.
        """
        return default_to_dict(
            self,
            store=self.store.to_dict(),
            min_keep_steps=self.min_keep_steps,
            min_tokens=self.min_tokens,
            preview_chars=self.preview_chars,
            context_window=self.context_window,
            keep_tool_names=self.keep_tool_names,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "DedupOffloadCompactor":
        """
        Rebuild the compactor and its store from what `to_dict` produced.

        The store's class must be importable under Haystack's deserialization allowlist: for casstore's store, the
        application opts in, for example with `HAYSTACK_DESERIALIZATION_ALLOWLIST=casstore`.

        :param data: A dictionary produced by `to_dict`. It is not changed.
        :returns: The compactor.
        :raises DeserializationError: If the store's class cannot be imported or is not on the allowlist.
        """
        init_parameters = dict(data.get("init_parameters", {}))
        if init_parameters.get("store") is not None:
            deserialize_component_inplace(init_parameters, key="store")
        return default_from_dict(cls, {**data, "init_parameters": init_parameters})

    def __repr__(self) -> str:
        return (
            f"DedupOffloadCompactor(store={self.store!r}, min_keep_steps={self.min_keep_steps}, "
            f"min_tokens={self.min_tokens}, preview_chars={self.preview_chars}, context_window={self.context_window}, "
            f"keep_tool_names={self.keep_tool_names!r})"
        )
