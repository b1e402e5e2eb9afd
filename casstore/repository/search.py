"""The search part of the `Repository`: searching a namespace's results, building and checking the search index."""

import dataclasses
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from casstore import search as search_index
from casstore.errors import CasStoreError, CorruptBlobError, StoreClosedError
from casstore.index.database import UnitOfWork
from casstore.references import parse_reference
from casstore.repository.core import ROWS_PER_TRANSACTION, RepositoryCore
from casstore.search.documents import IndexedEntry, searchable_text
from casstore.search.exact_match import EXACT, INSIDE, Grading
from casstore.search.results import (
    SearchHit,
    SearchOutcome,
    hit_order,
    rank_candidates,
    read_order,
    score,
    tell_case_apart,
)

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

_logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SearchCheck:
    """
    The search index checked against the blobs: `documents` checked; documents whose blob row is gone
    (`without_blob`) or whose trigrams do not hold their blob's text (`mismatched`); rows of trigrams that belong to
    no document (`stray_rows`, left by gc removing a damaged blob's document). Any of these is repaired by
    `build_search_index(rebuild=True)`.
    """

    documents: int = 0
    without_blob: int = 0
    mismatched: int = 0
    stray_rows: int = 0
    stray_entries: int = 0

    @property
    def consistent(self) -> bool:
        """:returns: Whether every document matches its blob and nothing is left over."""
        return not (self.without_blob or self.mismatched or self.stray_rows or self.stray_entries)


