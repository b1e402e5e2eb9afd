"""
A search's look-up: a namespace's documents that are candidates for its terms, and the statistics a ranking may
use, then the digests of the documents it reads.

What a namespace sees is decided here, in SQL, by its entries: candidates are only documents with an entry of the
namespace, and every statistic a ranking uses (how many results the namespace has, their bytes, how many hold a
term) is counted over those alone (`search_namespaces` keeps the first two), so no other namespace's results can
change a hit, its rank or a count.
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from casstore.search.engine import SearchText

# The candidates of one term handed to the ranking at most, the shortest first; the rest are counted.
MAX_CANDIDATES_PER_TERM = 1_000

_DOCUMENT_COUNT_SQL = "SELECT documents, bytes FROM search_namespaces WHERE namespace = ?"


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


class LaterCandidates:
    """
    The candidates of a one-term search past those `candidates` handed over, a page at a time, the shortest first:
    where a search looks on for a result holding its term whole (`casstore.search.exact_match`) while none it read
    does.
    """

    __slots__ = ("_after", "_allowed", "_engine", "_namespace", "_seen", "_term")

    def __init__(
        self,
        engine: SearchText,
        *,
        namespace: str,
        term: str,
        handed_over: Sequence[Candidate],
        allowed: set[int] | None,
    ) -> None:
        """
        :param handed_over: The term's candidates `candidates` returned (before any filter), the shortest first.
        :param allowed: The only documents to hand over (a tool's), or None for any.
        """
        self._engine = engine
        self._namespace = namespace
        self._term = term
        self._after: tuple[int, int] | None = (handed_over[-1].size, handed_over[-1].tiebreak) if handed_over else None
        self._allowed = allowed
        self._seen = {candidate.document for candidate in handed_over}

    def next_page(self, connection: Any) -> list[Candidate] | None:
        """
        :returns: The next candidates (of a tool's documents, if given), or None when none are left.
        :raises SearchTimeout: If the look-up ran past the deadline of the engine's `bounded` context.
        """
        if self._after is None:
            return None
        rows = self._engine.term_candidates(
            connection, namespace=self._namespace, term=self._term, limit=MAX_CANDIDATES_PER_TERM, after=self._after
        )
        if not rows:
            self._after = None
            return None
        self._after = (rows[-1][1], rows[-1][2])
        only = frozenset((0,))
        return [
            Candidate(row[0], row[1], row[2], only)
            for row in rows
            if row[0] not in self._seen and (self._allowed is None or row[0] in self._allowed)
        ]


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
