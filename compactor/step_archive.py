"""
`StepArchiveCompactor`: removes old steps as Haystack's `SlidingWindowCompactor` does, but archives them in the store
first, so the note left in their place says where they went and the model can read them back.
"""

import asyncio
import copy
from collections.abc import Callable
from typing import Any
from uuid import uuid4

from haystack import logging
from haystack.core.serialization import component_to_dict, default_from_dict, default_to_dict
from haystack.dataclasses import ChatMessage
from haystack.hooks.compaction.types import Compactor
from haystack.hooks.tool_result_offloading.types import ToolResultStore
from haystack.token_counters import TokenCounter
from haystack.utils.deserialization import deserialize_component_inplace

from casstore import ArchiveRecord, CompactionRecord
from casstore.compactor.archive_note import (
    DEFAULT_SUMMARY_INSTRUCTION,
    STRATEGY,
    ArchivedSpan,
    archive_note,
    summary_of,
)
from casstore.compactor.archive_settings import check_settings
from casstore.compactor.archive_writer import PendingTranscript, prepare_transcript, store_transcript
from casstore.compactor.read_tool import DEFAULT_NAME as READ_TOOL_NAME
from casstore.compactor.search_tool import DEFAULT_NAME as SEARCH_TOOL_NAME
from casstore.compactor.store_protocols import ArchiveHistoryStore, CompactionHistoryStore, check_store
from casstore.compactor.window_split import is_note, split_window

logger = logging.getLogger(__name__)


