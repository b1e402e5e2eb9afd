"""
Offloading one tool result: measure it, learn or write its references, and build the message that replaces it.

`DedupOffloadCompactor` runs a `ResultOffloader` over the results it chooses. With a store that prepares writes
(casstore's), each reference is known before anything is written, so a result is written only once it is certain to
be replaced, and all its parts together; with any other store the parts are written first and measured after, as
Haystack does, each distinct part once per `compact` call.
"""

from dataclasses import dataclass, field
from typing import Any
from uuid import uuid4

from haystack import logging
from haystack.dataclasses import ChatMessage
from haystack.hooks.tool_result_offloading.types import ToolResultStore
from haystack.token_counters import TokenCounter

from casstore import OffloadRecord
from casstore.compactor.parts import Part, key_part, result_parts
from casstore.compactor.pointers import (
    COMPACTION_META_KEY,
    COMPACTION_STRATEGY,
    OFFLOADED_META_KEY,
    content_blocks,
    describe_block,
    is_empty,
    is_text_only,
    offloaded_message,
    pointer_text,
)
from casstore.compactor.store_protocols import HistoryStore, PreparingStore

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Marks:
    """What an offloaded message's meta records: Haystack's marker, and casstore's own entry when there is one."""

    original_tokens: int
    # The `compact` call's id, with a store that keeps an offload history (`offloads.compaction_id`).
    compaction_id: str | None

    @property
    def compaction(self) -> dict[str, Any]:
        """Haystack's `context_compaction` marker, exactly as its `ToolResultOffloadCompactor` writes it."""
        return {"strategy": COMPACTION_STRATEGY, "original_tokens": self.original_tokens}

    @property
    def casstore(self) -> dict[str, Any] | None:
        """casstore's entries, under `meta["casstore"]`; None when there are none."""
        return {"compaction_id": self.compaction_id} if self.compaction_id is not None else None


@dataclass
class Compaction:
    """What one `compact` call has done so far."""

    compaction_id: str = field(default_factory=lambda: uuid4().hex)
    # For a store without prepared writes: the reference each distinct part was written under in this call.
    references: dict[tuple[bool, str, str | bytes], str] = field(default_factory=dict)
    offloads: list[OffloadRecord] = field(default_factory=list)


