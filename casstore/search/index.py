"""
The search index: the text of indexed blobs, found again by any substring of 3 or more characters.

A layer of the index database beside `index.py` (SQLite FTS5), run inside the repository's
transactions like the other layers. One document per blob, so identical results are one document. The FTS5 table
holds each document's trigrams, case-folded, without positions and without a copy of the text: a term's candidates
are the documents holding every trigram of it, a superset that the repository narrows by reading each candidate (the
blob, verified like any read) and keeping it only if the term is in it. Positions would have made the index twice
the size of the text; without them it is a fraction of it (docs/search.md has the measurements).

What a namespace sees is decided here, in SQL, by its entries (`search_entries`: the indexed results it holds, kept
in the transactions that write and forget them, so always a subset of what its `writes` rows let it read):
candidates are only documents with an entry of the namespace, and every statistic a ranking uses (how many results
the namespace has, their bytes, how many hold a term) is counted over those alone (`search_namespaces` keeps the
first two), so no other namespace's results can change a hit, its rank or a count.

The SQL here is written once for both engines (the PostgreSQL connection translates it); what differs, the trigram
table and how a look-up is bounded in time, is an engine's `SearchText` (`Fts5Text` below for SQLite,
`casstore.search.postgres.TrigramText` for PostgreSQL).

Writes with the index on do not index their text in their own transaction: they record a row of `search_pending`
(one insert), and the text is indexed after the commit, in batches of a transaction each (`index_pending`), by the
writer, or by whatever indexes next after a crash (docs/search.md).
"""

import math
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

from casstore.errors import InvalidReferenceError
from casstore.index.work import NOW_SQL, UnitOfWork
from casstore.references import parse_reference
from casstore.search.exact_match import Grading

# Characters in a trigram, FTS5's `trigram` tokenizer's unit: a term shorter than this cannot be looked up.
MIN_TERM_CHARS = 3
# The trigrams of one term that a look-up asks for, spread over the term: more add work and hardly narrow it.
_MAX_TRIGRAMS = 24
# The candidates of one term handed to the ranking at most, the shortest first; the rest are counted.
MAX_CANDIDATES_PER_TERM = 1_000
# SQLite virtual machine steps between two checks of the deadline.
_PROGRESS_STEPS = 2_000

_ADD_DOCUMENT_SQL = (
    "INSERT INTO search_documents (digest, size, tiebreak) VALUES (?, ?, ?) ON CONFLICT (digest) DO NOTHING "
    "RETURNING id"
)
# A term's matches (of any namespace), up to one past the bound that chooses the plan, as a JSON array: one
# evaluation of the trigrams' doclists, handed to the next statement as it is (no row per match built in Python).
_FTS5_MATCHES_SQL = (
    "SELECT count(*), json_group_array(rowid) FROM (SELECT rowid FROM search_text WHERE search_text MATCH ? LIMIT ?)"
)
# Of those matches, the namespace's entries, each looked up by key; sorted, counted and cut in Python. (Matching
# again joined to the entries, sorted in SQL, evaluated the doclists twice: docs/search.md has what that cost.)
_FTS5_ENTRIES_SQL = """
    SELECT e.document, e.size, e.tiebreak FROM json_each(?) m
    CROSS JOIN search_entries e ON e.namespace = ? AND e.document = m.value
"""
# A term found in many documents (of any namespace: this only chooses the plan, never the answer): the namespace's
# matches are counted, and its shortest are taken by walking its entries in size order (migration 0012's index),
# keeping those among the matches, instead of sorting every match. Both plans give the same rows.
_FTS5_MANY_MATCHES = 2_000
# Of such a term, the shortest this many are handed over (all are counted): its trigrams are common, so its
# candidates mostly hold it, and a search reads a few dozen of them.
_FTS5_MANY_CANDIDATES = 300
_FTS5_COUNT_SQL = """
    SELECT count(*) FROM search_text s CROSS JOIN search_entries e ON e.namespace = ? AND e.document = s.rowid
    WHERE search_text MATCH ?
"""
# A namespace that holds every document (a store of one namespace) has every match: counted without the join.
_HOLDS_EVERY_DOCUMENT_SQL = (
    "SELECT coalesce((SELECT documents FROM search_namespaces WHERE namespace = ?), -1) = "
    "(SELECT count(*) FROM search_documents)"
)
_FTS5_ALL_MATCHES_SQL = "SELECT count(*) FROM search_text WHERE search_text MATCH ?"
_FTS5_SHORTEST_SQL = """
    SELECT e.document, e.size, e.tiebreak FROM search_entries e INDEXED BY search_entries_in_order
    WHERE e.namespace = ? AND e.document IN (SELECT rowid FROM search_text WHERE search_text MATCH ?)
    ORDER BY e.size, e.tiebreak LIMIT ?
"""
_DOCUMENT_COUNT_SQL = "SELECT documents, bytes FROM search_namespaces WHERE namespace = ?"
# A repeat in the namespace changes nothing (the entry keeps the first write), so it dirties no page.
_ADD_ENTRY_SQL = """
    INSERT INTO search_entries (namespace, document, size, tiebreak, write_id)
    SELECT ?, id, size, tiebreak, ? FROM search_documents WHERE digest = ?
    ON CONFLICT (namespace, document) DO NOTHING RETURNING size
"""
# A pending row of the write just recorded in the caller's transaction (the engine's `last_write_sql` names it); a
# repeat keeps the first.
_ADD_PENDING_SQL = (
    "INSERT INTO search_pending (namespace, digest, write_id) VALUES (?, ?, ({})) "
    "ON CONFLICT (namespace, digest) DO NOTHING"
)
_COUNT_ENTRY_SQL = """
    INSERT INTO search_namespaces (namespace, documents, bytes) VALUES (?, 1, ?)
    ON CONFLICT (namespace) DO UPDATE SET documents = search_namespaces.documents + 1,
        bytes = search_namespaces.bytes + excluded.bytes
"""
_COUNTS_SQL = "SELECT namespace, count(*), sum(size) FROM search_entries GROUP BY namespace"