class SearchIndexing(RepositoryCore):
    """The search index (`casstore.search`): searches, its build, its check."""

    def search(
        self, *, namespace: str, terms: Sequence[str], tool_name: str | None, limit: int, seconds: float
    ) -> SearchOutcome:
        """
        Find the namespace's text results that hold any of `terms` (each a case-insensitive substring of at least
        `search_index.MIN_TERM_CHARS` characters), best first.

        Candidates come from the search index; each is read (and its digest checked, as any read) and kept only if a
        term is in it. Ranking uses only the namespace's own results.

        :param tool_name: Only results of this tool (see `search_index.tool_digests`).
        :param limit: At most this many hits.
        :param seconds: The search answers with what it has after about this long.
        :returns: The hits and what more there is; `enabled=False` if the store has no search index.
        """
        deadline = time.monotonic() + seconds
        with self._guard.held():
            if not self._searchable:
                return SearchOutcome(enabled=False)
            engine = self._search_text
            with self._index() as connection:
                if not search_index.is_enabled(connection):
                    return SearchOutcome(enabled=False)
            try:
                pending = self._catch_up(namespace=namespace, deadline=deadline)
            except self._database.failures as error:
                raise self._engine_failed(error) from error
            try:
                with self._index() as connection:
                    allowed = (
                        search_index.documents_of(
                            connection,
                            search_index.tool_digests(connection, engine, namespace=namespace, tool_name=tool_name),
                        )
                        if tool_name is not None
                        else None
                    )
                    candidates, statistics = search_index.candidates(
                        connection, engine, namespace=namespace, terms=terms, deadline=deadline
                    )
            except search_index.SearchTimeout:
                return SearchOutcome(enabled=True, timed_out=True, pending=pending)
            if allowed is not None:
                candidates = [candidate for candidate in candidates if candidate.document in allowed]
            read = self._rank_exact if engine.exact else self._read_candidates
            outcome = read(
                namespace=namespace,
                terms=terms,
                tool_name=tool_name,
                ordered=read_order(candidates, statistics),
                statistics=statistics,
                limit=limit,
                deadline=deadline,
            )
            return dataclasses.replace(outcome, pending=pending) if pending else outcome

    def _rank_exact(
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

    def _hit_text(self, reference: str) -> str | None:
        # A hit's text, read and verified as any read; None if its blob is damaged or gone.
        try:
            with self._index() as connection:
                location = self._blobs.locate(connection, parse_reference(reference).digest)
            return self._blobs.load(location, guarded=False).decode("utf-8", "replace")
        except CorruptBlobError:
            return None

    def _read_candidates(
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
            except CorruptBlobError:
                unreadable += 1
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

    def build_search_index(
        self, *, rebuild: bool = False, progress: Callable[[int, int], None] | None = None
    ) -> tuple[int, int]:
        """
        Turn the search index on and index every stored result that has no document yet (all of them, with
        `rebuild`), in batches of one transaction each: a crash keeps what committed, and running it again goes on.

        :param rebuild: Remove every document first (after a `verify` that found the index inconsistent).
        :param progress: Called as `progress(done, total)` after each batch (`total` is what is left at the start).
        :returns: How many blobs were indexed, and how many were skipped (binary content that is not text, or
            unreadable).
        :raises CasStoreError: If this store's index has no search index.
        :raises SearchUnavailableError: If its engine cannot hold one (a PostgreSQL server without `pg_trgm`).
        """
        if not self._searchable:
            raise CasStoreError(f"The {self._database.kind} at {self._database.description} has no search index.")
        indexed = skipped = 0
        with self._guard.held():
            with self._database.transaction() as work:
                search_index.enable(work, self._search_text)
                if rebuild:
                    search_index.clear(work, self._search_text)
            self._catch_up(namespace=None, deadline=None)  # what writers left pending, entries included
            with self._index() as connection:
                total = len(search_index.unindexed_blobs(connection, after="", limit=None))
            after = ""
            while True:
                with self._index() as connection:
                    batch = search_index.unindexed_blobs(connection, after=after, limit=ROWS_PER_TRANSACTION)
                if not batch:
                    break
                after = batch[-1][0]
                texts: list[tuple[str, str]] = []
                for digest, written_as_text in batch:
                    try:
                        with self._index() as connection:
                            location = self._blobs.locate(connection, digest)
                        text = searchable_text(self._blobs.load(location, guarded=False), is_text=written_as_text)
                    except CorruptBlobError:
                        text = None
                    if text is None:
                        skipped += 1
                    else:
                        texts.append((digest, text))
                with self._database.transaction() as work:
                    for digest, text in texts:
                        if search_index.add(work, self._search_text, digest=digest, text=text):
                            indexed += 1
                if progress is not None:
                    progress(indexed + skipped, total)
            with self._database.transaction() as work:
                search_index.add_missing_entries(work)
        return indexed, skipped

    def check_search_index(self) -> SearchCheck:
        """:returns: The search index checked against the blobs (each document's blob re-read); see `SearchCheck`."""
        if not self._searchable:
            return SearchCheck()
        with self._guard.held():
            with self._index() as connection:
                documents: list[IndexedEntry] = search_index.entries(connection)
                stray = self._search_text.stray_rows(connection)
                stray_entries = search_index.stray_entries(connection) + search_index.miscounted(connection)
            without_blob = mismatched = 0
            for entry in documents:
                if not entry.has_blob:
                    without_blob += 1
                    continue
                try:
                    with self._index() as connection:
                        location = self._blobs.locate(connection, entry.digest)
                    text = self._blobs.load(location, guarded=False).decode("utf-8", "replace")
                except CorruptBlobError:
                    continue  # verify reports the blob itself
                with self._index() as connection:
                    if not self._search_text.finds(connection, document=entry.document, text=text):
                        mismatched += 1
        return SearchCheck(
            documents=len(documents),
            without_blob=without_blob,
            mismatched=mismatched,
            stray_rows=stray,
            stray_entries=stray_entries,
        )

    def search_index_bytes(self) -> int:
        """:returns: Bytes the search index's tables take in the index (0 where there is none)."""
        if not self._searchable:
            return 0
        with self._index() as connection:
            return self._search_text.index_bytes(connection)

    def _indexed_text(self, work: UnitOfWork, digest: str) -> tuple[bool, str | None]:
        # What gc needs to remove a blob's document: whether there is one, and the text its trigrams came from.
        if not self._searchable or not search_index.is_indexed(work.connection, digest):
            return False, None
        try:
            data = self._blobs.load(self._blobs.locate(work.connection, digest), guarded=False)
        except CorruptBlobError:
            return True, None
        return True, data.decode("utf-8", "replace")

    # Indexing what writes left pending (`search_index.add_pending`).

    def _index_written_texts(self) -> None:
        # After commits, in the writer, in one short transaction of its own: the texts this process wrote. A failure
        # fails no write (they committed): it is logged, and their pending rows wait for the next search or build.
        texts = self._written_texts.take()
        if not texts:
            return
        failures: tuple[type[Exception], ...] = (CasStoreError, *self._failures)
        try:
            with self._database.transaction() as work:
                for text in texts:
                    search_index.index_pending(
                        work, self._search_text, namespace=text.namespace, digest=text.digest, text=text.text
                    )
        except failures as error:
            _logger.warning(
                "casstore could not index %d written result(s) for search (%s); the next search indexes them",
                len(texts),
                error,
            )

    def _catch_up(self, *, namespace: str | None, deadline: float | None) -> int:
        """
        Index what waits to be indexed, of `namespace` (or of all): this process's texts first, then the pending rows
        any writer left (a crash, another process), each blob read back, in batches of a transaction each.

        :returns: How many results of `namespace` still wait (the deadline came first).
        """
        self._index_written_texts()
        # A read-only index cannot take what waits: it stays pending, and is counted.
        while not self.read_only and (deadline is None or time.monotonic() < deadline):
            with self._index() as connection:
                rows = search_index.pending(connection, namespace=namespace, limit=ROWS_PER_TRANSACTION)
            if not rows:
                return 0
            texts = [(entry, self._stored_text(entry.digest, written_as_text=entry.written_as_text)) for entry in rows]
            try:
                with self._database.transaction() as work:
                    for entry, text in texts:
                        search_index.index_pending(
                            work, self._search_text, namespace=entry.namespace, digest=entry.digest, text=text
                        )
            except self._database.conflicts:
                break  # PostgreSQL broke a deadlock with another process indexing them: they stay pending, counted
        with self._index() as connection:
            return search_index.pending_count(connection, namespace=namespace)

    def _stored_text(self, digest: str, *, written_as_text: bool) -> str | None:
        # A blob's text as the index takes it, read back and verified; None if it is not text, gone or damaged.
        try:
            with self._index() as connection:
                location = self._blobs.locate(connection, digest)
            return searchable_text(self._blobs.load(location, guarded=False), is_text=written_as_text)
        except CorruptBlobError:
            return None

    def close(self) -> None:
        """
        Index what this process wrote and has not indexed yet, then close (see `RepositoryCore.close`). A failure to
        index is logged; the results' pending rows wait for the next search or build.
        """
        if len(self._written_texts):
            try:
                with self._guard.held():
                    self._index_written_texts()
            except StoreClosedError:
                pass
        super().close()