class ResultOffloader:
    """Replaces one tool result at a time by its references, when that is allowed and saves tokens."""

    def __init__(
        self, *, store: ToolResultStore, kept_tools: frozenset[str], min_tokens: int, preview_chars: int
    ) -> None:
        """
        :param store: Where the results go.
        :param kept_tools: Tools whose results always stay.
        :param min_tokens: Only results larger than this many tokens are offloaded.
        :param preview_chars: How many leading characters of each offloaded text the reference quotes.
        """
        self._store = store
        self._kept_tools = kept_tools
        self._min_tokens = min_tokens
        self._preview_chars = preview_chars

    def offload(
        self, message: ChatMessage, *, token_counter: TokenCounter, compaction: "Compaction"
    ) -> tuple[ChatMessage, int] | None:
        """
        Replace one tool result by its references, if that is allowed and saves tokens.

        :returns: The offloaded message and the tokens it saves, or None when the result stays.
        """
        result = message.tool_call_result
        # Errors, casstore's own tools' answers, results another compactor rewrote, and references stay.
        if (
            result is None
            or result.error
            or result.origin.tool_name in self._kept_tools
            or message.meta.get(OFFLOADED_META_KEY)
            or COMPACTION_META_KEY in message.meta
        ):
            return None
        original_tokens = token_counter.count(messages=[message])
        if original_tokens <= self._min_tokens:
            return None
        blocks = content_blocks(result)
        if is_empty(blocks):
            return None
        if not getattr(self._store, "supports_binary_content", False) and not is_text_only(blocks):
            logger.warning(
                "Tool '{tool}' produced a result with image or file content, but {store} does not support binary "
                "content; leaving the result in context.",
                tool=result.origin.tool_name,
                store=type(self._store).__name__,
            )
            return None
        marks = Marks(
            original_tokens=original_tokens,
            compaction_id=compaction.compaction_id if isinstance(self._store, HistoryStore) else None,
        )
        preparing = isinstance(self._store, PreparingStore)
        # A content-addressed key is only recorded, so it names the call. Other stores get a random part, which keeps
        # keys unique across runs sharing the store, with or without a tool call id.
        key_id = key_part(result.origin.id or uuid4().hex) if preparing else uuid4().hex
        try:
            parts = result_parts(result, blocks, key_id=key_id)
        except Exception as error:  # such as an image whose base64 payload does not decode
            _warn_failed_write(message, self._store, error)
            return None
        if isinstance(self._store, PreparingStore):
            offloaded = self._offload_prepared(message, parts, self._store, marks, token_counter)
        else:
            offloaded = self._offload_written(message, parts, compaction, marks, token_counter)
        if offloaded is None:
            return None
        message_out, references, saved_tokens = offloaded
        compaction.offloads.append(
            OffloadRecord(
                tool_name=result.origin.tool_name,
                tool_call_id=result.origin.id,
                references=references,
                original_tokens=original_tokens,
                saved_tokens=saved_tokens,
            )
        )
        return message_out, saved_tokens

    def _offload_prepared(
        self,
        message: ChatMessage,
        parts: list[Part],
        store: PreparingStore,
        marks: Marks,
        token_counter: TokenCounter,
    ) -> tuple[ChatMessage, list[str], int] | None:
        """
        Learn the references without writing, measure the offloaded message, and write only if it saves tokens.

        :returns: The offloaded message, its references and the tokens it saves, or None when the result stays.
        """
        try:
            writes = [store.prepare_write(key=part.key, content=part.payload) for part in parts]
        except Exception as error:
            _warn_failed_write(message, self._store, error)
            return None
        references = [write.reference for write in writes]
        offloaded = self._offloaded(message, parts, references, marks)
        saved_tokens = marks.original_tokens - token_counter.count(messages=[offloaded])
        # A reference can cost more than a small result; then nothing is written at all.
        if saved_tokens <= 0:
            return None
        try:
            store.write_prepared_many(writes)  # all parts or none
        except Exception as error:
            _warn_failed_write(message, self._store, error)
            return None
        return offloaded, references, saved_tokens

    def _offload_written(
        self,
        message: ChatMessage,
        parts: list[Part],
        compaction: "Compaction",
        marks: Marks,
        token_counter: TokenCounter,
    ) -> tuple[ChatMessage, list[str], int] | None:
        """
        Write the parts (each distinct part once per `compact` call), then measure the offloaded message.

        :returns: The offloaded message, its references and the tokens it saves, or None when the result stays.
        """
        references: list[str] = []
        try:
            for part in parts:
                reference = compaction.references.get(part.identity)
                if reference is None:
                    reference = self._store.write(key=part.key, content=part.payload)
                    compaction.references[part.identity] = reference
                references.append(reference)
        except Exception as error:
            _warn_failed_write(message, self._store, error)
            return None
        offloaded = self._offloaded(message, parts, references, marks)
        saved_tokens = marks.original_tokens - token_counter.count(messages=[offloaded])
        # As in Haystack, a store that cannot tell a reference in advance keeps an entry that turned out unused.
        return (offloaded, references, saved_tokens) if saved_tokens > 0 else None

    def _offloaded(self, message: ChatMessage, parts: list[Part], references: list[str], marks: Marks) -> ChatMessage:
        descriptions = [
            describe_block(part.block, payload=part.payload, reference=reference, preview_chars=self._preview_chars)
            for part, reference in zip(parts, references, strict=True)
        ]
        return offloaded_message(
            message,
            pointer=pointer_text(descriptions),
            references=references,
            compaction=marks.compaction,
            casstore=marks.casstore,
        )


def _warn_failed_write(message: ChatMessage, store: ToolResultStore, error: Exception) -> None:
    """Offloading only saves context, so a failed write leaves the result where it is and the Agent goes on."""
    result = message.tool_call_result
    logger.warning(
        "Failed to offload the result of tool '{tool}' to {store}; leaving the result in context. Error: {error}",
        tool=result.origin.tool_name if result is not None else "?",
        store=type(store).__name__,
        error=error,
    )