class SearchText(Protocol):
    """An engine's table of trigrams: what differs between the SQLite index (FTS5) and PostgreSQL's (`pg_trgm`)."""

    # Whether a term's candidates hold it for certain (the engine rechecks them against a copy of the text), so that a
    # search needs to read only the hits it shows; False: each candidate must be read and checked.
    exact: bool
    # The id of the write the caller's transaction just recorded, as SQL.
    last_write_sql: str
    # SQL of `(value)` rows of a JSON array column `refs` of `offloads` aliased `o`, and of a substring test.
    json_refs_sql: str
    contains_sql: str

    def enable(self, work: UnitOfWork) -> None: ...
    def add_text(self, work: UnitOfWork, *, document: int, text: str) -> None: ...
    def remove_text(self, work: UnitOfWork, *, document: int, text: str | None) -> None: ...
    def clear_text(self, work: UnitOfWork) -> None: ...
    def purge(self, work: UnitOfWork) -> None: ...
    def stray_rows(self, connection: Any) -> int: ...
    def finds(self, connection: Any, *, document: int, text: str) -> bool: ...
    def index_bytes(self, connection: Any) -> int: ...
    def term_candidates(self, connection: Any, *, namespace: str, term: str, limit: int) -> list[tuple[Any, ...]]: ...
    def bounded(self, connection: Any, deadline: float) -> AbstractContextManager[None]: ...
    def occurrences(
        self, connection: Any, *, documents: Sequence[int], terms: Sequence[str]
    ) -> dict[int, dict[int, int]]: ...
    def grades(self, connection: Any, *, documents: Sequence[int], grading: Grading) -> dict[int, int]: ...


class SearchTimeout(Exception):
    """A look-up ran past its deadline and was interrupted; nothing was changed."""


@dataclass(frozen=True, slots=True)
class Candidate:
    """A document that holds every trigram of at least one term: its id, size in bytes, tiebreak, and which terms."""

    document: int
    size: int
    tiebreak: int
    terms: frozenset[int]


@dataclass(frozen=True, slots=True)
class NamespaceStatistics:
    """What a ranking may know about a namespace's documents, counted over that namespace alone."""

    documents: int
    # Bytes of the namespace's documents, for their average size.
    characters: int
    # For each term (by index), how many of the namespace's documents are candidates for it.
    candidates_per_term: tuple[int, ...]

    @property
    def most_candidates(self) -> int:
        """:returns: At most how many of the namespace's documents are candidates for some term."""
        return min(self.documents, sum(self.candidates_per_term))

    def weight(self, term: int) -> float:
        """:returns: BM25's inverse document frequency of a term, from this namespace's counts alone."""
        found = self.candidates_per_term[term]
        return math.log(1.0 + (self.documents - found + 0.5) / (found + 0.5))


