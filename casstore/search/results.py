"""
Ranking a search's candidates: the order in which they are read, and the score of those that hold a term.

Pure functions over what `casstore.search.candidates` found and what reading a candidate showed; the repository runs
them. Every figure they use is either the document's own (its size, how often a term occurs in it) or counted over
the searching namespace's documents alone (`NamespaceStatistics`), so another namespace's results change no score.
"""

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from casstore.search.candidates import Candidate, NamespaceStatistics
from casstore.search.exact_match import EXACT, EXACT_CASE, INSIDE, Grading

# At most this many hits holding the query whole in another case are read to tell it apart (below).
_TELL_CASE_AT_MOST = 30
# BM25's usual constants: how fast repeated occurrences stop adding to a score, and how much a long text is damped.
_K1 = 1.2
_B = 0.75


@dataclass(frozen=True, slots=True)
class SearchHit:
    """
    One result that holds at least one term: its reference in the namespace (of its first write there), the tool when
    known, when it was first written there, its size in bytes, its text, which of the query's terms it holds (as
    given), its BM25 score, and how exactly it holds the query (`casstore.search.exact_match`: `EXACT_CASE` is best).
    """

    reference: str
    tool_name: str | None
    written_at: str | None
    size: int
    text: str
    terms: tuple[str, ...]
    score: float
    exactness: int = INSIDE


@dataclass(frozen=True, slots=True)
class SearchOutcome:
    """
    What a search found: `hits`, best first, at most the limit asked for; `more_hits`, how many more results hold a
    term; `unread`, candidates not read before the search stopped (each may or may not hold a term, so there are at
    most `more_hits + unread` more); whether it stopped at its deadline; whether the store has a search index at all;
    `pending`, results written lately that it did not get to index first (so it could not find them).
    """

    enabled: bool
    hits: list[SearchHit] = field(default_factory=list)
    more_hits: int = 0
    unread: int = 0
    unreadable: int = 0
    timed_out: bool = False
    # Results of the namespace written lately and not indexed yet (the search ran out of time indexing them).
    pending: int = 0


def read_order(candidates: Sequence[Candidate], statistics: NamespaceStatistics) -> list[Candidate]:
    """
    :returns: The candidates in the order they are worth reading: those holding the rarer terms (in this namespace)
        first, then the shorter (where a term's occurrences weigh more), then by the digest's first bits, so the
        order is the same whatever order the index returned them in and whatever else was written.
    """
    if len(statistics.candidates_per_term) == 1:
        return list(candidates)  # one term: the index handed them over in this order already
    weights = [statistics.weight(term) for term in range(len(statistics.candidates_per_term))]
    return sorted(
        candidates,
        key=lambda candidate: (-sum(weights[term] for term in candidate.terms), candidate.size, candidate.tiebreak),
    )


def score(*, occurrences: dict[int, int], size: int, statistics: NamespaceStatistics) -> float:
    """
    :param occurrences: How often each term (by index) occurs in the document, for the terms it holds.
    :param size: The document's size.
    :returns: Its BM25 score, with the namespace's document count, average size and candidate counts.
    """
    average = statistics.characters / statistics.documents if statistics.documents else 1.0
    damping = _K1 * (1 - _B + _B * size / max(average, 1.0))
    return sum(
        statistics.weight(term) * count * (_K1 + 1) / (count + damping) for term, count in occurrences.items() if count
    )


def rank_candidates(found: Sequence[tuple[Candidate, SearchHit]], *, limit: int) -> tuple[list[SearchHit], int]:
    """
    :returns: The `limit` best hits, best first, and how many more there are. Hits holding more of the terms come
        first (as an agent's "where did I see X and Y" means both), then those holding the query more exactly (an
        identifier whole before the longer ones it begins; the terms as a phrase before the terms apart), then by
        BM25 score, then by reference.
    """
    ordered = sorted((hit for _, hit in found), key=hit_order)
    return ordered[:limit], max(0, len(ordered) - limit)


def hit_order(hit: SearchHit) -> tuple[int, int, float, str]:
    """:returns: The key that sorts hits best first (see `rank_candidates`)."""
    return (-len(hit.terms), hit.exactness, -hit.score, hit.reference)


def tell_case_apart(
    ranked: Sequence[SearchHit], *, grading: Grading, limit: int, read: Callable[[SearchHit], str | None]
) -> list[SearchHit]:
    """
    Tell apart, among hits graded on folded text (`EXACT` at best), those holding the query whole with its case as
    written: the hits graded `EXACT` are read best first until `limit` of them hold it so (at most
    `_TELL_CASE_AT_MOST`), and those come first.

    :param ranked: The hits, best first.
    :param read: Reads a hit's text (None if it cannot be read).
    :returns: The hits, best first, with the case told apart among those read.
    """
    refined = list(ranked)
    as_written = 0
    for index, hit in enumerate(ranked[:_TELL_CASE_AT_MOST]):
        if hit.exactness != EXACT or as_written >= limit:
            break
        text = read(hit)
        if text is not None:
            refined[index] = dataclasses.replace(hit, exactness=grading.refined(EXACT, text))
            as_written += refined[index].exactness == EXACT_CASE
    return sorted(refined, key=hit_order)
