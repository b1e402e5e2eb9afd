"""
What casstore's compactors ask of a store beyond Haystack's `ToolResultStore`, as protocols checked at run time: any
store works, and one that offers more (`ContentAddressedToolResultStore`, `SharedToolResultStore`) gets more.
"""

import os
from typing import Protocol, runtime_checkable

from casstore import ArchiveRecord, CompactionRecord, OffloadRecord, PreparedWrite


@runtime_checkable
class PreparingStore(Protocol):
    """A store that can tell a write's reference before storing anything."""

    def prepare_write(self, *, key: str, content: str | bytes) -> PreparedWrite: ...

    def write_prepared_many(self, prepared: list[PreparedWrite]) -> list[str]: ...


@runtime_checkable
class HistoryStore(Protocol):
    """A store that keeps a history of offloads."""

    def record_offloads(self, *, compaction_id: str, offloads: list[OffloadRecord]) -> None: ...


@runtime_checkable
class CompactionHistoryStore(Protocol):
    """A store that also keeps what each compaction did to the conversation."""

    def record_compaction(
        self, *, compaction_id: str, compaction: CompactionRecord, offloads: list[OffloadRecord]
    ) -> None: ...


@runtime_checkable
class ArchiveHistoryStore(Protocol):
    """A store that also keeps the transcripts `StepArchiveCompactor` archived."""

    def record_archive(self, *, compaction_id: str, compaction: CompactionRecord, archive: ArchiveRecord) -> None: ...


# What Haystack's `ToolResultStore` protocol asks of a store, and so what every compactor and tool here calls.
TOOL_RESULT_STORE_METHODS = ("write", "read")


def check_store(store: object, *, owner: str) -> None:
    """
    Refuse, when it is made rather than at the first compaction, a store without Haystack's `ToolResultStore` methods.

    Any object with callable `write` and `read` passes (duck typing, as Haystack's protocol intends): casstore's
    stores, Haystack's `FileSystemToolResultStore`, an application's own.

    :param store: What was passed as the store.
    :param owner: The compactor or tool being made, named in the message.
    :raises TypeError: If `store` lacks a callable `write` or `read`, or is a class rather than a store made from
        it; the message says what to pass instead.
    """
    if isinstance(store, type):
        # The class's functions are callable too, but the first write would fail without a store behind it.
        raise TypeError(
            f"{owner} needs a ToolResultStore object, got the class {store.__name__}: pass a store made from it, "
            f"such as {store.__name__}('tool_results')."
        )
    missing = [name for name in TOOL_RESULT_STORE_METHODS if not callable(getattr(store, name, None))]
    if not missing:
        return
    if isinstance(store, (str, bytes, os.PathLike)):
        path = os.fsdecode(store)
        got = f"the path {path!r}"
        advice = f"pass a store opened on it, such as ContentAddressedToolResultStore({path!r}), not a path"
    else:
        got = "None" if store is None else f"a {type(store).__name__}"
        advice = "pass a store such as ContentAddressedToolResultStore('tool_results')"
    raise TypeError(
        f"{owner} needs a ToolResultStore (an object with `write` and `read` methods), got {got}, which has no "
        f"callable {' or '.join(f'`{name}`' for name in missing)}: {advice}."
    )
