"""
The PostgreSQL index's trigrams: `casstore.search.engine.SearchText` for the shared store, on the `pg_trgm` extension.

The tables are the baseline migration's (the same as the SQLite index's); `search_text` keeps each document's text
case-folded as Python folds it (`str.lower`, as the local store's search compares), and a GIN trigram index on it.
Unlike FTS5 without positions, a `LIKE '%term%'` over that index is exact: PostgreSQL rechecks each candidate against
the text it holds, so a search reads from the object store only the hits it shows, and counts occurrences in SQL.

A look-up is bounded by `statement_timeout`, set for the search's own read-only transaction to what is left of its
deadline: PostgreSQL cancels a statement still running then, and nothing was changed.

`pg_trgm` makes trigrams of letters and digits only (of ASCII letters, on a database whose locale is C): a term's
punctuation narrows nothing, so `get_user` has the candidates of `get` and `user`, and a term of punctuation alone
(`-=-`) of every text; PostgreSQL's recheck keeps the answer exact, and the deadline bounds its time.
"""

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg

from casstore.errors import SearchUnavailableError
from casstore.index.postgres_schema import MIGRATION_LOCK_KEY
from casstore.index.work import UnitOfWork
from casstore.search.engine import SearchTimeout
from casstore.search.exact_match import EXACT, INSIDE, SCATTERED, Grading

_TRIGRAM_INDEX = "search_text_trigrams"
# The matches first, through the trigram index (materialized, so the planner cannot turn it into a loop over the
# namespace's entries that rechecks each text), then the namespace's entries of them, the shortest first.
_CANDIDATES_SQL = """
    WITH matches AS MATERIALIZED (SELECT id FROM search_text WHERE body LIKE %s)
    SELECT e.document, e.size, e.tiebreak, count(*) OVER () FROM matches m
    JOIN search_entries e ON e.namespace = %s AND e.document = m.id
    ORDER BY e.size, e.tiebreak LIMIT %s
"""
# The same, past the last candidate handed over before (the count stays that of every candidate).
_LATER_CANDIDATES_SQL = """
    WITH matches AS MATERIALIZED (SELECT id FROM search_text WHERE body LIKE %s),
    counted AS (
        SELECT e.document, e.size, e.tiebreak, count(*) OVER () AS total FROM matches m
        JOIN search_entries e ON e.namespace = %s AND e.document = m.id
    )
    SELECT document, size, tiebreak, total FROM counted WHERE (size, tiebreak) > (%s, %s)
    ORDER BY size, tiebreak LIMIT %s
"""
# The shortest a statement timeout is set to: PostgreSQL reads 0 as "no timeout".
_LEAST_TIMEOUT_MS = 1


def folded(text: str) -> str:
    """
    :returns: `text` as `search_text` holds it and a term is compared: case-folded by `str.lower`, with NUL (which a
        PostgreSQL text cannot hold) as a space.
    """
    return text.lower().replace("\x00", " ")


def like_pattern(term: str) -> str:
    """:returns: The `LIKE` pattern of text holding `term` (folded) anywhere, its `%`, `_` and `\\` as text."""
    escaped = folded(term).replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


