"""
Finding a blob: `BlobLookup` reads a blob's row (and its frame, if kept in the index) into a `BlobLocation`, the quick
part of a read, run while the caller holds the connection. A `BlobLocation` is opaque above this layer, which only
hands it back to `BlobStore.load` (`decoder.BlobDecoder.load`).
"""

import sqlite3
from collections.abc import Sequence
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

from casstore.blobs.backend import STORED_IN_INDEX
from casstore.blobs.frames import DELTA, DICTIONARY
from casstore.blobs.memory import ContentCache
from casstore.errors import CorruptBlobError
from casstore.references import reference_kind

# `blobs.encoding` is 'plain', 'dictionary' or 'delta'; above this layer a plain frame's encoding is None.

# Where a blob is and how to decode it: its row, its frame if kept in the index, and the digest of what a learned
# frame needs (its dictionary's, or its base's).
_LOCATION = (
    "b.size, b.stored_in, f.frame, NULLIF(b.encoding, 'plain'), coalesce(k.digest, n.digest) FROM blobs b "
    "LEFT JOIN blob_frames f ON f.blob_id = b.id LEFT JOIN dictionaries k ON k.id = b.dictionary_id "
    "LEFT JOIN blobs n ON n.id = b.base_id"
)
# The same with the blob's own `namespace` last: under `namespace` dedup scope, whose key its digest is keyed with.
_LOCATION_WITH_NAMESPACE = _LOCATION.replace(" FROM blobs b", ", b.namespace FROM blobs b")
# A read: whether the reference is visible in its namespace (a `writes` row names it) and where its blob is, in one
# statement, so a read sees both in one state of the index.
_READABLE_SQL = (
    f"SELECT {_LOCATION_WITH_NAMESPACE} WHERE b.digest = ? "
    "AND EXISTS (SELECT 1 FROM write_rows w WHERE w.blob_id = b.id AND w.namespace = ? AND w.kind = ? "
    "AND w.extension = ?)"
)
# Asked only when a read found nothing: whether the reference is visible all the same, its blob row missing (a damaged
# index).
_VISIBLE_SQL = "SELECT 1 FROM writes WHERE digest = ? AND namespace = ? AND kind = ? AND extension = ? LIMIT 1"
_LOCATE_SQL = f"SELECT {_LOCATION_WITH_NAMESPACE} WHERE b.digest = ?"


@dataclass(slots=True)
class BlobLocation:
    """Where a blob is, as `locate` found it: opaque above this layer, which only hands it back to `load`."""

    digest: str
    size: int
    frame: bytes | None
    encoding: str | None = None
    needs: str | None = None
    needed: "BlobLocation | None" = None
    """Where the blob it needs is, when the read's look-up found that too (a delta's base not in memory)."""
    namespace: str | None = None
    """Under `namespace` dedup scope, the namespace whose key `digest` is keyed with (None: a plain digest)."""
    damage: str | None = None
    """Why the blob's row cannot be decoded (a value of the wrong type or unknown): `load` raises it as damage."""


class BlobLookup:
    """Where blobs are, from their rows in `blobs` and `blob_frames`."""

    def __init__(self, cache: ContentCache) -> None:
        """:param cache: The verified bases in memory: a read's look-up skips a delta's base found there."""
        self._cache = cache

    def locate_readable(
        self, connection: sqlite3.Connection, digest: str, namespace: str, reference: str
    ) -> BlobLocation | None:
        """
        `locate`, for a read of `reference` in `namespace`, in one statement that also asks whether a `writes` row of
        the namespace names it, so a read sees both in one consistent state of the index. This is the one place the
        blob layer asks about visibility (besides gc's question of what nothing references). Only when it finds
        nothing is a second question asked: whether the reference is visible without its blob row.

        :returns: None if the reference is not visible in `namespace`.
        :raises CorruptBlobError: If it is visible but the index has no row for its blob (`missing`).
        """
        kind = reference_kind(reference)
        try:
            row = _fetch_one(connection, _READABLE_SQL, (digest, namespace, *kind))
        except _UnreadableRowError as error:
            return _unreadable(digest, error)  # a row was found: the reference is visible
        if row is None:
            if connection.execute(_VISIBLE_SQL, (digest, namespace, *kind)).fetchone() is None:
                return None
            raise CorruptBlobError(f"Blob {digest} is missing from the index.", digest=digest, missing=True)
        size, stored_in, frame, encoding, needs, namespace = row
        if size is None:
            raise CorruptBlobError(f"Blob {digest} is missing from the index.", digest=digest, missing=True)
        needed = None
        if encoding == DELTA and needs is not None and self._cache.get(DELTA, needs) is None:
            # A delta's base not in memory is looked up on the same connection, in the same state of the index: a
            # dictionary is nearly always in memory once read, a base far less often.
            try:
                row = _fetch_one(connection, _LOCATE_SQL, (needs,))
            except _UnreadableRowError as error:
                needed = _unreadable(needs, error)
            else:
                needed = None if row is None else _location(needs, row)
        location = _location(digest, (size, stored_in, frame, encoding, needs, namespace))
        location.needed = needed
        return location

    def locate(self, connection: sqlite3.Connection, digest: str) -> BlobLocation:
        """
        Find where a blob is: the quick part of a read, to run while holding the connection.

        :raises CorruptBlobError: If the index has no row for `digest` (`missing`).
        """
        try:
            row = _fetch_one(connection, _LOCATE_SQL, (digest,))
        except _UnreadableRowError as error:
            return _unreadable(digest, error)
        if row is None:
            raise CorruptBlobError(f"Blob {digest} is missing from the index.", digest=digest, missing=True)
        return _location(digest, row)

    def locate_many(self, connection: sqlite3.Connection, digests: Sequence[str]) -> dict[str, BlobLocation]:
        """
        `locate` for several blobs in one statement per 500 (a search's candidates).

        :returns: Where each of `digests` that has a row in the index is; a digest without one is left out (its read
            would be `missing`).
        """
        found: dict[str, BlobLocation] = {}
        listed = list(dict.fromkeys(digests))
        for start in range(0, len(listed), 500):
            chunk = listed[start : start + 500]
            marks = ", ".join("?" for _ in chunk)
            try:
                rows = _fetch_all(
                    connection, f"SELECT b.digest, {_LOCATION_WITH_NAMESPACE} WHERE b.digest IN ({marks})", chunk
                )
            except _UnreadableRowError:
                # One row SQLite cannot hand over: each blob of the chunk on its own, that one damaged.
                for digest in chunk:
                    with suppress(CorruptBlobError):  # no row: left out, as above
                        found[digest] = self.locate(connection, digest)
                continue
            for digest, *row in rows:
                found[digest] = _location(digest, row)
        return found


