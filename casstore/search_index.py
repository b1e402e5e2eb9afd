"""
The search index: the text of indexed blobs, found again by any substring of 3 or more characters.

A layer of the index database beside `index.py` (SQLite FTS5, migration 0009), run inside the repository's
transactions like the other layers. One document per blob, so identical results are one document. The FTS5 table
holds each document's trigrams, case-folded, without positions and without a copy of the text: a term's candidates
are the documents holding every trigram of it, a superset that the repository narrows by reading each candidate (the
blob, verified like any read) and keeping it only if the term is in it. Positions would have made the index twice
the size of the text; without them it is a fraction of it (docs/search.md has the measurements).

What a namespace sees is decided here, in SQL, by its entries (`search_entries`: the indexed results it holds, kept
in the transactions that write and forget them, so always a subset of what `visible_references` lets it read):
candidates are only documents with an entry of the namespace, and every statistic a ranking uses (how many results
the namespace has, their bytes, how many hold a term) is counted over those alone (`search_namespaces` keeps the
first two), so no other namespace's results can change a hit, its rank or a count.
"""

import math
import re
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from casstore.database import NOW_SQL, UnitOfWork
from casstore.errors import InvalidReferenceError
from casstore.references import parse_reference

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
_ADD_TEXT_SQL = "INSERT INTO search_text (rowid, body) VALUES (?, ?)"
# CROSS JOIN keeps SQLite's planner from looping over a namespace's entries and matching each: the matches come
# first, each looked up by key after.
# The shortest first (where a term weighs most), at most a bound, with how many there are in all.
_CANDIDATES_SQL = """
    SELECT e.document, e.size, e.tiebreak, count(*) OVER () FROM search_text s
    CROSS JOIN search_entries e ON e.namespace = ? AND e.document = s.rowid
    WHERE search_text MATCH ?
    ORDER BY e.size, e.tiebreak LIMIT ?
"""
_DOCUMENT_COUNT_SQL = "SELECT documents, bytes FROM search_namespaces WHERE namespace = ?"
# The write just recorded in the caller's transaction is the highest id. A repeat in the namespace changes nothing
# (the entry keeps the first write), so it dirties no page.
_ADD_ENTRY_SQL = """
    INSERT INTO search_entries (namespace, document, size, tiebreak, write_id)
    SELECT ?, id, size, tiebreak, (SELECT max(id) FROM writes) FROM search_documents WHERE digest = ?
    ON CONFLICT (namespace, document) DO NOTHING RETURNING size
"""
_COUNT_ENTRY_SQL = """
    INSERT INTO search_namespaces (namespace, documents, bytes) VALUES (?, 1, ?)
    ON CONFLICT (namespace) DO UPDATE SET documents = documents + 1, bytes = bytes + excluded.bytes
"""
_COUNTS_SQL = "SELECT namespace, count(*), sum(size) FROM search_entries GROUP BY namespace"


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


def enable(work: UnitOfWork) -> None:
    """Record, inside the caller's transaction, that the index is on (a search then searches instead of saying so)."""
    work.connection.execute(f"INSERT INTO search_state (id, enabled_at) VALUES (1, {NOW_SQL}) ON CONFLICT DO NOTHING")


def is_enabled(connection: sqlite3.Connection) -> bool:
    """:returns: Whether the index was ever turned on for this store."""
    return connection.execute("SELECT 1 FROM search_state WHERE id = 1").fetchone() is not None


def is_indexed(connection: sqlite3.Connection, digest: str) -> bool:
    """:returns: Whether the blob `digest` has a document."""
    return connection.execute("SELECT 1 FROM search_documents WHERE digest = ?", (digest,)).fetchone() is not None


def add(work: UnitOfWork, *, digest: str, text: str) -> bool:
    """
    Index a blob's text, inside the caller's transaction (the one that stores or records its blob), unless it is
    indexed already.

    :returns: Whether a document was added.
    """
    connection = work.connection
    row = connection.execute(
        _ADD_DOCUMENT_SQL, (digest, len(text.encode("utf-8", "surrogatepass")), tiebreak(digest))
    ).fetchone()
    if row is None:
        return False
    connection.execute(_ADD_TEXT_SQL, (row[0], text))
    return True


def add_text_write(work: UnitOfWork, *, digest: str, data: bytes) -> bool:
    """
    `add` for a text write's UTF-8 bytes, decoded only if the blob is not indexed yet: a repeated write of indexed
    text costs one look-up.

    :returns: Whether a document was added.
    """
    connection = work.connection
    row = connection.execute(_ADD_DOCUMENT_SQL, (digest, len(data), tiebreak(digest))).fetchone()
    if row is None:
        return False
    connection.execute(_ADD_TEXT_SQL, (row[0], data.decode("utf-8")))
    return True


