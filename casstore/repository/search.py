"""`repository.search`: searching a namespace's results, and building and checking the search index."""

import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from casstore import search as search_index
from casstore.errors import CasStoreError, CorruptBlobError
from casstore.repository.candidates import CandidateReading
from casstore.repository.core import ROWS_PER_TRANSACTION, RepositoryCore
from casstore.repository.indexing import SearchIndexing
from casstore.search import IndexedEntry, searchable_text
from casstore.search.results import SearchOutcome, read_order


@dataclass(frozen=True, slots=True)
class SearchCheck:
    """
    The search index checked against the blobs: `documents` checked; documents whose blob row is gone
    (`without_blob`) or whose trigrams do not hold their blob's text (`mismatched`); rows of trigrams that belong to
    no document (`stray_rows`, left by gc removing a damaged blob's document). Any of these is repaired by
    `build(rebuild=True)`.
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


class Search:
    """The search index (`casstore.search`): searches, its build, its check."""

    def __init__(self, core: RepositoryCore, *, indexing: SearchIndexing) -> None:
        self._core = core
        self._index = core.index
        self._database = core.database
        self._blobs = core.blobs
        self._guard = core.guard
        self._search_text = core.search_text
        self._indexing = indexing
        self._candidates = CandidateReading(core)

    def find(
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
            if not self._core.searchable:
                return SearchOutcome(enabled=False)
            engine = self._search_text
            with self._index() as connection:
                if not search_index.is_enabled(connection):
                    return SearchOutcome(enabled=False)
            try:
                pending = self._indexing.catch_up(namespace=namespace, deadline=deadline)
            except self._database.failures as error:
                raise self._core.engine_failed(error) from error
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
            # A one-term search may look past the candidates handed over for a result holding its term whole.
            later = (
                search_index.LaterCandidates(
                    engine, namespace=namespace, term=terms[0], handed_over=candidates, allowed=allowed
                )
                if len(terms) == 1 and statistics.candidates_per_term[0] > len(candidates)
                else None
            )
            if allowed is not None:
                candidates = [candidate for candidate in candidates if candidate.document in allowed]
            read = self._candidates.rank_exact if engine.exact else self._candidates.read_candidates
            outcome = read(
                namespace=namespace,
                terms=terms,
                tool_name=tool_name,
                ordered=read_order(candidates, statistics),
                statistics=statistics,
                limit=limit,
                deadline=deadline,
                later=later,
            )
            return dataclasses.replace(outcome, pending=pending) if pending else outcome

    def build(self, *, rebuild: bool = False, progress: Callable[[int, int], None] | None = None) -> tuple[int, int]:
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
        if not self._core.searchable:
            raise CasStoreError(f"The {self._database.kind} at {self._database.description} has no search index.")
        indexed = skipped = 0
        with self._guard.held():
            with self._database.transaction() as work:
                search_index.enable(work, self._search_text)
                if rebuild:
                    search_index.clear(work, self._search_text)
            self._indexing.catch_up(namespace=None, deadline=None)  # what writers left pending, entries included
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

    def check(self) -> SearchCheck:
        """:returns: The search index checked against the blobs (each document's blob re-read); see `SearchCheck`."""
        if not self._core.searchable:
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

    def index_bytes(self) -> int:
        """:returns: Bytes the search index's tables take in the index (0 where there is none)."""
        if not self._core.searchable:
            return 0
        with self._index() as connection:
            return self._search_text.index_bytes(connection)
