"""
What the search index holds: one document per blob (`search_documents`; identical results are one document), and
each namespace's entries (`search_entries`: the indexed results it holds, with their first write there), with the
per-namespace counts a ranking uses (`search_namespaces`).

Entries are kept in the transactions that write and forget results, so they are always a subset of what a
namespace's `writes` rows let it read. Every function here runs inside the caller's transaction (a `UnitOfWork`) or
reads through its connection; the engine's trigrams are added and removed through its `SearchText`.
"""

from dataclasses import dataclass
from typing import Any

from casstore.index.work import NOW_SQL, UnitOfWork
from casstore.search.engine import SearchText

_ADD_DOCUMENT_SQL = (
    "INSERT INTO search_documents (digest, size, tiebreak) VALUES (?, ?, ?) ON CONFLICT (digest) DO NOTHING "
    "RETURNING id"
)

# A repeat in the namespace changes nothing (the entry keeps the first write), so it dirties no page.
_ADD_ENTRY_SQL = """
    INSERT INTO search_entries (namespace, document, size, tiebreak, write_id)
    SELECT ?, id, size, tiebreak, ? FROM search_documents WHERE digest = ?
    ON CONFLICT (namespace, document) DO NOTHING RETURNING size
"""

_COUNT_ENTRY_SQL = """
    INSERT INTO search_namespaces (namespace, documents, bytes) VALUES (?, 1, ?)
    ON CONFLICT (namespace) DO UPDATE SET documents = search_namespaces.documents + 1,
        bytes = search_namespaces.bytes + excluded.bytes
"""

_COUNTS_SQL = "SELECT namespace, count(*), sum(size) FROM search_entries GROUP BY namespace"


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


def enable(work: UnitOfWork, engine: SearchText) -> None:
    """
    Record, inside the caller's transaction, that the index is on (a search then searches instead of saying so), and
    have the engine make what it makes only then.

    :raises SearchUnavailableError: If the engine cannot (a PostgreSQL server without `pg_trgm`).
    """
    engine.enable(work)
    work.connection.execute(f"INSERT INTO search_state (id, enabled_at) VALUES (1, {NOW_SQL}) ON CONFLICT DO NOTHING")


def is_enabled(connection: Any) -> bool:
    """:returns: Whether the index was ever turned on for this store."""
    return connection.execute("SELECT 1 FROM search_state WHERE id = 1").fetchone() is not None


def is_indexed(connection: Any, digest: str) -> bool:
    """:returns: Whether the blob `digest` has a document."""
    return connection.execute("SELECT 1 FROM search_documents WHERE digest = ?", (digest,)).fetchone() is not None


def add(work: UnitOfWork, engine: SearchText, *, digest: str, text: str) -> bool:
    """
    Index a blob's text, inside the caller's transaction, unless it is indexed already.

    :returns: Whether a document was added.
    """
    row = work.connection.execute(
        _ADD_DOCUMENT_SQL, (digest, len(text.encode("utf-8", "surrogatepass")), tiebreak(digest))
    ).fetchone()
    if row is None:
        return False
    engine.add_text(work, document=row[0], text=text)
    return True


def tiebreak(digest: str) -> int:
    """:returns: The order of documents of equal size: the digest's first 60 bits, which no write can change."""
    return int(digest[:15], 16)


def add_entry(work: UnitOfWork, *, namespace: str, digest: str, write_id: int) -> None:
    """
    Record, inside the caller's transaction, that `namespace` holds the indexed blob `digest`, first written there by
    the write `write_id` (unless it holds it already).
    """
    connection = work.connection
    added = connection.execute(_ADD_ENTRY_SQL, (namespace, write_id, digest)).fetchone()
    if added is not None:
        connection.execute(_COUNT_ENTRY_SQL, (namespace, added[0]))


def recount(work: UnitOfWork) -> None:
    """Count every namespace's entries again, inside the caller's transaction (after entries were added or removed)."""
    work.connection.execute("DELETE FROM search_namespaces")
    work.connection.execute(f"INSERT INTO search_namespaces (namespace, documents, bytes) {_COUNTS_SQL}")