@dataclass(frozen=True, slots=True)
class IndexedEntry:
    """A document as `verify` checks it: its id and digest, and whether its blob row is still there."""

    document: int
    digest: str
    has_blob: bool


def searchable_text(data: bytes, *, is_text: bool) -> str | None:
    """
    :returns: The text a blob's content is indexed as: a text result's text, or binary content that is UTF-8 text
        with no NUL byte (a tool's CSV or JSON file, which the read tool reads as text); None for other bytes.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if not is_text and "\x00" in text:
        return None
    return text


def enable(work: UnitOfWork, engine: SearchText) -> None:
    """
    Record, inside the caller's transaction, that the index is on (a search then searches instead of saying so), and
    have the engine make what it makes only then.

    :raises SearchUnavailableError: If the engine cannot (a PostgreSQL server without `pg_trgm`).
    """
    engine.enable(work)
    work.connection.execute(f"INSERT INTO search_state (id, enabled_at) VALUES (1, {NOW_SQL}) ON CONFLICT DO NOTHING")


def is_enabled(connection: Any) -> bool:
    """:returns: Whether the index was ever turned on for this store."""
    return connection.execute("SELECT 1 FROM search_state WHERE id = 1").fetchone() is not None


def is_indexed(connection: Any, digest: str) -> bool:
    """:returns: Whether the blob `digest` has a document."""
    return connection.execute("SELECT 1 FROM search_documents WHERE digest = ?", (digest,)).fetchone() is not None


def add(work: UnitOfWork, engine: SearchText, *, digest: str, text: str) -> bool:
    """
    Index a blob's text, inside the caller's transaction, unless it is indexed already.

    :returns: Whether a document was added.
    """
    row = work.connection.execute(
        _ADD_DOCUMENT_SQL, (digest, len(text.encode("utf-8", "surrogatepass")), tiebreak(digest))
    ).fetchone()
    if row is None:
        return False
    engine.add_text(work, document=row[0], text=text)
    return True


def tiebreak(digest: str) -> int:
    """:returns: The order of documents of equal size: the digest's first 60 bits, which no write can change."""
    return int(digest[:15], 16)


def add_entry(work: UnitOfWork, *, namespace: str, digest: str, write_id: int) -> None:
    """
    Record, inside the caller's transaction, that `namespace` holds the indexed blob `digest`, first written there by
    the write `write_id` (unless it holds it already).
    """
    connection = work.connection
    added = connection.execute(_ADD_ENTRY_SQL, (namespace, write_id, digest)).fetchone()
    if added is not None:
        connection.execute(_COUNT_ENTRY_SQL, (namespace, added[0]))


def add_pending(work: UnitOfWork, engine: SearchText, *, namespace: str, digest: str) -> None:
    """
    Record, inside the transaction of the write just recorded, that its result waits to be indexed (one insert; a
    repeat changes nothing).
    """
    work.change(_ADD_PENDING_SQL.format(engine.last_write_sql), (namespace, digest))


@dataclass(frozen=True, slots=True)
class PendingEntry:
    """A result waiting to be indexed: its namespace and digest, and whether a write of it was text."""

    namespace: str
    digest: str
    written_as_text: bool


def pending(connection: Any, *, namespace: str | None, limit: int) -> list[PendingEntry]:
    """:returns: Up to `limit` results waiting to be indexed (of `namespace`, or of all), in digest order."""
    where = "WHERE p.namespace = ?" if namespace is not None else ""
    rows = connection.execute(
        "SELECT p.namespace, p.digest, EXISTS (SELECT 1 FROM writes w WHERE w.id = p.write_id AND w.kind = 'text') "
        f"FROM search_pending p {where} ORDER BY p.digest, p.namespace LIMIT ?",
        (*((namespace,) if namespace is not None else ()), limit),
    )
    return [PendingEntry(row[0], row[1], bool(row[2])) for row in rows]


def pending_count(connection: Any, *, namespace: str | None) -> int:
    """:returns: How many results wait to be indexed (of `namespace`, or of all)."""
    if namespace is None:
        row = connection.execute("SELECT count(*) FROM search_pending").fetchone()
    else:
        row = connection.execute("SELECT count(*) FROM search_pending WHERE namespace = ?", (namespace,)).fetchone()
    return int(row[0])