def tiebreak(digest: str) -> int:
    """:returns: The order of documents of equal size: the digest's first 60 bits, which no write can change."""
    return int(digest[:15], 16)


def add_entry(work: UnitOfWork, *, namespace: str, digest: str) -> None:
    """
    Record, inside the transaction of the write just recorded, that `namespace` holds the indexed blob `digest`, with
    that write as its first (unless it holds it already).
    """
    connection = work.connection
    added = connection.execute(_ADD_ENTRY_SQL, (namespace, digest)).fetchone()
    if added is not None:
        connection.execute(_COUNT_ENTRY_SQL, (namespace, added[0]))


def recount(work: UnitOfWork) -> None:
    """Count every namespace's entries again, inside the caller's transaction (after entries were added or removed)."""
    work.connection.execute("DELETE FROM search_namespaces")
    work.connection.execute(f"INSERT INTO search_namespaces (namespace, documents, bytes) {_COUNTS_SQL}")


def miscounted(connection: sqlite3.Connection) -> bool:
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
        f"DELETE FROM search_entries WHERE (namespace, document) NOT IN (SELECT namespace, document FROM ({first}))"
    )
    connection.execute(
        f"UPDATE search_entries SET write_id = first.id FROM ({first}) AS first "
        "WHERE first.namespace = search_entries.namespace AND first.document = search_entries.document "
        "AND first.id <> search_entries.write_id"
    )
    recount(work)


def stray_entries(connection: sqlite3.Connection) -> int:
    """:returns: How many entries have no document, or a reference no longer visible in their namespace."""
    row = connection.execute(
        "SELECT count(*) FROM search_entries e WHERE NOT EXISTS (SELECT 1 FROM search_documents d "
        "JOIN visible_references v ON v.digest = d.digest AND v.namespace = e.namespace WHERE d.id = e.document)"
    ).fetchone()
    return int(row[0])


def remove(work: UnitOfWork, *, digest: str, text: str | None) -> bool:
    """
    Remove a blob's document, inside the caller's transaction (gc's, which deletes the blob).

    :param text: The blob's text, which FTS5 needs to delete the trigrams of a table that keeps no copy; None when
        it could not be read (a damaged blob): then only the document goes, and its trigrams stay behind, matched by
        nothing (ids are never reused), until `rebuild`. `verify` counts them.
    :returns: Whether there was a document.
    """
    connection = work.connection
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
    if text is not None:
        connection.execute("INSERT INTO search_text (search_text, rowid, body) VALUES ('delete', ?, ?)", (row[0], text))
    return True


def clear(work: UnitOfWork) -> None:
    """Remove every document and trigram, inside the caller's transaction (the start of a rebuild)."""
    connection = work.connection
    connection.execute("DELETE FROM search_documents")
    connection.execute("DELETE FROM search_entries")
    connection.execute("DELETE FROM search_namespaces")
    connection.execute("INSERT INTO search_text (search_text) VALUES ('delete-all')")


def unindexed_blobs(connection: sqlite3.Connection, *, after: str, limit: int) -> list[tuple[str, bool]]:
    """
    :returns: Up to `limit` `(digest, written_as_text)` of blobs after `after` (in digest order) that some write
        references and that have no document, for building the index in batches.
    """
    rows = connection.execute(
        "SELECT b.digest, EXISTS (SELECT 1 FROM writes w WHERE w.digest = b.digest AND w.kind = 'text') "
        "FROM blobs b WHERE b.digest > ? "
        "AND EXISTS (SELECT 1 FROM visible_references v WHERE v.digest = b.digest) "
        "AND NOT EXISTS (SELECT 1 FROM search_documents d WHERE d.digest = b.digest) "
        "ORDER BY b.digest LIMIT ?",
        (after, limit),
    )
    return [(row[0], bool(row[1])) for row in rows]


def entries(connection: sqlite3.Connection) -> list[IndexedEntry]:
    """:returns: Every document, with whether its blob row exists, in id order."""
    rows = connection.execute(
        "SELECT d.id, d.digest, EXISTS (SELECT 1 FROM blobs b WHERE b.digest = d.digest) FROM search_documents d "
        "ORDER BY d.id"
    )
    return [IndexedEntry(row[0], row[1], bool(row[2])) for row in rows]


def stray_rows(connection: sqlite3.Connection) -> int:
    """:returns: How many rows of trigrams belong to no document (left by removing a damaged blob's document)."""
    row = connection.execute(
        "SELECT count(*) FROM search_text s WHERE NOT EXISTS (SELECT 1 FROM search_documents d WHERE d.id = s.rowid)"
    ).fetchone()
    return int(row[0])