def miscounted(connection: Any) -> bool:
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
    # One indexed look-up per entry (document, its blob by digest, a write of the entry's namespace naming it): a
    # `NOT IN` over the set of (namespace, document) pairs took time quadratic in the entries on SQLite.
    connection.execute(
        "DELETE FROM search_entries WHERE NOT EXISTS (SELECT 1 FROM search_documents d "
        "JOIN blobs b ON b.digest = d.digest "
        "JOIN write_rows w ON w.blob_id = b.id AND w.namespace = search_entries.namespace "
        "WHERE d.id = search_entries.document)"
    )
    connection.execute(
        f"UPDATE search_entries SET write_id = first.id FROM ({first}) AS first "
        "WHERE first.namespace = search_entries.namespace AND first.document = search_entries.document "
        "AND first.id <> search_entries.write_id"
    )
    # A pending result whose first write was forgotten: the first write left, or nothing to index.
    connection.execute(
        "UPDATE search_pending SET write_id = coalesce((SELECT min(w.id) FROM writes w WHERE w.namespace = "
        "search_pending.namespace AND w.digest = search_pending.digest), 0) "
        "WHERE NOT EXISTS (SELECT 1 FROM writes w WHERE w.id = search_pending.write_id)"
    )
    connection.execute("DELETE FROM search_pending WHERE write_id = 0")
    recount(work)


def unreferenced_documents(connection: Any, *, after: str, limit: int) -> list[str]:
    """
    :returns: Up to `limit` digests after `after` (in digest order) of documents no write references any more: blobs
        gc keeps (a kept delta's base, or within the grace period) or deleted, whose text the index must not keep.
    """
    rows = connection.execute(
        "SELECT d.digest FROM search_documents d WHERE d.digest > ? "
        "AND NOT EXISTS (SELECT 1 FROM blobs b JOIN write_rows w ON w.blob_id = b.id WHERE b.digest = d.digest) "
        "ORDER BY d.digest LIMIT ?",
        (after, limit),
    )
    return [row[0] for row in rows]


def is_referenced(connection: Any, digest: str) -> bool:
    """:returns: Whether some write references the blob `digest`."""
    row = connection.execute(
        "SELECT 1 FROM blobs b JOIN write_rows w ON w.blob_id = b.id WHERE b.digest = ? LIMIT 1", (digest,)
    ).fetchone()
    return row is not None


def stray_entries(connection: Any) -> int:
    """:returns: How many entries have no document, or a reference no longer visible in their namespace."""
    row = connection.execute(
        "SELECT count(*) FROM search_entries e WHERE NOT EXISTS (SELECT 1 FROM search_documents d "
        "JOIN writes w ON w.digest = d.digest AND w.namespace = e.namespace WHERE d.id = e.document)"
    ).fetchone()
    return int(row[0])


def remove(work: UnitOfWork, engine: SearchText, *, digest: str, text: str | None) -> bool:
    """
    Remove a blob's document and its pending rows, inside the caller's transaction (gc's, which deletes the blob).

    :param text: The blob's text, which FTS5 needs to delete the trigrams of a table that keeps no copy; None when
        it could not be read (a damaged blob): then only the document goes, and its trigrams stay behind, matched by
        nothing (ids are never reused), until `rebuild`. `verify` counts them.
    :returns: Whether there was a document.
    """
    connection = work.connection
    work.change("DELETE FROM search_pending WHERE digest = ?", (digest,))
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
    engine.remove_text(work, document=row[0], text=text)
    return True


def clear(work: UnitOfWork, engine: SearchText) -> None:
    """Remove every document and trigram, inside the caller's transaction (the start of a rebuild)."""
    connection = work.connection
    connection.execute("DELETE FROM search_documents")
    connection.execute("DELETE FROM search_entries")
    connection.execute("DELETE FROM search_namespaces")
    engine.clear_text(work)


def unindexed_blobs(connection: Any, *, after: str, limit: int | None) -> list[tuple[str, bool]]:
    """
    :returns: Up to `limit` `(digest, written_as_text)` of blobs after `after` (in digest order) that some write
        references and that have no document, for building the index in batches.
    """
    rows = connection.execute(
        "SELECT b.digest, EXISTS (SELECT 1 FROM writes w WHERE w.digest = b.digest AND w.kind = 'text') "
        "FROM blobs b WHERE b.digest > ? "
        "AND EXISTS (SELECT 1 FROM writes w WHERE w.digest = b.digest) "
        "AND NOT EXISTS (SELECT 1 FROM search_documents d WHERE d.digest = b.digest) "
        "ORDER BY b.digest" + ("" if limit is None else " LIMIT ?"),
        (after,) if limit is None else (after, limit),
    )
    return [(row[0], bool(row[1])) for row in rows]


def entries(connection: Any) -> list[IndexedEntry]:
    """:returns: Every document, with whether its blob row exists, in id order."""
    rows = connection.execute(
        "SELECT d.id, d.digest, EXISTS (SELECT 1 FROM blobs b WHERE b.digest = d.digest) FROM search_documents d "
        "ORDER BY d.id"
    )
    return [IndexedEntry(row[0], row[1], bool(row[2])) for row in rows]