def index_pending(work: UnitOfWork, engine: SearchText, *, namespace: str, digest: str, text: str | None) -> bool:
    """
    Index one pending result inside the caller's transaction: its document (from `text`, unless the blob is indexed
    already), the namespace's entry with the first write the pending row names (if its reference is still visible
    there), and the pending row removed.

    :param text: The result's text, or None if it is not text (binary content that is not UTF-8) or unreadable: then
        the row is only removed.
    :returns: Whether the row was still there (another process may have indexed it meanwhile).
    """
    connection = work.connection
    row = connection.execute(
        "DELETE FROM search_pending WHERE namespace = ? AND digest = ? RETURNING write_id", (namespace, digest)
    ).fetchone()
    if row is None:
        return False
    if text is None:
        return True
    add(work, engine, digest=digest, text=text)
    visible = connection.execute(
        "SELECT 1 FROM writes WHERE digest = ? AND namespace = ? LIMIT 1", (digest, namespace)
    ).fetchone()
    if visible is not None:
        add_entry(work, namespace=namespace, digest=digest, write_id=int(row[0]))
    return True


@dataclass(frozen=True, slots=True)
class WrittenText:
    """A result this process wrote with the index on, kept until it is indexed: its namespace, digest and text."""

    namespace: str
    digest: str
    text: str


class WrittenTexts:
    """
    The texts a process wrote with the index on and has not indexed yet, in memory, so that indexing them after their
    commit reads no blob back. Thread-safe; bounded (`due` says when a batch is worth a transaction).
    """

    # A batch: this many results, or this many characters of text, whichever comes first.
    BATCH_RESULTS = 64
    BATCH_CHARACTERS = 1_000_000

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._texts: list[WrittenText] = []
        self._characters = 0

    def add(self, text: WrittenText) -> None:
        """Keep `text` until the next batch."""
        with self._lock:
            self._texts.append(text)
            self._characters += len(text.text)

    @property
    def due(self) -> bool:
        """Whether enough is waiting for a batch."""
        return len(self._texts) >= self.BATCH_RESULTS or self._characters >= self.BATCH_CHARACTERS

    def __len__(self) -> int:
        return len(self._texts)

    def take(self) -> list[WrittenText]:
        """:returns: Everything waiting, in digest order (the order rows are locked in), which is no longer kept."""
        with self._lock:
            texts, self._texts, self._characters = self._texts, [], 0
        return sorted(texts, key=lambda text: (text.digest, text.namespace))


def recount(work: UnitOfWork) -> None:
    """Count every namespace's entries again, inside the caller's transaction (after entries were added or removed)."""
    work.connection.execute("DELETE FROM search_namespaces")
    work.connection.execute(f"INSERT INTO search_namespaces (namespace, documents, bytes) {_COUNTS_SQL}")


def miscounted(connection: Any) -> bool:
    """:returns: Whether the kept per-namespace counts differ from a count of the entries."""
    kept = set(connection.execute("SELECT namespace, documents, bytes FROM search_namespaces"))
    return kept != set(connection.execute(_COUNTS_SQL))


def add_missing_entries(work: UnitOfWork) -> int:
    """
    Record every (namespace, indexed blob) the history holds and the entries lack, with its first write, inside the
    caller's transaction (the end of a build).

    :returns: How many entries were added.
    """
    cursor = work.connection.execute(
        "INSERT INTO search_entries (namespace, document, size, tiebreak, write_id) "
        "SELECT w.namespace, d.id, d.size, d.tiebreak, min(w.id) FROM writes w "
        "JOIN search_documents d ON d.digest = w.digest "
        "GROUP BY w.namespace, d.id ON CONFLICT (namespace, document) DO NOTHING"
    )
    recount(work)
    return cursor.rowcount


def forget_entries(work: UnitOfWork) -> None:
    """
    After writes were forgotten (gc), inside its transaction: drop the entries no write is left for, and point the
    others at the first write left.
    """
    connection = work.connection
    first = (
        "SELECT w.namespace, d.id AS document, min(w.id) AS id FROM writes w "
        "JOIN search_documents d ON d.digest = w.digest GROUP BY w.namespace, d.id"
    )
    connection.execute(
        "DELETE FROM search_entries WHERE (namespace, document) NOT IN "
        f"(SELECT namespace, document FROM ({first}) AS first)"
    )
    connection.execute(
        f"UPDATE search_entries SET write_id = first.id FROM ({first}) AS first "
        "WHERE first.namespace = search_entries.namespace AND first.document = search_entries.document "
        "AND first.id <> search_entries.write_id"
    )
    # A pending result whose first write was forgotten: the first write left, or nothing to index.
    connection.execute(
        "UPDATE search_pending SET write_id = coalesce((SELECT min(w.id) FROM writes w WHERE w.namespace = "
        "search_pending.namespace AND w.digest = search_pending.digest), 0) "
        "WHERE NOT EXISTS (SELECT 1 FROM writes w WHERE w.id = search_pending.write_id)"
    )
    connection.execute("DELETE FROM search_pending WHERE write_id = 0")
    recount(work)


