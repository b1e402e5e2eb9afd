"""
Putting the transcript `StepArchiveCompactor` archives into its store, in two moves: `prepare_transcript` renders it
and learns its reference, `store_transcript` stores it. On a store that can tell a reference before writing
(casstore's), nothing is written until the second move, so the compactor can build its note, measure the conversation
with it, and decline without leaving anything behind; any other store is written in the first move, as Haystack's
compactors write, since its reference is only known once written.
"""

from collections.abc import Sequence
from dataclasses import dataclass, field
from uuid import uuid4

from haystack.dataclasses import ChatMessage, FileContent, ImageContent
from haystack.hooks.tool_result_offloading.types import ToolResultStore

from casstore import PreparedWrite
from casstore.compactor.parts import key_part
from casstore.compactor.pointers import block_extension
from casstore.compactor.store_protocols import PreparingStore
from casstore.compactor.transcript import binary_payload, render_transcript


@dataclass(frozen=True, slots=True)
class PendingTranscript:
    """A transcript whose references are known: the transcript's first, then each image's or file's."""

    references: list[str]
    text: str
    # The writes still to store (all or none of them), on a store that can tell references before writing; empty
    # when the store has written the transcript already.
    prepared: list[PreparedWrite] = field(default_factory=list)


def prepare_transcript(store: ToolResultStore, removed: Sequence[ChatMessage], *, heading: str) -> PendingTranscript:
    """
    Render the transcript of `removed` (and its images and files) and learn their references.

    :param store: The compactor's store. One that is not a `PreparingStore` is written to here.
    :param removed: The archived messages, oldest first.
    :param heading: What the transcript holds, such as `Steps 1-40 (83 messages)`.
    :returns: The transcript, still to be stored with `store_transcript`.
    :raises Exception: Whatever the store raises when it cannot take a part, or a block that does not decode.
    """
    preparing = isinstance(store, PreparingStore)
    binary = bool(getattr(store, "supports_binary_content", False))
    # A content-addressed key is only recorded; other stores get a random part so that keys never collide.
    prefix = f"archived_{key_part(heading.replace(' ', '_'))}"
    suffix = "" if preparing else f"_{uuid4().hex}"
    prepared: list[PreparedWrite] = []
    attachments: list[str] = []

    def put(key: str, content: str | bytes) -> str:
        if isinstance(store, PreparingStore):
            write = store.prepare_write(key=key, content=content)
            prepared.append(write)
            return write.reference
        return store.write(key=key, content=content)

    def attach(block: ImageContent | FileContent) -> str:
        if not binary:
            return "(not archived: the store takes text only)"
        key = f"{prefix}{suffix}_{len(attachments) + 1}{block_extension(block)}"
        reference = put(key, binary_payload(block))
        attachments.append(reference)
        return reference

    text = render_transcript(removed, heading=heading, attach=attach)
    transcript = put(f"{prefix}{suffix}.md", text)
    return PendingTranscript(references=[transcript, *attachments], text=text, prepared=prepared)


def store_transcript(store: ToolResultStore, pending: PendingTranscript) -> None:
    """
    Store what `prepare_transcript` left to store: the transcript and its attachments, or none of them.

    :raises Exception: Whatever the store raises when it cannot write them.
    """
    if pending.prepared and isinstance(store, PreparingStore):
        store.write_prepared_many(pending.prepared)
