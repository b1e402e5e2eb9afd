"""
`Repository`: the one object that owns a store's index and blob layer, and the only one that touches either.

The Haystack store, maintenance (`verify`, `gc`) and history (`stats`, `log`) are its clients: they ask typed
questions and get typed answers, and never hold a connection or a blob path. Every transaction is a `UnitOfWork`
that publishes what it learned only once it commits.

Layers, top to bottom (each imports only those below it):

    store.py (Haystack's ToolResultStore)   maintenance.py   history.py
                         \\                        |              /
                          repository/ (this package: one object, in parts)
                         /                 |                \\
        index.py, index_queries.py     blobs.py (catalog rows,      guard.py
        (writes, visibility,           hints, locate/load)
         offloads, history)           /          |
                                 frames.py   blob_files.py
                         \\           |
                          database.py (SQLite connection, units of work, migrations)

The object is one; its protocols are parts, one module each, over `core.RepositoryCore` (what is opened, and the
connection every question uses):

    writes.py      the write protocol          (on learned.py: dictionaries trained after a write)
    reads.py       the read protocol
    questions.py   history: stats, log, report figures
    retention.py   verify and gc               (on search.py: gc removes what it deletes from the search index)
    search.py      the search index
    copies.py      `casstore copy`
"""

from typing import Protocol

from casstore.blobs.catalog import WaitingBlobs
from casstore.index.prepared import PreparedWrite, prepare
from casstore.index.queries import CompactionRow, OffloadEntry, OffloadRow, WriteRow
from casstore.index.report_queries import ReportFigures
from casstore.index.report_writes import ResultRow
from casstore.index.scope import check_dedup_scope
from casstore.index.writes import CompactionRecord, OffloadRecord
from casstore.repository.copies import Copies
from casstore.repository.core import BLOB_DIRECTORY_NAME, INDEX_FILE_NAME, IndexDatabase, StoredWriteRecorder
from casstore.repository.questions import HistoryQuestions
from casstore.repository.reads import Reads
from casstore.repository.retention import BlobCheck, Collection, CollectionPreview, IntegritySnapshot, Retention
from casstore.repository.search import SearchCheck
from casstore.repository.writes import Writes
from casstore.search.engine import MIN_TERM_CHARS
from casstore.search.results import SearchHit, SearchOutcome

__all__ = [
    "BLOB_DIRECTORY_NAME",
    "INDEX_FILE_NAME",
    "MIN_TERM_CHARS",
    "BlobCheck",
    "Collection",
    "CollectionPreview",
    "CompactionRecord",
    "CompactionRow",
    "HasRepository",
    "IndexDatabase",
    "IntegritySnapshot",
    "OffloadEntry",
    "OffloadRecord",
    "OffloadRow",
    "PreparedWrite",
    "ReportFigures",
    "Repository",
    "ResultRow",
    "SearchCheck",
    "SearchHit",
    "SearchOutcome",
    "StoredWriteRecorder",
    "WaitingBlobs",
    "WriteRow",
    "check_dedup_scope",
    "prepare",
    "repository_of",
]


class Repository(Writes, Reads, HistoryQuestions, Retention, Copies):
    """A store's index and its blobs: frames kept in the index, and a blob backend (a folder or an object store)."""


class HasRepository(Protocol):
    """Anything built on a repository (a store), for functions that accept either."""

    @property
    def repository(self) -> Repository: ...


def repository_of(source: "Repository | HasRepository") -> Repository:
    """:returns: `source` itself if it is a repository, else the repository it is built on."""
    return source if isinstance(source, Repository) else source.repository