def stray_entries(connection: Any) -> int:
    """:returns: How many entries have no document, or a reference no longer visible in their namespace."""
    row = connection.execute(
        "SELECT count(*) FROM search_entries e WHERE NOT EXISTS (SELECT 1 FROM search_documents d "
        "JOIN writes w ON w.digest = d.digest AND w.namespace = e.namespace WHERE d.id = e.document)"
    ).fetchone()
    return int(row[0])


def remove(work: UnitOfWork, engine: SearchText, *, digest: str, text: str | None) -> bool:
    """
    Remove a blob's document and its pending rows, inside the caller's transaction (gc's, which deletes the blob).

    :param text: The blob's text, which FTS5 needs to delete the trigrams of a table that keeps no copy; None when
        it could not be read (a damaged blob): then only the document goes, and its trigrams stay behind, matched by
        nothing (ids are never reused), until `rebuild`. `verify` counts them.
    :returns: Whether there was a document.
    """
    connection = work.connection
    work.change("DELETE FROM search_pending WHERE digest = ?", (digest,))
    row = connection.execute("DELETE FROM search_documents WHERE digest = ? RETURNING id", (digest,)).fetchone()
    if row is None:
        return False
    for namespace, size in connection.execute(
        "DELETE FROM search_entries WHERE document = ? RETURNING namespace, size", (row[0],)
    ).fetchall():
        connection.execute(
            "UPDATE search_namespaces SET documents = documents - 1, bytes = bytes - ? WHERE namespace = ?",
            (size, namespace),
        )
    engine.remove_text(work, document=row[0], text=text)
    return True


def clear(work: UnitOfWork, engine: SearchText) -> None:
    """Remove every document and trigram, inside the caller's transaction (the start of a rebuild)."""
    connection = work.connection
    connection.execute("DELETE FROM search_documents")
    connection.execute("DELETE FROM search_entries")
    connection.execute("DELETE FROM search_namespaces")
    engine.clear_text(work)


def unindexed_blobs(connection: Any, *, after: str, limit: int | None) -> list[tuple[str, bool]]:
    """
    :returns: Up to `limit` `(digest, written_as_text)` of blobs after `after` (in digest order) that some write
        references and that have no document, for building the index in batches.
    """
    rows = connection.execute(
        "SELECT b.digest, EXISTS (SELECT 1 FROM writes w WHERE w.digest = b.digest AND w.kind = 'text') "
        "FROM blobs b WHERE b.digest > ? "
        "AND EXISTS (SELECT 1 FROM writes w WHERE w.digest = b.digest) "
        "AND NOT EXISTS (SELECT 1 FROM search_documents d WHERE d.digest = b.digest) "
        "ORDER BY b.digest" + ("" if limit is None else " LIMIT ?"),
        (after,) if limit is None else (after, limit),
    )
    return [(row[0], bool(row[1])) for row in rows]


def entries(connection: Any) -> list[IndexedEntry]:
    """:returns: Every document, with whether its blob row exists, in id order."""
    rows = connection.execute(
        "SELECT d.id, d.digest, EXISTS (SELECT 1 FROM blobs b WHERE b.digest = d.digest) FROM search_documents d "
        "ORDER BY d.id"
    )
    return [IndexedEntry(row[0], row[1], bool(row[2])) for row in rows]


