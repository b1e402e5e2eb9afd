"""
How a search of the `Repository` reads its candidates: every one, or enough of the best placed to rank the hits
shown (`read_candidates`); or, for an engine whose candidates hold their terms for certain, only the hits shown
(`rank_exact`).
"""

import dataclasses
import time
from collections.abc import Sequence

from casstore import search as search_index
from casstore.errors import CorruptBlobError
from casstore.references import parse_reference
from casstore.repository.core import RepositoryCore, lost_blobs
from casstore.search.exact_match import EXACT, INSIDE, Grading
from casstore.search.results import SearchHit, SearchOutcome, hit_order, rank_candidates, score, tell_case_apart

# A search reads every candidate when there are at most this many; otherwise this many per hit asked for, and at
# least the second figure, best placed first.
_READ_ALL_CANDIDATES = 100
_READ_PER_HIT = 3
_READ_AT_LEAST = 30
# The bytes of candidates one search reads at most (past the first): a few huge results would cost more than the rest.
_READ_BYTES = 16 * 1024 * 1024
# While none of the candidates read holds the query whole (`casstore.search.exact_match`), reading goes on past
# the budget above, up to this many candidates: an identifier's exact result may be longer than many that hold
# longer tokens.
_LOOK_FOR_WHOLE = 300