# SQLite's driver refuses a TEXT value that is not UTF-8 (a frame cast to TEXT by hand): the whole row is lost.
_UNDECODABLE = "Could not decode to UTF-8"


class _UnreadableRowError(Exception):
    """A blob's row that the driver cannot hand over (a TEXT value that is not UTF-8)."""


def _fetch_one(connection: sqlite3.Connection, sql: str, parameters: Sequence[object]) -> tuple[Any, ...] | None:
    """:raises _UnreadableRowError: If the row found cannot be read."""
    try:
        row: tuple[Any, ...] | None = connection.execute(sql, parameters).fetchone()
    except sqlite3.OperationalError as error:
        if _UNDECODABLE not in str(error):
            raise
        raise _UnreadableRowError(str(error)) from error
    return row


def _fetch_all(connection: sqlite3.Connection, sql: str, parameters: Sequence[object]) -> list[tuple[Any, ...]]:
    """:raises _UnreadableRowError: If a row found cannot be read."""
    try:
        return list(connection.execute(sql, parameters).fetchall())
    except sqlite3.OperationalError as error:
        if _UNDECODABLE not in str(error):
            raise
        raise _UnreadableRowError(str(error)) from error


def _unreadable(digest: str, error: _UnreadableRowError) -> BlobLocation:
    return BlobLocation(
        digest,
        0,
        None,
        damage=f"Blob {digest} cannot be decoded: its row cannot be read ({error}; the index is damaged).",
    )


# What `blobs.stored_in` may say: the index, or a backend's blobs (a store's own backend reads only its own).
_STORED_IN = (STORED_IN_INDEX, "file", "object")


def _location(digest: str, row: Sequence[Any]) -> BlobLocation:
    """
    A blob's location from its row, each value checked for its type: a row damaged by hand (`UPDATE blob_frames SET
    frame = 'text'`, a CHECK bypassed) stores whatever it was given, and such a value must read as damage of the blob
    (`CorruptBlobError` from `load`, reported by `verify`), never reach the decoder as something it cannot take.
    """
    size, stored_in, frame, encoding, needs, namespace = row
    damage = _damage(row)
    if damage is not None:
        return BlobLocation(
            digest, 0, None, damage=f"Blob {digest} cannot be decoded: {damage} (the index is damaged)."
        )
    return BlobLocation(digest, size, _kept_frame(stored_in, frame), encoding, needs, namespace=namespace)


def _damage(row: Sequence[object]) -> str | None:
    """:returns: What is wrong with a blob's row, or None if every value is of its type and known."""
    size, stored_in, frame, encoding, needs, namespace = row
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        return f"its size in the table blobs is {_shown(size)}, not a count of bytes"
    if stored_in not in _STORED_IN:
        return f"its stored_in in the table blobs is {_shown(stored_in)}, not one of {', '.join(_STORED_IN)}"
    if stored_in == STORED_IN_INDEX and frame is not None and not isinstance(frame, bytes):
        return f"its frame in the table blob_frames is {_shown(frame)}, not bytes"
    if encoding not in (None, DICTIONARY, DELTA):
        return f"its encoding in the table blobs is {_shown(encoding)}, not plain, dictionary or delta"
    if needs is not None and not isinstance(needs, str):
        return f"the digest of the blob or dictionary it needs is {_shown(needs)}, not text"
    if namespace is not None and not isinstance(namespace, str):
        return f"its namespace in the table blobs is {_shown(namespace)}, not text"
    return None


# A value's SQL type, as `typeof()` names it: what the one who damaged the row wrote.
_SQL_TYPES = {str: "TEXT", int: "INTEGER", float: "REAL", bytes: "BLOB", type(None): "NULL"}


def _shown(value: object) -> str:
    """:returns: A damaged value as a message shows it: its SQL type and, if short, the value itself."""
    kind = _SQL_TYPES.get(type(value), type(value).__name__)
    shown = repr(value)
    return f"{kind} {shown if len(shown) <= 40 else shown[:36] + '...'}"


def _kept_frame(stored_in: str, frame: bytes | None) -> bytes | None:
    # A blob kept in the index without its frame row is damage of that blob in the index: an empty frame fails to
    # decode as such (`CorruptBlobError`, not `missing`), where None would send the read looking for a file that
    # never was.
    if stored_in != STORED_IN_INDEX:
        return None
    return b"" if frame is None else frame