class StepArchiveCompactor(Compactor):
    """
    Archives the steps a sliding window gives up in a store, and leaves a note that names the archive.

    ```python
    from haystack.hooks.compaction import CompactionHook

    from casstore import ContentAddressedToolResultStore
    from casstore.compactor import CompactorChain, DedupOffloadCompactor, StepArchiveCompactor, make_read_tool

    store = ContentAddressedToolResultStore("tool_results", namespace="run-42")
    chain = CompactorChain(compactors=[DedupOffloadCompactor(store=store), StepArchiveCompactor(store=store)])
    hook = CompactionHook(compactor=chain, context_window=128_000)
    # Agent(chat_generator=..., tools=[*my_tools, make_read_tool(store)], hooks={"before_llm": [hook]})
    ```

    What leaves the conversation is chosen exactly as `SlidingWindowCompactor` chooses it: leading system messages
    and the latest user message stay, earlier turns go before steps of the current task, the current task goes in
    whole steps (an assistant message and the tool results after it), and the `min_keep_steps` newest steps always
    stay. The removed messages are written to the store as one Markdown transcript (a result another compactor
    offloaded appears as its reference; images and files are stored beside it), and a user message with
    Haystack's `context_compaction` meta takes their place: `Steps 1-40 (83 messages) were archived to '<reference>';
    read them with read_offloaded_result, or find something in them with search_offloaded_results.` A later archive
    takes the earlier note into its transcript, so one note stands and every archive is reachable from it.

    With a `summarizer`, the note also carries a chat generator's summary of the archived steps. A store that
    cannot write leaves the conversation as it is, with a warning: no note ever names an archive that is not there.
    """

    def __init__(
        self,
        *,
        store: ToolResultStore,
        min_keep_steps: int = 1,
        summarizer: Any = None,
        summary_instruction: str = DEFAULT_SUMMARY_INSTRUCTION,
        read_tool_name: str = READ_TOOL_NAME,
        search_tool_name: str | None = SEARCH_TOOL_NAME,
        context_window: int | None = None,
    ) -> None:
        """
        Create the compactor.

        :param store: Where transcripts are written; the model's read tool reads them from there.
        :param min_keep_steps: The newest steps of the current task kept even over the target. `0` lets every step go.
        :param summarizer: A Haystack chat generator (anything with `run(messages=...)` returning `replies`) whose
            summary of the archived steps the note carries; None for a note without one. A summarizer that fails or
            returns nothing leaves a note without a summary.
        :param summary_instruction: The system prompt for the summarizer.
        :param read_tool_name: The read tool's name as registered with the Agent, which the note tells the model.
        :param search_tool_name: The search tool's name as registered, or None when the Agent has no search tool.
        :param context_window: The model's window in tokens, for the store's `compactions` history; None records NULL.
        :raises TypeError: If `store` has no callable `write` and `read` (a path, None: pass a store); if `summarizer`
            is neither None nor a chat generator object (one with a callable `run`; a model's name or a class is
            refused); or if `summary_instruction`, `read_tool_name` or `search_tool_name` (unless None) is not a
            string. The message names the argument, what it got and what it takes.
        :raises ValueError: If `min_keep_steps` is negative or not whole, `summary_instruction` or a tool name is
            empty, or `context_window` is given and not a positive whole number.
        """
        check_store(store, owner="StepArchiveCompactor")
        check_settings(
            min_keep_steps=min_keep_steps,
            summarizer=summarizer,
            summary_instruction=summary_instruction,
            read_tool_name=read_tool_name,
            search_tool_name=search_tool_name,
            context_window=context_window,
        )
        self.store = store
        self.min_keep_steps = min_keep_steps
        self.summarizer = summarizer
        self.summary_instruction = summary_instruction
        self.read_tool_name = read_tool_name
        self.search_tool_name = search_tool_name
        self.context_window = context_window

    def compact(
        self, messages: list[ChatMessage], target_tokens: int, token_counter: TokenCounter
    ) -> list[ChatMessage] | None:
        """
        Archive the oldest turns and steps until the rest fits `target_tokens`, and leave a note in their place.

        :param messages: The conversation, oldest to newest. It is not changed.
        :param target_tokens: The size the kept conversation should come in under.
        :param token_counter: Measures the conversation, its turns and its steps.
        :returns: The kept messages with the note where the archived ones were, or None when nothing was archived
            (the conversation fits, nothing but an earlier note could go, the note would leave the conversation no
            smaller than it was, or the store could not write).
        """
        tokens_before = token_counter.count(messages=messages)
        if tokens_before <= target_tokens:
            return None
        split = split_window(
            messages,
            target_tokens=target_tokens,
            token_counter=token_counter,
            min_keep_steps=self.min_keep_steps,
            strategy=STRATEGY,
        )
        # Swapping a note for a new one frees nothing: decline, rather than rewrite the conversation every step.
        if all(is_note(message, strategy=STRATEGY) for message in split.removed):
            return None
        span = ArchivedSpan.of(split.removed)
        pending = self._prepare(split.removed, span)
        if pending is None:
            return None
        compaction_id = uuid4().hex
        keeps_history = isinstance(self.store, (ArchiveHistoryStore, CompactionHistoryStore))

        def with_note(summary: str | None) -> list[ChatMessage]:
            note = archive_note(
                span,
                reference=pending.references[0],
                kept_messages=len(split.kept),
                read_tool_name=self.read_tool_name,
                search_tool_name=self.search_tool_name,
                summary=summary,
                compaction_id=compaction_id if keeps_history else None,
            )
            return [*split.kept[: split.note_index], note, *split.kept[split.note_index :]]

        # Haystack's contract: None unless the conversation gets smaller. The note is measured before anything is
        # stored (on a store that can tell references first), so a step smaller than its note is never archived.
        compacted = with_note(None)
        tokens_after = token_counter.count(messages=compacted)
        if tokens_after >= tokens_before:
            return None
        if self.summarizer is not None:
            summarized = self._summarized(with_note, pending.text, token_counter, tokens_before)
            if summarized is not None:
                compacted, tokens_after = summarized
        if not self._store(pending, count=len(split.removed)):
            return None
        self._record_history(
            compaction_id,
            CompactionRecord(
                tokens_before=tokens_before,
                tokens_after=tokens_after,
                target_tokens=target_tokens,
                context_window=self.context_window,
            ),
            ArchiveRecord(
                references=pending.references,
                messages=len(split.removed),
                first_step=span.first_step,
                last_step=span.last_step,
                original_tokens=token_counter.count(messages=split.removed),
                saved_tokens=tokens_before - tokens_after,
            ),
        )
        return compacted

    async def compact_async(
        self, messages: list[ChatMessage], target_tokens: int, token_counter: TokenCounter
    ) -> list[ChatMessage] | None:
        """
        Run `compact` in a worker thread, so the store's writes and the summarizer do not block the event loop.

        :param messages: The conversation, oldest to newest. It is not changed.
        :param target_tokens: The size the kept conversation should come in under.
        :param token_counter: Measures the conversation, its turns and its steps.
        :returns: As `compact`.
        """
        return await asyncio.to_thread(self.compact, messages, target_tokens, token_counter)

    def _summarized(
        self,
        with_note: Callable[[str | None], list[ChatMessage]],
        transcript: str,
        token_counter: TokenCounter,
        tokens_before: int,
    ) -> tuple[list[ChatMessage], int] | None:
        """
        :returns: The conversation with a note that carries the summarizer's summary, and its tokens; or None when
            there is no summary, or it would leave the conversation no smaller than it was (the note then goes
            without one).
        """
        summary = summary_of(self.summarizer, self.summary_instruction, transcript)
        if summary is None:
            return None
        summarized = with_note(summary)
        tokens = token_counter.count(messages=summarized)
        if tokens < tokens_before:
            return summarized, tokens
        logger.warning(
            "The summary of the archived messages is longer than what archiving them frees, so the archive's note "
            "carries no summary; ask for a shorter one with `summary_instruction`."
        )
        return None

    def _prepare(self, removed: list[ChatMessage], span: ArchivedSpan) -> PendingTranscript | None:
        """:returns: The transcript of `removed`, not yet stored on a casstore store, or None (with a warning)."""
        try:
            return prepare_transcript(self.store, removed, heading=span.heading)
        except Exception as error:
            self._not_archived(len(removed), error)
            return None

    def _store(self, pending: PendingTranscript, *, count: int) -> bool:
        """:returns: Whether the transcript and its attachments are stored (all or none), with a warning if not."""
        try:
            store_transcript(self.store, pending)
        except Exception as error:
            self._not_archived(count, error)
            return False
        return True

    def _not_archived(self, count: int, error: Exception) -> None:
        logger.warning(
            "Could not archive {count} messages to {store}, so they stay in the conversation (over its target) "
            "and no note names an archive. Error: {error}",
            count=count,
            store=type(self.store).__name__,
            error=error,
        )

    def _record_history(self, compaction_id: str, compaction: CompactionRecord, archive: ArchiveRecord) -> None:
        """Append the archive to the store's history, if it keeps one; a failure only costs the history row."""
        try:
            if isinstance(self.store, ArchiveHistoryStore):
                self.store.record_archive(compaction_id=compaction_id, compaction=compaction, archive=archive)
            elif isinstance(self.store, CompactionHistoryStore):
                self.store.record_compaction(compaction_id=compaction_id, compaction=compaction, offloads=[])
        except Exception as error:
            logger.warning(
                "Archived {count} messages to {store}, but could not record the archive in its history. Error: {error}",
                count=archive.messages,
                store=type(self.store).__name__,
                error=error,
            )

    def warm_up(self) -> None:
        """Warm up the summarizer, if it has anything to warm up."""
        if self.summarizer is not None and hasattr(self.summarizer, "warm_up"):
            self.summarizer.warm_up()

    def to_dict(self) -> dict[str, Any]:
        """
        Serialize the compactor, its store and its summarizer.

        :returns: A dictionary for Haystack's serialization.
        """
        return default_to_dict(
            self,
            store=self.store.to_dict(),
            min_keep_steps=self.min_keep_steps,
            summarizer=component_to_dict(obj=self.summarizer, name="summarizer") if self.summarizer else None,
            summary_instruction=self.summary_instruction,
            read_tool_name=self.read_tool_name,
            search_tool_name=self.search_tool_name,
            context_window=self.context_window,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "StepArchiveCompactor":
        """
        Rebuild the compactor, its store and its summarizer from what `to_dict` produced.

        :param data: A dictionary produced by `to_dict`. It is not changed.
        :returns: The compactor.
        :raises DeserializationError: If a class cannot be imported or is not on Haystack's deserialization allowlist
            (for casstore's store, the application opts in, for example with `HAYSTACK_DESERIALIZATION_ALLOWLIST`).
        """
        # A deep copy: the store's or the summarizer's own `from_dict` may change the dictionary it is given.
        data = copy.deepcopy(data)
        init_parameters = data.get("init_parameters", {})
        for key in ("store", "summarizer"):
            if init_parameters.get(key) is not None:
                deserialize_component_inplace(init_parameters, key=key)
        return default_from_dict(cls, data)

    def __repr__(self) -> str:
        return (
            f"StepArchiveCompactor(store={self.store!r}, min_keep_steps={self.min_keep_steps}, "
            f"summarizer={self.summarizer!r}, read_tool_name={self.read_tool_name!r}, "
            f"search_tool_name={self.search_tool_name!r}, context_window={self.context_window})"
        )
