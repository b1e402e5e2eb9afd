"""
The search index: which stored results hold a text, per namespace. The repository runs it inside its transactions,
as one more layer of the index database; built on `casstore.index`.

- `engine`: what differs between the engines (`SearchText`); `fts5`: SQLite's trigrams and how a term is looked
  up; `postgres`: the same on PostgreSQL's `pg_trgm`.
- `documents`: what is indexed (one document per blob, each namespace's entries and counts).
- `pending`: when it is indexed (after a write commits, in batches).
- `candidates`: a search's look-up of a namespace's candidates and statistics; `provenance`: what the history
  knows of its hits.
- `exact_match`, `results`: grading a candidate and ranking the hits.

The package's names below are the search index's operations, as the repository calls them
(`from casstore import search as search_index`).
"""

from casstore.search.candidates import (
    MAX_CANDIDATES_PER_TERM,
    Candidate,
    LaterCandidates,
    NamespaceStatistics,
    candidates,
    digest_of,
    digests_of,
    documents_of,
)
from casstore.search.documents import (
    IndexedEntry,
    add,
    add_entry,
    add_missing_entries,
    clear,
    enable,
    entries,
    forget_entries,
    is_enabled,
    is_indexed,
    is_referenced,
    miscounted,
    recount,
    remove,
    searchable_text,
    stray_entries,
    tiebreak,
    unindexed_blobs,
    unreferenced_documents,
)
from casstore.search.engine import MIN_TERM_CHARS, SearchText, SearchTimeout
from casstore.search.fts5 import FTS5_TEXT, Fts5Text, term_query
from casstore.search.pending import (
    PendingEntry,
    WrittenText,
    WrittenTexts,
    add_pending,
    index_pending,
    pending,
    pending_count,
)
from casstore.search.provenance import HitDetails, hit_details, tool_digests

__all__ = [
    "FTS5_TEXT",
    "MAX_CANDIDATES_PER_TERM",
    "MIN_TERM_CHARS",
    "Candidate",
    "Fts5Text",
    "HitDetails",
    "IndexedEntry",
    "LaterCandidates",
    "NamespaceStatistics",
    "PendingEntry",
    "SearchText",
    "SearchTimeout",
    "WrittenText",
    "WrittenTexts",
    "add",
    "add_entry",
    "add_missing_entries",
    "add_pending",
    "candidates",
    "clear",
    "digest_of",
    "digests_of",
    "documents_of",
    "enable",
    "entries",
    "forget_entries",
    "hit_details",
    "index_pending",
    "is_enabled",
    "is_indexed",
    "is_referenced",
    "miscounted",
    "pending",
    "pending_count",
    "recount",
    "remove",
    "searchable_text",
    "stray_entries",
    "term_query",
    "tiebreak",
    "tool_digests",
    "unindexed_blobs",
    "unreferenced_documents",
]