def finds(connection: sqlite3.Connection, *, document: int, text: str) -> bool:
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


def index_bytes(connection: sqlite3.Connection) -> int:
    """:returns: Bytes of the search index's tables (its trigrams and documents) in the database file."""
    try:
        row = connection.execute(
            "SELECT coalesce(sum(pgsize), 0) FROM dbstat WHERE name LIKE 'search\\_%' ESCAPE '\\' "
            "OR name LIKE 'sqlite_autoindex_search\\_%' ESCAPE '\\'"
        ).fetchone()
    except sqlite3.OperationalError:  # a SQLite built without the dbstat table
        return 0
    return int(row[0])


def candidates(
    connection: sqlite3.Connection, *, namespace: str, terms: Sequence[str], deadline: float
) -> tuple[list[Candidate], NamespaceStatistics]:
    """
    Find the namespace's documents that hold every trigram of at least one term (for each term the
    `MAX_CANDIDATES_PER_TERM` shortest), and the namespace's statistics (each term's candidates counted in full).

    :param terms: Each at least `MIN_TERM_CHARS` characters (shorter ones cannot be looked up).
    :param deadline: A `time.monotonic()` value: a look-up still running then is interrupted.
    :returns: The candidates (any order), and the statistics a ranking may use.
    :raises SearchTimeout: If the deadline passed.
    """
    found: dict[int, tuple[int, int, set[int]]] = {}
    per_term = []
    with _interrupted_at(connection, deadline):
        for position, term in enumerate(terms):
            rows = connection.execute(
                _CANDIDATES_SQL, (namespace, term_query(term), MAX_CANDIDATES_PER_TERM)
            ).fetchall()
            per_term.append(rows[0][3] if rows else 0)
            for document, size, order, _ in rows:
                entry = found.get(document)
                if entry is None:
                    found[document] = (size, order, {position})
                else:
                    entry[2].add(position)
        counts = connection.execute(_DOCUMENT_COUNT_SQL, (namespace,)).fetchone()
    count, characters = counts if counts is not None else (0, 0)
    statistics = NamespaceStatistics(documents=count, characters=characters, candidates_per_term=tuple(per_term))
    listed = [
        Candidate(document=document, size=size, tiebreak=order, terms=frozenset(positions))
        for document, (size, order, positions) in found.items()
    ]
    return listed, statistics


def term_query(term: str) -> str:
    """:returns: The FTS5 query for `term`: every trigram of it (up to a bound, spread over it), each quoted."""
    return " ".join(_quoted(trigram) for trigram in _trigrams(term))


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


def tool_digests(connection: sqlite3.Connection, *, namespace: str, tool_name: str) -> set[str]:
    """
    :returns: The digests of the namespace's results of the tool `tool_name`: those the offload history names for
        it, and those whose key has the form Haystack gives a tool's keys (`<step>_<tool>_...` from the offload hook,
        `compacted_<tool>_...` from the compactors).
    """
    pattern = re.compile(rf"(?:\d+|compacted)_{re.escape(tool_name)}_")
    rows = connection.execute(
        "SELECT DISTINCT digest, key FROM writes WHERE namespace = ? AND instr(key, ?) > 0",
        (namespace, f"_{tool_name}_"),
    )
    digests = {digest for digest, key in rows if pattern.match(key)}
    offloaded = connection.execute(
        "SELECT DISTINCT part.value FROM offloads o, json_each(o.refs) part WHERE o.namespace = ? AND o.tool_name = ?",
        (namespace, tool_name),
    )
    for (reference,) in offloaded:
        digest = _digest_of(reference)
        if digest is not None:
            digests.add(digest)
    return digests


def digest_of(connection: sqlite3.Connection, document: int) -> str | None:
    """:returns: The digest of the blob `document` indexes, or None if it is gone."""
    row = connection.execute("SELECT digest FROM search_documents WHERE id = ?", (document,)).fetchone()
    return row[0] if row else None


def documents_of(connection: sqlite3.Connection, digests: set[str]) -> set[int]:
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


def hit_details(connection: sqlite3.Connection, *, namespace: str, documents: Sequence[int]) -> dict[int, HitDetails]:
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
            f"SELECT part.value, o.tool_name FROM offloads o, json_each(o.refs) part "
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


def _tool_of_key(key: str) -> str | None:
    # A hook's key, `<step>_<tool>_<call id>`, cannot be split where a name or a call id holds `_`: not guessed.
    match = _COMPACTED_KEY.fullmatch(key)
    return match.group(1) if match else None


def _digest_of(reference: object) -> str | None:
    try:
        return parse_reference(reference).digest
    except InvalidReferenceError:  # a row written by hand: not a reference this store hands out
        return None
