"""
When a result is indexed: writes with the index on do not index their text in their own transaction. They record a
row of `search_pending` (one insert), and the text is indexed after the commit, in batches of a transaction each
(`index_pending`), by the writer from the texts it keeps in memory (`WrittenTexts`), or by whatever indexes next
after a crash: a search of the namespace, or `casstore search-index` (docs/search.md).
"""

import threading
from dataclasses import dataclass
from typing import Any

from casstore.index.work import UnitOfWork
from casstore.search.documents import add, add_entry
from casstore.search.engine import SearchText

# A pending row of the write just recorded in the caller's transaction (the engine's `last_write_sql` names it); a
# repeat keeps the first.
_ADD_PENDING_SQL = (
    "INSERT INTO search_pending (namespace, digest, write_id) VALUES (?, ?, ({})) "
    "ON CONFLICT (namespace, digest) DO NOTHING"
)


def add_pending(work: UnitOfWork, engine: SearchText, *, namespace: str, digest: str) -> None:
    """
    Record, inside the transaction of the write just recorded, that its result waits to be indexed (one insert; a
    repeat changes nothing).
    """
    work.change(_ADD_PENDING_SQL.format(engine.last_write_sql), (namespace, digest))


@dataclass(frozen=True, slots=True)
class PendingEntry:
    """A result waiting to be indexed: its namespace and digest, and whether a write of it was text."""

    namespace: str
    digest: str
    written_as_text: bool


def pending(connection: Any, *, namespace: str | None, limit: int) -> list[PendingEntry]:
    """:returns: Up to `limit` results waiting to be indexed (of `namespace`, or of all), in digest order."""
    where = "WHERE p.namespace = ?" if namespace is not None else ""
    rows = connection.execute(
        "SELECT p.namespace, p.digest, EXISTS (SELECT 1 FROM writes w WHERE w.id = p.write_id AND w.kind = 'text') "
        f"FROM search_pending p {where} ORDER BY p.digest, p.namespace LIMIT ?",
        (*((namespace,) if namespace is not None else ()), limit),
    )
    return [PendingEntry(row[0], row[1], bool(row[2])) for row in rows]


def pending_count(connection: Any, *, namespace: str | None) -> int:
    """:returns: How many results wait to be indexed (of `namespace`, or of all)."""
    if namespace is None:
        row = connection.execute("SELECT count(*) FROM search_pending").fetchone()
    else:
        row = connection.execute("SELECT count(*) FROM search_pending WHERE namespace = ?", (namespace,)).fetchone()
    return int(row[0])


def index_pending(work: UnitOfWork, engine: SearchText, *, namespace: str, digest: str, text: str | None) -> bool:
    """
    Index one pending result inside the caller's transaction: its document (from `text`, unless the blob is indexed
    already), the namespace's entry with the first write the pending row names (if its reference is still visible
    there), and the pending row removed.

    :param text: The result's text, or None if it is not text (binary content that is not UTF-8) or unreadable: then
        the row is only removed.
    :returns: Whether the row was still there (another process may have indexed it meanwhile).
    """
    connection = work.connection
    row = connection.execute(
        "DELETE FROM search_pending WHERE namespace = ? AND digest = ? RETURNING write_id", (namespace, digest)
    ).fetchone()
    if row is None:
        return False
    if text is None:
        return True
    add(work, engine, digest=digest, text=text)
    visible = connection.execute(
        "SELECT 1 FROM writes WHERE digest = ? AND namespace = ? LIMIT 1", (digest, namespace)
    ).fetchone()
    if visible is not None:
        add_entry(work, namespace=namespace, digest=digest, write_id=int(row[0]))
    return True


@dataclass(frozen=True, slots=True)
class WrittenText:
    """A result this process wrote with the index on, kept until it is indexed: its namespace, digest and text."""

    namespace: str
    digest: str
    text: str


class WrittenTexts:
    """
    The texts a process wrote with the index on and has not indexed yet, in memory, so that indexing them after their
    commit reads no blob back. Thread-safe; bounded (`due` says when a batch is worth a transaction).
    """

    # A batch: this many results, or this many characters of text, whichever comes first.
    BATCH_RESULTS = 64
    BATCH_CHARACTERS = 1_000_000

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._texts: list[WrittenText] = []
        self._characters = 0

    def add(self, text: WrittenText) -> None:
        """Keep `text` until the next batch."""
        with self._lock:
            self._texts.append(text)
            self._characters += len(text.text)

    @property
    def due(self) -> bool:
        """Whether enough is waiting for a batch."""
        return len(self._texts) >= self.BATCH_RESULTS or self._characters >= self.BATCH_CHARACTERS

    def __len__(self) -> int:
        return len(self._texts)

    def take(self) -> list[WrittenText]:
        """:returns: Everything waiting, in digest order (the order rows are locked in), which is no longer kept."""
        with self._lock:
            texts, self._texts, self._characters = self._texts, [], 0
        return sorted(texts, key=lambda text: (text.digest, text.namespace))