def candidates(
    connection: Any, engine: SearchText, *, namespace: str, terms: Sequence[str], deadline: float
) -> tuple[list[Candidate], NamespaceStatistics]:
    """
    Find the namespace's documents that are candidates for at least one term (for each term the
    `MAX_CANDIDATES_PER_TERM` shortest), and the namespace's statistics (each term's candidates counted in full).

    :param terms: Each at least `MIN_TERM_CHARS` characters (shorter ones cannot be looked up).
    :param deadline: A `time.monotonic()` value: a look-up still running then is interrupted.
    :returns: The candidates (any order), and the statistics a ranking may use.
    :raises SearchTimeout: If the deadline passed.
    """
    found: dict[int, tuple[int, int, set[int]]] = {}
    per_term = []
    single: list[Candidate] = []
    with engine.bounded(connection, deadline):
        for position, term in enumerate(terms):
            rows = engine.term_candidates(connection, namespace=namespace, term=term, limit=MAX_CANDIDATES_PER_TERM)
            per_term.append(rows[0][3] if rows else 0)
            if len(terms) == 1:  # the common case: no union to make, one set of terms for all (a search's hot loop)
                only = frozenset((0,))
                single = [Candidate(row[0], row[1], row[2], only) for row in rows]
                continue
            for document, size, order, _ in rows:
                entry = found.get(document)
                if entry is None:
                    found[document] = (size, order, {position})
                else:
                    entry[2].add(position)
        counts = connection.execute(_DOCUMENT_COUNT_SQL, (namespace,)).fetchone()
    count, characters = counts if counts is not None else (0, 0)
    statistics = NamespaceStatistics(
        documents=int(count), characters=int(characters), candidates_per_term=tuple(per_term)
    )
    if len(terms) == 1:
        return single, statistics
    listed = [
        Candidate(document=document, size=size, tiebreak=order, terms=frozenset(positions))
        for document, (size, order, positions) in found.items()
    ]
    return listed, statistics


class Fts5Text:
    """The SQLite index's trigrams: an FTS5 table (`tokenize='trigram'`, no positions, no copy of the text)."""

    exact = False
    # Writers are serialized by SQLite's write lock: the highest id is the caller's write.
    last_write_sql = "SELECT max(id) FROM writes"
    json_refs_sql = "json_each(o.refs) part"
    contains_sql = "instr({}, ?) > 0"

    def enable(self, work: UnitOfWork) -> None:
        """Nothing to make: migration 0009 made the FTS5 table."""

    def add_text(self, work: UnitOfWork, *, document: int, text: str) -> None:
        """Add a document's trigrams."""
        work.connection.execute("INSERT INTO search_text (rowid, body) VALUES (?, ?)", (document, text))

    def remove_text(self, work: UnitOfWork, *, document: int, text: str | None) -> None:
        """Remove a document's trigrams (FTS5 needs the text they came from; without it they stay, matched by none)."""
        if text is not None:
            work.connection.execute(
                "INSERT INTO search_text (search_text, rowid, body) VALUES ('delete', ?, ?)", (document, text)
            )

    def clear_text(self, work: UnitOfWork) -> None:
        """Remove every trigram."""
        work.connection.execute("INSERT INTO search_text (search_text) VALUES ('delete-all')")

    def purge(self, work: UnitOfWork) -> None:
        """
        Rewrite the trigram segments as one (FTS5's `optimize`), inside the caller's write transaction: a removal
        only adds delete markers, and the removed documents' trigrams stay in older segments until they are merged.
        """
        work.connection.execute("INSERT INTO search_text (search_text) VALUES ('optimize')")

    def stray_rows(self, connection: Any) -> int:
        """:returns: How many rows of trigrams belong to no document (left by removing a damaged blob's document)."""
        row = connection.execute(
            "SELECT count(*) FROM search_text s WHERE NOT EXISTS "
            "(SELECT 1 FROM search_documents d WHERE d.id = s.rowid)"
        ).fetchone()
        return int(row[0])

    def finds(self, connection: Any, *, document: int, text: str) -> bool:
        """
        :returns: Whether the document's trigrams hold the trigrams of a few pieces of `text` (its start, middle and
            end): a check that the document was indexed from this text, for `verify`.
        """
        probes = _probes(text)
        if not probes:
            return True
        query = " ".join(_quoted(trigram) for probe in probes for trigram in _trigrams(probe))
        found = connection.execute(
            "SELECT 1 FROM search_text WHERE search_text MATCH ? AND rowid = ?", (query, document)
        ).fetchone()
        return found is not None

    def index_bytes(self, connection: Any) -> int:
        """:returns: Bytes of the search index's tables (its trigrams and documents) in the database file."""
        try:
            row = connection.execute(
                "SELECT coalesce(sum(pgsize), 0) FROM dbstat WHERE name LIKE 'search\\_%' ESCAPE '\\' "
                "OR name LIKE 'sqlite_autoindex_search\\_%' ESCAPE '\\'"
            ).fetchone()
        except sqlite3.OperationalError:  # a SQLite built without the dbstat table
            return 0
        return int(row[0])

    def term_candidates(self, connection: Any, *, namespace: str, term: str, limit: int) -> list[tuple[Any, ...]]:
        """:returns: `(document, size, tiebreak, candidates in all)` of documents holding every trigram of `term`."""
        query = term_query(term)
        matches, listed = connection.execute(_FTS5_MATCHES_SQL, (query, _FTS5_MANY_MATCHES + 1)).fetchone()
        if matches <= _FTS5_MANY_MATCHES:
            found = connection.execute(_FTS5_ENTRIES_SQL, (listed, namespace)).fetchall()
            found.sort(key=_in_order)
            return [(*row, len(found)) for row in found[:limit]]
        (every,) = connection.execute(_HOLDS_EVERY_DOCUMENT_SQL, (namespace,)).fetchone()
        if every:
            (count,) = connection.execute(_FTS5_ALL_MATCHES_SQL, (query,)).fetchone()
        else:
            (count,) = connection.execute(_FTS5_COUNT_SQL, (namespace, query)).fetchone()
        shortest = connection.execute(_FTS5_SHORTEST_SQL, (namespace, query, min(limit, _FTS5_MANY_CANDIDATES)))
        return [(*row, count) for row in shortest]

    def bounded(self, connection: Any, deadline: float) -> AbstractContextManager[None]:
        """:returns: A context in which every statement stops at `deadline` (`SearchTimeout`)."""
        return _interrupted_at(connection, deadline)

    def occurrences(
        self, connection: Any, *, documents: Sequence[int], terms: Sequence[str]
    ) -> dict[int, dict[int, int]]:
        """Not asked of an index whose candidates are not exact: the repository reads and counts them itself."""
        raise NotImplementedError

    def grades(self, connection: Any, *, documents: Sequence[int], grading: Grading) -> dict[int, int]:
        """Not asked of an index without the texts: the repository grades the texts it reads."""
        raise NotImplementedError