class CandidateReading:
    """A search's candidates read from the blobs (each verified, as any read), scored and ranked."""

    def __init__(self, core: RepositoryCore) -> None:
        self._core = core
        self._index = core.index
        self._blobs = core.blobs
        self._search_text = core.search_text

    def rank_exact(
        self,
        *,
        namespace: str,
        terms: Sequence[str],
        tool_name: str | None,
        ordered: list[search_index.Candidate],
        statistics: search_index.NamespaceStatistics,
        limit: int,
        deadline: float,
    ) -> SearchOutcome:
        """:returns: The hits among `ordered` (best placed first), for an engine whose candidates hold their terms."""
        # An engine whose candidates hold their terms for certain (PostgreSQL's, which rechecks them against its copy
        # of the text): the best-placed ones are scored from occurrences counted in SQL, and only the hits shown are
        # read from the blobs, for their lines.
        budget = len(ordered) if len(ordered) <= _READ_ALL_CANDIDATES else max(_READ_PER_HIT * limit, _READ_AT_LEAST)
        scored = ordered[:budget]
        engine = self._search_text
        grading = Grading.of(terms)
        try:
            with self._index() as connection, engine.bounded(connection, deadline):
                counted = engine.occurrences(
                    connection, documents=[candidate.document for candidate in scored], terms=terms
                )
                # With more hits than the answer lists, PostgreSQL grades them to choose those it lists; otherwise
                # every hit is read below anyway, and graded there (a statement less, and no regular expression run
                # over a long text that holds no whole match).
                graded = len(counted) > limit or len(ordered) > len(scored)
                grades = engine.grades(connection, documents=list(counted), grading=grading) if graded else {}
                if graded and EXACT not in grades.values() and len(ordered) > len(scored):
                    # None scored holds the query whole: the next candidates may (as the local store reads on).
                    further = ordered[len(scored) : _LOOK_FOR_WHOLE]
                    further_grades = engine.grades(connection, documents=[c.document for c in further], grading=grading)
                    whole = [candidate for candidate in further if further_grades.get(candidate.document) == EXACT]
                    if whole:
                        counted.update(
                            engine.occurrences(connection, documents=[c.document for c in whole], terms=terms)
                        )
                        grades.update(further_grades)
                        scored = [*scored, *whole]
        except search_index.SearchTimeout:
            return SearchOutcome(enabled=True, timed_out=True)
        found = [(candidate, counted[candidate.document]) for candidate in scored if counted.get(candidate.document)]
        with self._index() as connection:
            details = search_index.hit_details(
                connection, engine, namespace=namespace, documents=[candidate.document for candidate, _ in found]
            )
        hits = []
        for candidate, occurrences in found:
            detail = details.get(candidate.document)
            if detail is None:
                continue  # forgotten meanwhile
            hit = SearchHit(
                reference=detail.reference,
                tool_name=detail.tool_name or tool_name,
                written_at=detail.written_at,
                size=candidate.size,
                text="",
                terms=tuple(terms[term] for term in sorted(occurrences)),
                score=score(occurrences=occurrences, size=candidate.size, statistics=statistics),
                exactness=grades.get(candidate.document, INSIDE),
            )
            hits.append((candidate, hit))
        ranked, _ = rank_candidates(hits, limit=len(hits))
        loaded: dict[str, str | None] = {}

        def read(hit: SearchHit) -> str | None:
            if hit.reference not in loaded:
                loaded[hit.reference] = self._hit_text(hit.reference)
            return loaded[hit.reference]

        if graded:  # PostgreSQL graded folded texts: the case is told apart on the texts as written
            ranked = tell_case_apart(ranked, grading=grading, limit=limit, read=read)
        shown, more = ranked[:limit], max(0, len(ranked) - limit)
        texts = []
        unreadable = 0
        for hit in shown:
            text = read(hit)
            if text is None:
                unreadable += 1
                continue
            exactness = hit.exactness if graded else grading.grade(text, text.lower())
            texts.append(dataclasses.replace(hit, text=text, exactness=exactness))
        texts.sort(key=hit_order)
        beyond = max(len(ordered), statistics.most_candidates) if tool_name is None else len(ordered)
        return SearchOutcome(
            enabled=True,
            hits=texts,
            # Every candidate past those scored holds a term (the engine rechecked it), so it counts as a hit.
            more_hits=more + len(ordered) - len(scored),
            unread=beyond - len(ordered),
            unreadable=unreadable,
        )

    def read_candidates(
        self,
        *,
        namespace: str,
        terms: Sequence[str],
        tool_name: str | None,
        ordered: list[search_index.Candidate],
        statistics: search_index.NamespaceStatistics,
        limit: int,
        deadline: float,
    ) -> SearchOutcome:
        """:returns: The hits among `ordered` (best placed first), each candidate read to find its terms."""
        # Every candidate is read when there are few; otherwise enough of the best-placed ones to rank the hits shown
        # among several times as many (more while fewer hits than asked for were found: a term whose trigrams are
        # common has many candidates that do not hold it), within a budget of bytes, and the rest are counted unread.
        # Every term is looked for in each text read, so the terms a hit holds are exact whatever the index handed over.
        budget = len(ordered) if len(ordered) <= _READ_ALL_CANDIDATES else max(_READ_PER_HIT * limit, _READ_AT_LEAST)
        folded = [term.lower() for term in terms]
        grading = Grading.of(terms)
        found: list[tuple[search_index.Candidate, str, dict[int, int], int]] = []
        read = unreadable = bytes_read = 0
        timed_out = whole = False
        # The digests and locations of the candidates within the budget, in two look-ups (the rest, if read, one by
        # one).
        with self._index() as connection:
            digests = search_index.digests_of(connection, [candidate.document for candidate in ordered[:budget]])
            locations = self._blobs.locate_many(connection, list(digests.values()))
        for candidate in ordered:
            if read >= budget and len(found) >= limit and (whole or read >= _LOOK_FOR_WHOLE):
                break  # past the budget, reading goes on only while too few hits, or none whole, were found
            if time.monotonic() > deadline:
                timed_out = True
                break
            if read and bytes_read + candidate.size > _READ_BYTES:
                break
            read += 1
            bytes_read += candidate.size
            try:
                digest = digests.get(candidate.document)
                location = locations.get(digest) if digest is not None else None
                if location is None:
                    with self._index() as connection:
                        digest = digest or search_index.digest_of(connection, candidate.document)
                        if digest is None:
                            continue  # collected meanwhile
                        location = self._blobs.locate(connection, digest)
                text = self._blobs.load(location, guarded=False).decode("utf-8", "replace")
            except CorruptBlobError as error:
                unreadable += self._found_lost(error)
                continue
            lowered = text.lower()
            occurrences = {}
            for term, word in enumerate(folded):
                count = lowered.count(word)
                if count:
                    occurrences[term] = count
            if occurrences:
                grade = grading.grade(text, lowered)
                whole = whole or grade <= EXACT
                found.append((candidate, text, occurrences, grade))
        with self._index() as connection:
            details = search_index.hit_details(
                connection,
                self._search_text,
                namespace=namespace,
                documents=[candidate.document for candidate, _, _, _ in found],
            )
        hits = []
        for candidate, text, occurrences, grade in found:
            detail = details.get(candidate.document)
            if detail is None:
                continue  # forgotten meanwhile
            hit = SearchHit(
                reference=detail.reference,
                tool_name=detail.tool_name or tool_name,
                written_at=detail.written_at,
                size=candidate.size,
                text=text,
                terms=tuple(terms[term] for term in sorted(occurrences)),
                score=score(occurrences=occurrences, size=candidate.size, statistics=statistics),
                exactness=grade,
            )
            hits.append((candidate, hit))
        shown, more = rank_candidates(hits, limit=limit)
        return SearchOutcome(
            enabled=True,
            hits=shown,
            more_hits=more,
            # Past the per-term bound, the candidates not handed over are counted too (a tool's filter saw them all).
            unread=(len(ordered) if tool_name is not None else max(len(ordered), statistics.most_candidates)) - read,
            unreadable=unreadable,
            timed_out=timed_out,
        )

    def _hit_text(self, reference: str) -> str | None:
        # A hit's text, read and verified as any read; None if its blob is damaged or gone.
        try:
            with self._index() as connection:
                location = self._blobs.locate(connection, parse_reference(reference).digest)
            return self._blobs.load(location, guarded=False).decode("utf-8", "replace")
        except CorruptBlobError as error:
            self._found_lost(error)
            return None

    def _found_lost(self, error: CorruptBlobError) -> int:
        """Record a blob found missing or damaged, so the next write of it stores it again (as after a read): 1."""
        self._core.mark_lost(lost_blobs(error))
        return 1