class TrigramText:
    """The PostgreSQL index's trigrams: `search_text` with a `pg_trgm` GIN index (see the module's docstring)."""

    exact = True
    # The id the caller's session gave its write just now; other sessions' ids (higher, maybe) are not it.
    last_write_sql = "SELECT currval(pg_get_serial_sequence('write_rows', 'id'))"
    json_refs_sql = "jsonb_array_elements_text(o.refs::jsonb) AS part(value)"
    contains_sql = "strpos({}, ?) > 0"

    def enable(self, work: UnitOfWork) -> None:
        """
        Make the `pg_trgm` extension and the trigram index, once, inside the caller's transaction (under the
        migrations' lock, so two processes turning search on at once make them once).

        :raises SearchUnavailableError: If the server has no `pg_trgm` (PostgreSQL's contrib package is not
            installed) or this user may not create it; nothing is changed then.
        """
        connection = work.connection
        connection.execute("SELECT pg_advisory_xact_lock(?)", (MIGRATION_LOCK_KEY,))
        made = connection.execute(
            "SELECT 1 FROM pg_indexes WHERE schemaname = current_schema() AND indexname = ?", (_TRIGRAM_INDEX,)
        ).fetchone()
        if made is not None:
            return
        available = connection.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'pg_trgm'").fetchone()
        if available is None:
            raise SearchUnavailableError(
                "This PostgreSQL server has no pg_trgm extension, which the shared store's search index needs: install "
                "PostgreSQL's contrib modules on the server (the package postgresql-contrib, or postgresql-15 on "
                "Debian and Ubuntu, which includes them), then turn search on again. Nothing was changed."
            )
        try:
            connection.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
        except psycopg.errors.InsufficientPrivilege as error:
            raise SearchUnavailableError(
                f"This PostgreSQL user may not create the pg_trgm extension ({error}): have the database's owner or a "
                f"superuser run CREATE EXTENSION pg_trgm in it, then turn search on again. Nothing was changed."
            ) from error
        # Without GIN's pending list: inserts cost more (after the write's commit, in the writer's batches), and the
        # index stays a third of the size it grows to with one (measured: docs/search.md).
        connection.execute(
            f"CREATE INDEX IF NOT EXISTS {_TRIGRAM_INDEX} ON search_text USING gin (body gin_trgm_ops) "
            "WITH (fastupdate = off)"
        )

    def add_text(self, work: UnitOfWork, *, document: int, text: str) -> None:
        """Add a document's folded text (and so its trigrams)."""
        work.connection.execute("INSERT INTO search_text (id, body) VALUES (?, ?)", (document, folded(text)))

    def remove_text(self, work: UnitOfWork, *, document: int, text: str | None) -> None:  # noqa: ARG002 - FTS5's need
        """Remove a document's text (PostgreSQL needs no copy of it to remove its trigrams)."""
        work.connection.execute("DELETE FROM search_text WHERE id = ?", (document,))

    def clear_text(self, work: UnitOfWork) -> None:
        """Remove every document's text."""
        work.connection.execute("DELETE FROM search_text")

    def purge(self, work: UnitOfWork) -> None:
        """Nothing to rewrite: a removed document's row is deleted (its bytes stay until `VACUUM FULL`, gc.md)."""

    def stray_rows(self, connection: Any) -> int:
        """:returns: How many texts belong to no document (none, unless a row was deleted by hand)."""
        row = connection.execute(
            "SELECT count(*) FROM search_text s WHERE NOT EXISTS (SELECT 1 FROM search_documents d WHERE d.id = s.id)"
        ).fetchone()
        return int(row[0])

    def finds(self, connection: Any, *, document: int, text: str) -> bool:
        """:returns: Whether the document's text is `text`, folded (an exact check, for `verify`)."""
        row = connection.execute("SELECT body = ? FROM search_text WHERE id = ?", (folded(text), document)).fetchone()
        return bool(row and row[0])

    def index_bytes(self, connection: Any) -> int:
        """:returns: Bytes the search index's tables take in PostgreSQL, their indexes and TOAST included."""
        row = connection.execute(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::BIGINT FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = current_schema() AND c.relkind = 'r' AND c.relname LIKE 'search\\_%%'"
        ).fetchone()
        return int(row[0])

    def term_candidates(
        self, connection: Any, *, namespace: str, term: str, limit: int, after: tuple[int, int] | None = None
    ) -> list[tuple[Any, ...]]:
        """
        :param after: `(size, tiebreak)` of the last candidate handed over before: only those after it in order.
        :returns: `(document, size, tiebreak, matches in all)` of the namespace's documents holding `term`, the
            shortest first.
        """
        if after is None:
            rows: list[tuple[Any, ...]] = connection.raw.execute(
                _CANDIDATES_SQL, (like_pattern(term), namespace, limit)
            ).fetchall()
        else:
            rows = connection.raw.execute(
                _LATER_CANDIDATES_SQL, (like_pattern(term), namespace, *after, limit)
            ).fetchall()
        return rows

    @contextmanager
    def bounded(self, connection: Any, deadline: float) -> Iterator[None]:
        """A read-only transaction whose statements PostgreSQL cancels at `deadline` (`SearchTimeout`)."""
        raw = connection.raw
        left = max(_LEAST_TIMEOUT_MS, int((deadline - time.monotonic()) * 1000))
        raw.execute("BEGIN READ ONLY")
        try:
            # Sequential scans off: a table of few, large texts looks cheaper to scan than to look up, but every text
            # scanned is decompressed and searched, where the trigram index hands over only its candidates.
            raw.execute(f"SET LOCAL statement_timeout = {left}; SET LOCAL enable_seqscan = off", prepare=False)
            yield
        except psycopg.errors.QueryCanceled as error:
            raise SearchTimeout(str(error)) from error
        finally:
            raw.execute("ROLLBACK")

    def occurrences(
        self, connection: Any, *, documents: Sequence[int], terms: Sequence[str]
    ) -> dict[int, dict[int, int]]:
        """:returns: For each of `documents`, how often each term (by index) occurs in it, for the terms it holds."""
        if not documents:
            return {}
        counts = ", ".join("(length(body) - length(replace(body, %s, ''))) / length(%s)" for _ in terms)
        parameters: list[Any] = []
        for term in terms:
            parameters.extend((folded(term), folded(term)))
        rows = connection.raw.execute(
            f"SELECT id, {counts} FROM search_text WHERE id = ANY(%s)", (*parameters, list(documents))
        ).fetchall()
        return {row[0]: {term: int(count) for term, count in enumerate(row[1:]) if count} for row in rows}

    def grades(self, connection: Any, *, documents: Sequence[int], grading: Grading) -> dict[int, int]:
        """
        :returns: For each of `documents`, how exactly its folded text holds the query (`casstore.search.exact_match`:
            `EXACT` at best, since the text here is folded).
        """
        if not documents:
            return {}
        whole, together = grading.postgres_patterns(folded)
        if together is None:
            sql = f"SELECT id, CASE WHEN body ~ %s THEN {EXACT} ELSE {INSIDE} END FROM search_text WHERE id = ANY(%s)"
            parameters: tuple[Any, ...] = (whole, list(documents))
        else:
            sql = (
                f"SELECT id, CASE WHEN body ~ %s THEN {EXACT} WHEN body ~ %s THEN {INSIDE} ELSE {SCATTERED} END "
                "FROM search_text WHERE id = ANY(%s)"
            )
            parameters = (whole, together, list(documents))
        rows = connection.raw.execute(sql, parameters).fetchall()
        return {row[0]: int(row[1]) for row in rows}


TRIGRAM_TEXT = TrigramText()
