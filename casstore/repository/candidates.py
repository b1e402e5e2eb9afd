"""
How a search of the `Repository` reads its candidates: every one, or enough of the best placed to rank the hits
shown (`read_candidates`); or, for an engine whose candidates hold their terms for certain, only the hits shown
(`rank_exact`).
"""

import dataclasses
import time
from collections.abc import Callable, Iterator, Sequence

from casstore import search as search_index
from casstore.blobs.lookup import BlobLocation
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
# the budget above, through every candidate handed over and then (a one-term search) the term's later ones, page by
# page, for this long at most: an identifier's exact result may be longer than thousands that hold longer tokens.
_LOOK_FOR_WHOLE_SECONDS = 0.25


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
        later: search_index.LaterCandidates | None = None,
    ) -> SearchOutcome:
        """
        :param later: The candidates past `ordered`, looked through while none holds the query whole.
        :returns: The hits among `ordered` (best placed first), for an engine whose candidates hold their terms.
        """
        # An engine whose candidates hold their terms for certain (PostgreSQL's, which rechecks them against its copy
        # of the text): the best-placed ones are scored from occurrences counted in SQL, and only the hits shown are
        # read from the blobs, for their lines.
        budget = len(ordered) if len(ordered) <= _READ_ALL_CANDIDATES else max(_READ_PER_HIT * limit, _READ_AT_LEAST)
        scored = ordered[:budget]
        engine = self._search_text
        grading = Grading.of(terms)
        look_until = time.monotonic() + _LOOK_FOR_WHOLE_SECONDS
        timed_out = False
        try:
            with self._index() as connection, engine.bounded(connection, deadline):
                counted = engine.occurrences(
                    connection, documents=[candidate.document for candidate in scored], terms=terms
                )
                # With more hits than the answer lists, PostgreSQL grades them to choose those it lists; otherwise
                # every hit is read below anyway, and graded there (a statement less, and no regular expression run
                # over a long text that holds no whole match).
                graded = len(counted) > limit or len(ordered) > len(scored) or later is not None
                grades = engine.grades(connection, documents=list(counted), grading=grading) if graded else {}
                if graded and EXACT not in grades.values() and len(ordered) > len(scored):
                    # None scored holds the query whole: the other candidates may (as the local store reads on).
                    further = ordered[len(scored) :]
                    scored = [
                        *scored,
                        *self._whole_among(
                            connection, further, terms=terms, grading=grading, counted=counted, grades=grades
                        ),
                    ]
        except search_index.SearchTimeout:
            return SearchOutcome(enabled=True, timed_out=True)
        of_ordered = len(scored)
        if later is not None and EXACT not in grades.values():
            # Still none whole: the term's later candidates, a page at a time, for a while.
            whole, timed_out = self._later_whole(
                later, terms=terms, grading=grading, counted=counted, grades=grades, until=(look_until, deadline)
            )
            scored = [*scored, *whole]
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
            more_hits=more + len(ordered) - of_ordered,
            unread=max(0, beyond - len(ordered)),
            unreadable=unreadable,
            timed_out=timed_out,
        )

    def _later_whole(
        self,
        later: search_index.LaterCandidates,
        *,
        terms: Sequence[str],
        grading: Grading,
        counted: dict[int, dict[int, int]],
        grades: dict[int, int],
        until: tuple[float, float],
    ) -> tuple[list[search_index.Candidate], bool]:
        """
        :param until: When to stop looking, and the search's deadline.
        :returns: The first page's candidates holding the query whole (their grades and counts added), and whether
            the deadline stopped the look.
        """
        look_until, deadline = until
        try:
            with self._index() as connection, self._search_text.bounded(connection, deadline):
                while time.monotonic() <= look_until:
                    page = later.next_page(connection)
                    if page is None:
                        break
                    whole = self._whole_among(
                        connection, page, terms=terms, grading=grading, counted=counted, grades=grades
                    )
                    if whole:
                        return whole, False
        except search_index.SearchTimeout:
            return [], True
        return [], False

    def _whole_among(
        self,
        connection: object,
        candidates: Sequence[search_index.Candidate],
        *,
        terms: Sequence[str],
        grading: Grading,
        counted: dict[int, dict[int, int]],
        grades: dict[int, int],
    ) -> list[search_index.Candidate]:
        """:returns: Those of `candidates` holding the query whole, graded in SQL; their grades and counts added."""
        engine = self._search_text
        found = engine.grades(connection, documents=[candidate.document for candidate in candidates], grading=grading)
        whole = [candidate for candidate in candidates if found.get(candidate.document) == EXACT]
        if whole:
            counted.update(engine.occurrences(connection, documents=[c.document for c in whole], terms=terms))
            grades.update(found)
        return whole

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
        later: search_index.LaterCandidates | None = None,
    ) -> SearchOutcome:
        """
        :param later: The candidates past `ordered`, read while none read holds the query whole.
        :returns: The hits among `ordered` (best placed first), each candidate read to find its terms.
        """
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
        look_until = time.monotonic() + _LOOK_FOR_WHOLE_SECONDS
        # The digests and locations of the candidates within the budget, in two look-ups (the rest, if read, a chunk
        # at a time; a later page's, two look-ups a page).
        located = _Located(self._core)
        located.add(ordered[:budget])
        to_read = self._to_read(
            ordered,
            later,
            located,
            located_first=budget,
            deadline=deadline,
            looking=lambda: not whole and time.monotonic() <= look_until,
        )
        try:
            for candidate in to_read:
                if read >= budget and len(found) >= limit and (whole or time.monotonic() > look_until):
                    break  # past the budget, reading goes on only while too few hits, or none whole, were found
                if time.monotonic() > deadline:
                    timed_out = True
                    break
                if read and bytes_read + candidate.size > _READ_BYTES:
                    break
                read += 1
                bytes_read += candidate.size
                try:
                    text = located.text_of(candidate)
                except CorruptBlobError as error:
                    unreadable += self._found_lost(error)
                    continue
                if text is None:
                    continue  # collected meanwhile
                lowered = text.lower()
                occurrences = {term: count for term, word in enumerate(folded) if (count := lowered.count(word))}
                if occurrences:
                    grade = grading.grade(text, lowered)
                    whole = whole or grade <= EXACT
                    found.append((candidate, text, occurrences, grade))
        except search_index.SearchTimeout:  # looking up a later page
            timed_out = True
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
            unread=max(
                0, (len(ordered) if tool_name is not None else max(len(ordered), statistics.most_candidates)) - read
            ),
            unreadable=unreadable,
            timed_out=timed_out,
        )

    def _to_read(
        self,
        ordered: Sequence[search_index.Candidate],
        later: search_index.LaterCandidates | None,
        located: "_Located",
        *,
        located_first: int,
        deadline: float,
        looking: Callable[[], bool],
    ) -> Iterator[search_index.Candidate]:
        """
        :param located_first: How many of `ordered` were located already; the rest are, a chunk at a time.
        :returns: `ordered`, then the later candidates, a page at a time while `looking()` when a page is due.
        :raises SearchTimeout: If looking up a page ran past `deadline`.
        """
        yield from ordered[:located_first]
        for start in range(located_first, len(ordered), _READ_ALL_CANDIDATES):
            chunk = ordered[start : start + _READ_ALL_CANDIDATES]
            located.add(chunk)
            yield from chunk
        while later is not None and looking():
            with self._index() as connection, self._search_text.bounded(connection, deadline):
                page = later.next_page(connection)
            if page is None:
                return
            located.add(page)
            yield from page

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


class _Located:
    """Where the blobs of candidates to read are: looked up a batch at a time (`add`), else one by one."""

    def __init__(self, core: RepositoryCore) -> None:
        self._index = core.index
        self._blobs = core.blobs
        self._digests: dict[int, str] = {}
        self._locations: dict[str, BlobLocation] = {}

    def add(self, candidates: Sequence[search_index.Candidate]) -> None:
        """Look up the digests and locations of `candidates`, in two statements."""
        with self._index() as connection:
            digests = search_index.digests_of(connection, [candidate.document for candidate in candidates])
            self._locations.update(self._blobs.locate_many(connection, list(digests.values())))
        self._digests.update(digests)

    def text_of(self, candidate: search_index.Candidate) -> str | None:
        """
        :returns: The candidate's text, read and verified as any read; None if it was collected meanwhile.
        :raises CorruptBlobError: If its blob is missing or damaged.
        """
        digest = self._digests.get(candidate.document)
        location = self._locations.get(digest) if digest is not None else None
        if location is None:
            with self._index() as connection:
                digest = digest or search_index.digest_of(connection, candidate.document)
                if digest is None:
                    return None
                location = self._blobs.locate(connection, digest)
        return self._blobs.load(location, guarded=False).decode("utf-8", "replace")
