"""
What gc and verify ask of the catalog: which blobs nothing references (`collectable`, `waiting`), deleting them and
their frames and files (`delete_if_collectable`), the dictionaries no blob needs, what a kept blob needs, and which
files in the backend no row names (`is_stray`).

A blob gc may delete is one no write names, no kept blob is a delta on, and that was not seen within the grace
period. Methods that take a `UnitOfWork` run inside the caller's (gc's exclusive) write transaction.
"""

import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial

from casstore.blobs.backend import BlobBackend
from casstore.blobs.decoder import MAX_CHAIN
from casstore.blobs.files import BlobFile
from casstore.blobs.frames import DELTA, DICTIONARY, PLAIN
from casstore.blobs.memory import VerifiedContent
from casstore.index.work import SHIFTED_NOW_SQL, UnitOfWork, ago

# A blob is referenced while a write names it.
_REFERENCED = "SELECT 1 FROM write_rows w WHERE w.blob_id = blobs.id"
# A blob gc may delete: no write names it, no kept blob is a delta on it, and it was not seen within the grace period
# (the parameter is the grace's `ago`).
_COLLECTABLE = (
    f"last_seen <= {SHIFTED_NOW_SQL} AND NOT EXISTS ({_REFERENCED}) "
    "AND NOT EXISTS (SELECT 1 FROM blobs d WHERE d.base_id = blobs.id)"
)
# Digests per statement when a question names many (SQLite allows 32,766 parameters; PostgreSQL 65,535).
_CHUNK = 500


@dataclass(frozen=True, slots=True)
class WaitingBlobs:
    """
    Blobs no reference is visible for that the grace period keeps: how many, their stored bytes, and the earliest
    time (UTC, as the index writes times) one of them becomes collectable, None when there are none.
    """

    count: int = 0
    stored_bytes: int = 0
    collectable_from: str | None = None


