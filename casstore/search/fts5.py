"""
The SQLite index's trigrams: `Fts5Text`, the `casstore.search.engine.SearchText` of a local store.

An FTS5 table (`tokenize='trigram'`) holds each document's trigrams, case-folded, without positions and without a
copy of the text: a term's candidates are the documents holding every trigram of it, a superset that the repository
narrows by reading each candidate (the blob, verified like any read) and keeping it only if the term is in it.
Positions would have made the index twice the size of the text; without them it is a fraction of it (docs/search.md
has the measurements).

Here too is how one term is looked up (its plan: a rare term's matches joined to the namespace's entries, a common
one's by walking the namespace's entries in size order), and how a look-up is bounded in time (SQLite's progress
handler).
"""

import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from casstore.index.work import UnitOfWork
from casstore.search.engine import MIN_TERM_CHARS, SearchTimeout
from casstore.search.exact_match import Grading

# The trigrams of one term that a look-up asks for, spread over the term: more add work and hardly narrow it.
_MAX_TRIGRAMS = 24

# SQLite virtual machine steps between two checks of the deadline.
_PROGRESS_STEPS = 2_000

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
# matches are counted, and its shortest are taken by walking its entries in size order (`search_entries_in_order`),
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
    WHERE e.namespace = ? AND e.size >= ? AND (e.size, e.tiebreak) > (?, ?)
    AND e.document IN (SELECT rowid FROM search_text WHERE search_text MATCH ?)
    ORDER BY e.size, e.tiebreak LIMIT ?
"""


def _tokenized(text: str) -> str:
    """
    :returns: `text` as FTS5 is given it: FTS5 reads a value only up to its first NUL, so each NUL is a space (a
        term holds none); a removal passes the same, as FTS5 needs the very trigrams it was given.
    """
    return text.replace("\x00", " ") if "\x00" in text else text


def _as_indexed(connection: Any, document: int, text: str) -> str:
    """
    :returns: `text` as it was given to FTS5 when its document was indexed, which a removal must give again: with each
        NUL a space, or (indexed by an earlier build of casstore, which gave it whole) up to its first NUL, as FTS5
        then read it. The document's count of trigrams (`search_text_docsize`) tells which.
    """
    tokenized = _tokenized(text)
    if tokenized is text:
        return text
    head = text[: text.index("\x00")]
    row = connection.execute("SELECT sz FROM search_text_docsize WHERE id = ?", (document,)).fetchone()
    if row is not None and _varint(row[0]) == max(0, len(head) - 2) != max(0, len(tokenized) - 2):
        return head
    return tokenized


def _varint(data: bytes) -> int:
    # SQLite's variable-length integer: 7 bits a byte, high bit set on all but the last (the ninth takes 8).
    value = 0
    for index, byte in enumerate(data[:9]):
        if index == 8:
            return (value << 8) | byte
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            break
    return value


class Fts5Text:
    """The SQLite index's trigrams: an FTS5 table (`tokenize='trigram'`, no positions, no copy of the text)."""

    exact = False
    # Writers are serialized by SQLite's write lock: the highest id is the caller's write.
    last_write_sql = "SELECT max(id) FROM write_rows"
    json_refs_sql = "json_each(o.refs) part"
    contains_sql = "instr({}, ?) > 0"

    def enable(self, work: UnitOfWork) -> None:
        """Nothing to make: the baseline migration made the FTS5 table."""

    def add_text(self, work: UnitOfWork, *, document: int, text: str) -> None:
        """Add a document's trigrams."""
        work.connection.execute("INSERT INTO search_text (rowid, body) VALUES (?, ?)", (document, _tokenized(text)))

    def remove_text(self, work: UnitOfWork, *, document: int, text: str | None) -> None:
        """Remove a document's trigrams (FTS5 needs the text they came from; without it they stay, matched by none)."""
        if text is not None:
            work.connection.execute(
                "INSERT INTO search_text (search_text, rowid, body) VALUES ('delete', ?, ?)",
                (document, _as_indexed(work.connection, document, text)),
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

    def term_candidates(
        self, connection: Any, *, namespace: str, term: str, limit: int, after: tuple[int, int] | None = None
    ) -> list[tuple[Any, ...]]:
        """
        :param after: `(size, tiebreak)` of the last candidate handed over before: only those after it in order (a
            later page: up to `limit`, and not counted again, so their last column is None).
        :returns: `(document, size, tiebreak, candidates in all)` of documents holding every trigram of `term`, the
            shortest first.
        """
        query = term_query(term)
        matches, listed = connection.execute(_FTS5_MATCHES_SQL, (query, _FTS5_MANY_MATCHES + 1)).fetchone()
        if matches <= _FTS5_MANY_MATCHES:
            found = connection.execute(_FTS5_ENTRIES_SQL, (listed, namespace)).fetchall()
            found.sort(key=_in_order)
            later = found if after is None else [row for row in found if _in_order(row) > after]
            return [(*row, len(found)) for row in later[:limit]]
        if after is not None:
            rows = connection.execute(_FTS5_SHORTEST_SQL, (namespace, after[0], *after, query, limit))
            return [(*row, None) for row in rows]
        (every,) = connection.execute(_HOLDS_EVERY_DOCUMENT_SQL, (namespace,)).fetchone()
        if every:
            (count,) = connection.execute(_FTS5_ALL_MATCHES_SQL, (query,)).fetchone()
        else:
            (count,) = connection.execute(_FTS5_COUNT_SQL, (namespace, query)).fetchone()
        shortest = connection.execute(
            _FTS5_SHORTEST_SQL, (namespace, -1, -1, -1, query, min(limit, _FTS5_MANY_CANDIDATES))
        )
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
    # As the text was indexed (a NUL a space): FTS5 reads a query, too, only up to its first NUL.
    term = _tokenized(term)
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