FTS5_TEXT = Fts5Text()


def term_query(term: str) -> str:
    """:returns: The FTS5 query for `term`: every trigram of it (up to a bound, spread over it), each quoted."""
    return " ".join(_quoted(trigram) for trigram in _trigrams(term))


def _in_order(row: tuple[Any, ...]) -> tuple[int, int]:
    # A namespace's candidates in the order a search reads them: the shortest first, ties by the digest's bits.
    return (row[1], row[2])


def _trigrams(term: str) -> list[str]:
    distinct = list(dict.fromkeys(term[index : index + 3] for index in range(len(term) - 2)))
    if len(distinct) <= _MAX_TRIGRAMS:
        return distinct
    step = (len(distinct) - 1) / (_MAX_TRIGRAMS - 1)
    return [distinct[round(index * step)] for index in range(_MAX_TRIGRAMS)]


def _quoted(trigram: str) -> str:
    # An FTS5 string: whatever it holds (quotes, operators, column filters) is text, never query syntax.
    return '"' + trigram.replace('"', '""') + '"'


def _probes(text: str) -> list[str]:
    length = len(text)
    if length < MIN_TERM_CHARS:
        return []
    starts = sorted({0, max(0, length // 2 - 4), max(0, length - 8)})
    return [text[start : start + 8] for start in starts if len(text[start : start + 8]) >= MIN_TERM_CHARS]


@contextmanager
def _interrupted_at(connection: sqlite3.Connection, deadline: float) -> Iterator[None]:
    def past_deadline() -> int:
        return 1 if time.monotonic() > deadline else 0

    handler: Callable[[], int] = past_deadline
    connection.set_progress_handler(handler, _PROGRESS_STEPS)
    try:
        yield
    except sqlite3.OperationalError as error:
        if "interrupted" in str(error):
            raise SearchTimeout(str(error)) from error
        raise
    finally:
        connection.set_progress_handler(None, 0)


@dataclass(frozen=True, slots=True)
class HitDetails:
    """What the history knows of a hit in one namespace: its first write's reference, key and time, and its tool."""

    reference: str
    key: str
    written_at: str
    tool_name: str | None


def tool_digests(connection: Any, engine: SearchText, *, namespace: str, tool_name: str) -> set[str]:
    """
    :returns: The digests of the namespace's results of the tool `tool_name`: those the offload history names for
        it, and those whose key has the form Haystack gives a tool's keys (`<step>_<tool>_...` from the offload hook,
        `compacted_<tool>_...` from the compactors).
    """
    pattern = re.compile(rf"(?:\d+|compacted)_{re.escape(tool_name)}_")
    rows = connection.execute(
        f"SELECT DISTINCT digest, key FROM writes WHERE namespace = ? AND {engine.contains_sql.format('key')}",
        (namespace, f"_{tool_name}_"),
    )
    digests = {digest for digest, key in rows if pattern.match(key) and _key_may_be_of(key, tool_name)}
    offloaded = connection.execute(
        f"SELECT DISTINCT part.value FROM offloads o, {engine.json_refs_sql} WHERE o.namespace = ? AND o.tool_name = ?",
        (namespace, tool_name),
    )
    for (reference,) in offloaded:
        digest = _digest_of(reference)
        if digest is not None:
            digests.add(digest)
    return digests


def digest_of(connection: Any, document: int) -> str | None:
    """:returns: The digest of the blob `document` indexes, or None if it is gone."""
    row = connection.execute("SELECT digest FROM search_documents WHERE id = ?", (document,)).fetchone()
    return row[0] if row else None


def digests_of(connection: Any, documents: Sequence[int]) -> dict[int, str]:
    """:returns: The digests of those of `documents` that still exist."""
    found: dict[int, str] = {}
    for start in range(0, len(documents), 500):
        chunk = list(documents[start : start + 500])
        marks = ", ".join("?" for _ in chunk)
        found.update(connection.execute(f"SELECT id, digest FROM search_documents WHERE id IN ({marks})", chunk))
    return found


def documents_of(connection: Any, digests: set[str]) -> set[int]:
    """:returns: The documents of those of `digests` that are indexed."""
    found: set[int] = set()
    listed = sorted(digests)
    for start in range(0, len(listed), 500):
        chunk = listed[start : start + 500]
        marks = ", ".join("?" for _ in chunk)
        found.update(
            row[0] for row in connection.execute(f"SELECT id FROM search_documents WHERE digest IN ({marks})", chunk)
        )
    return found


def hit_details(
    connection: Any, engine: SearchText, *, namespace: str, documents: Sequence[int]
) -> dict[int, HitDetails]:
    """:returns: For each of `documents` the namespace holds, what the history knows of its first write there."""
    if not documents:
        return {}
    marks = ", ".join("?" for _ in documents)
    first: dict[int, tuple[str, str, str]] = {}
    for document, reference, key, written_at in connection.execute(
        f"SELECT e.document, w.reference, w.key, w.written_at FROM search_entries e JOIN writes w ON w.id = e.write_id "
        f"WHERE e.namespace = ? AND e.document IN ({marks})",
        (namespace, *documents),
    ):
        first[document] = (reference, key, written_at)
    tools: dict[str, str] = {}
    references = [reference for reference, _, _ in first.values()]
    if references and connection.execute("SELECT 1 FROM offloads WHERE namespace = ? LIMIT 1", (namespace,)).fetchone():
        marks = ", ".join("?" for _ in references)
        for reference, tool_name in connection.execute(
            f"SELECT part.value, o.tool_name FROM offloads o, {engine.json_refs_sql} "
            f"WHERE o.namespace = ? AND part.value IN ({marks}) ORDER BY o.id",
            (namespace, *references),
        ):
            tools[reference] = tool_name
    return {
        document: HitDetails(
            reference=reference,
            key=key,
            written_at=written_at,
            tool_name=tools.get(reference) or _tool_of_key(key),
        )
        for document, (reference, key, written_at) in first.items()
    }


# `compacted_<tool>_<32 hex>` (Haystack's compactor) and `..._<n>` for a part, with an extension.
_COMPACTED_KEY = re.compile(r"compacted_(.+)_[0-9a-f]{32}(?:_\d+)?(?:\.[A-Za-z0-9_+-]{1,16})?")


def _key_may_be_of(key: str, tool_name: str) -> bool:
    # A compactor's key names its tool whole (`compacted_read_file_<32 hex>` is read_file's, never read's); a hook's
    # key cannot be split, so one of the form `<step>_<tool_name>_...` may be that tool's.
    named = _tool_of_key(key)
    return named is None or named == tool_name


def _tool_of_key(key: str) -> str | None:
    # A hook's key, `<step>_<tool>_<call id>`, cannot be split where a name or a call id holds `_`: not guessed.
    match = _COMPACTED_KEY.fullmatch(key)
    return match.group(1) if match else None


def _digest_of(reference: object) -> str | None:
    try:
        return parse_reference(reference).digest
    except InvalidReferenceError:  # a row written by hand: not a reference this store hands out
        return None