class BlobCollection:
    """The catalog's questions and deletions for gc and verify."""

    def __init__(self, *, files: BlobBackend, verified: VerifiedContent) -> None:
        """
        :param files: Where blobs too large for the index are kept (a deleted blob's file or object goes too).
        :param verified: The verified dictionaries and bases in memory, forgotten when deleted.
        """
        self._files = files
        self._verified = verified
        self._stored_elsewhere = files.stored_in
        self._can_vanish = not files.rows_imply_presence

    def digests(self, connection: sqlite3.Connection) -> list[str]:
        """:returns: Every digest with a row, in order."""
        return [row[0] for row in connection.execute("SELECT digest FROM blobs ORDER BY digest")]

    def dictionary_digests(self, connection: sqlite3.Connection) -> list[str]:
        """:returns: Every trained dictionary's digest, in order."""
        return [row[0] for row in connection.execute("SELECT digest FROM dictionaries ORDER BY digest")]

    def namespaces(self, connection: sqlite3.Connection) -> dict[str, str]:
        """:returns: The namespace of every blob whose row records one (its digest keyed with that namespace's key)."""
        rows = connection.execute("SELECT digest, namespace FROM blobs WHERE namespace IS NOT NULL")
        return {str(digest): str(namespace) for digest, namespace in rows}

    def seen_times(self, connection: sqlite3.Connection) -> dict[str, tuple[str, str]]:
        """:returns: Every blob's digest with its `(first_seen, last_seen)`."""
        rows = connection.execute("SELECT digest, first_seen, last_seen FROM blobs")
        return {row[0]: (row[1], row[2]) for row in rows}

    def collectable(self, connection: sqlite3.Connection, *, grace: timedelta) -> list[tuple[str, int]]:
        """:returns: `(digest, stored_size)` of every blob no reference is visible for and not seen within `grace`."""
        rows = connection.execute(
            f"SELECT digest, stored_size FROM blobs WHERE {_COLLECTABLE}", (_grace_parameter(grace),)
        )
        return [(row[0], row[1]) for row in rows]

    def waiting(
        self, connection: sqlite3.Connection, *, grace: timedelta, among: frozenset[str] | None = None
    ) -> WaitingBlobs:
        """
        :param among: Only these digests (None: every blob).
        :returns: The blobs no reference is visible for that `grace` keeps (seen within it): how many, their stored
            bytes, and when the first of them becomes collectable.
        """
        where = f"last_seen > {SHIFTED_NOW_SQL} AND NOT EXISTS ({_REFERENCED})"
        count = stored = 0
        earliest: str | None = None
        chunks = [None] if among is None else [sorted(among)[i : i + _CHUNK] for i in range(0, len(among), _CHUNK)]
        for chunk in chunks:
            condition, parameters = where, [_grace_parameter(grace)]
            if chunk is not None:
                condition += f" AND digest IN ({', '.join('?' * len(chunk))})"
                parameters.extend(chunk)
            row = connection.execute(
                f"SELECT count(*), CAST(coalesce(sum(stored_size), 0) AS BIGINT), min(last_seen) FROM blobs "
                f"WHERE {condition}",
                parameters,
            ).fetchone()
            count, stored = count + int(row[0]), stored + int(row[1])
            if row[2] is not None and (earliest is None or row[2] < earliest):
                earliest = row[2]
        return WaitingBlobs(
            count=count,
            stored_bytes=stored,
            collectable_from=None if earliest is None else _collectable_from(earliest, grace),
        )

    def delete_rows(self, work: UnitOfWork, digests: list[str]) -> int:
        """
        Delete these blobs' rows and frames, never their files or objects, inside the caller's transaction: for a
        dry run, which rolls it back, to see what the index would take after a collection.

        :returns: The stored bytes of those kept outside the index (what their files or objects take).
        """
        outside = 0
        for digest in digests:
            row = work.connection.execute(
                "DELETE FROM blobs WHERE digest = ? RETURNING id, stored_in, stored_size", (digest,)
            ).fetchone()
            if row is None:
                continue
            work.connection.execute("DELETE FROM blob_frames WHERE blob_id = ?", (row[0],))
            if row[1] == self._stored_elsewhere:
                outside += int(row[2])
        return outside

    def delete_if_collectable(self, work: UnitOfWork, digest: str, *, grace: timedelta) -> bool:
        """
        Delete a blob, inside the caller's exclusive write transaction, if it is still collectable under that lock.

        A blob file goes before the transaction commits, so a writer that reuses the digest after the commit always
        writes a new file; a crash before the commit leaves a row without a file, which `confirm` treats as absent.
        An object (whose row a writer trusts without looking) goes only after the commit, while the transaction's
        exclusive lock is still held: a crash in between leaves an object no row points at, which gc removes later,
        never a row without its object.

        :returns: Whether the blob was deleted.
        """
        connection = work.connection
        row = connection.execute(
            f"DELETE FROM blobs WHERE digest = ? AND {_COLLECTABLE} RETURNING id, stored_in",
            (digest, _grace_parameter(grace)),
        ).fetchone()
        if row is None:
            return False
        blob_id, stored_in = row
        connection.execute("DELETE FROM blob_frames WHERE blob_id = ?", (blob_id,))
        if stored_in == self._stored_elsewhere:
            if self._can_vanish:
                self._files.remove(digest)
            else:
                work.on_commit(partial(self._files.remove, digest))
        return True

    def unneeded_dictionaries(self, work: UnitOfWork) -> int:
        """
        Delete the dictionaries no blob uses that are retired, or whose samples are all deleted (their bytes hold
        fragments of those results), inside the caller's exclusive write transaction.

        :returns: How many were deleted.
        """
        rows = work.connection.execute(
            "DELETE FROM dictionaries WHERE NOT EXISTS (SELECT 1 FROM blobs b WHERE b.dictionary_id = dictionaries.id) "
            "AND (active = 0 OR NOT EXISTS (SELECT 1 FROM dictionary_samples s JOIN blobs b ON b.digest = s.digest "
            "WHERE s.dictionary_id = dictionaries.id)) RETURNING id, digest"
        ).fetchall()
        for dictionary_id, digest in rows:
            work.connection.execute("DELETE FROM dictionary_samples WHERE dictionary_id = ?", (dictionary_id,))
            work.on_commit(partial(self._verified.forget, digest))
        return len(rows)

    def kept_for_others(self, connection: sqlite3.Connection) -> tuple[int, int]:
        """
        :returns: How many blobs no write names are kept as the delta base of a kept blob, and how many dictionaries
            trained on results that are deleted are kept because a kept blob uses them: bytes of deleted results that
            stay while needed.
        """
        (bases,) = connection.execute(
            f"SELECT count(*) FROM blobs WHERE NOT EXISTS ({_REFERENCED}) "
            "AND EXISTS (SELECT 1 FROM blobs d WHERE d.base_id = blobs.id)"
        ).fetchone()
        (dictionaries,) = connection.execute(
            "SELECT count(*) FROM dictionaries k WHERE EXISTS (SELECT 1 FROM blobs b WHERE b.dictionary_id = k.id) "
            "AND EXISTS (SELECT 1 FROM dictionary_samples s WHERE s.dictionary_id = k.id "
            "AND NOT EXISTS (SELECT 1 FROM writes w WHERE w.digest = s.digest))"
        ).fetchone()
        return int(bases), int(dictionaries)

    def dependencies(self, connection: sqlite3.Connection, digests: Iterable[str]) -> set[str]:
        """
        :returns: The digests of every blob that a blob of `digests` needs to be read (its dictionary or base, what
            those need in turn, and so on), excluding `digests` themselves unless one of them needs another.
        """
        found: set[str] = set()
        frontier = sorted(set(digests))
        for _ in range(MAX_CHAIN + 1):
            if not frontier:
                break
            needed: set[str] = set()
            for start in range(0, len(frontier), 500):
                part = frontier[start : start + 500]
                marks = ", ".join("?" * len(part))
                rows = connection.execute(
                    f"SELECT n.digest FROM blobs b JOIN blobs n ON n.id = b.base_id WHERE b.digest IN ({marks})", part
                )
                needed.update(row[0] for row in rows)
            frontier = sorted(needed - found)
            found |= needed
        return found

    def encodings(self, connection: sqlite3.Connection) -> dict[str, int]:
        """:returns: How many blobs have each encoding (`plain`, `dictionary`, `delta`), and `dictionaries` kept."""
        counts = {PLAIN: 0, DICTIONARY: 0, DELTA: 0}
        for encoding, count in connection.execute("SELECT encoding, count(*) FROM blobs GROUP BY encoding"):
            counts[encoding] = int(count)
        (dictionaries,) = connection.execute("SELECT count(*) FROM dictionaries").fetchone()
        counts["dictionaries"] = int(dictionaries)
        return counts

    def is_stray(self, connection: sqlite3.Connection, blob_file: BlobFile) -> bool:
        """:returns: Whether `blob_file` is a temporary file or a blob file that no row points at."""
        if blob_file.digest is None:
            return True
        row = connection.execute("SELECT stored_in FROM blobs WHERE digest = ?", (blob_file.digest,)).fetchone()
        return row is None or row[0] != self._stored_elsewhere


def _collectable_from(last_seen: str, grace: timedelta) -> str:
    # What the catalog's `collectable` asks, turned around: collectable once `last_seen` is `grace` old.
    when = datetime.fromisoformat(last_seen) + grace
    return when.isoformat(sep=" ", timespec="milliseconds")


def _grace_parameter(grace: timedelta) -> str:
    # Nothing is added to the grace period: no writer relies on it. A write proves its blob's row inside its own
    # transaction (the statement that appends a repeated write finds the reference through that row; any other write
    # confirms or stores the blob), and gc deletes only inside a transaction too, so with no grace period at all a
    # blob goes the moment nothing references it, and a writer that comes after stores it again.
    return ago(grace)
