"""
What casstore's compactors ask of a store beyond Haystack's `ToolResultStore`, as protocols checked at run time: any
store works, and one that offers more (`ContentAddressedToolResultStore`, `SharedToolResultStore`) gets more.
"""

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
