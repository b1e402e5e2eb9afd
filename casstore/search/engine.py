"""
What differs between the two engines' search indexes: an engine's table of trigrams (`SearchText`), which SQLite
holds in FTS5 (`casstore.search.fts5`) and PostgreSQL in `pg_trgm` (`casstore.search.postgres`), and how a look-up
that runs past its deadline ends (`SearchTimeout`).

The SQL of the other search modules is written once for both engines (the PostgreSQL connection translates it);
only what is here differs.
"""

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from casstore.index.work import UnitOfWork
from casstore.search.exact_match import Grading

# Characters in a trigram, FTS5's `trigram` tokenizer's unit: a term shorter than this cannot be looked up.
MIN_TERM_CHARS = 3


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
    def term_candidates(
        self, connection: Any, *, namespace: str, term: str, limit: int, after: tuple[int, int] | None = None
    ) -> list[tuple[Any, ...]]: ...
    def bounded(self, connection: Any, deadline: float) -> AbstractContextManager[None]: ...
    def occurrences(
        self, connection: Any, *, documents: Sequence[int], terms: Sequence[str]
    ) -> dict[int, dict[int, int]]: ...
    def grades(self, connection: Any, *, documents: Sequence[int], grading: Grading) -> dict[int, int]: ...


class SearchTimeout(Exception):
    """A look-up ran past its deadline and was interrupted; nothing was changed."""
