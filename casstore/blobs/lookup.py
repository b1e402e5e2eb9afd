"""
Finding a blob: `BlobLookup` reads a blob's row (and its frame, if kept in the index) into a `BlobLocation`, the quick
part of a read, run while the caller holds the connection. A `BlobLocation` is opaque above this layer, which only
hands it back to `BlobStore.load` (`decoder.BlobDecoder.load`).
"""

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

from casstore.blobs.backend import STORED_IN_INDEX
from casstore.blobs.frames import DELTA
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
        row = connection.execute(_READABLE_SQL, (digest, namespace, *kind)).fetchone()
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
            row = connection.execute(_LOCATE_SQL, (needs,)).fetchone()
            if row is not None:
                needed = BlobLocation(needs, row[0], _kept_frame(row[1], row[2]), row[3], row[4], namespace=row[5])
        return BlobLocation(digest, size, _kept_frame(stored_in, frame), encoding, needs, needed, namespace)

    def locate(self, connection: sqlite3.Connection, digest: str) -> BlobLocation:
        """
        Find where a blob is: the quick part of a read, to run while holding the connection.

        :raises CorruptBlobError: If the index has no row for `digest` (`missing`).
        """
        row = connection.execute(_LOCATE_SQL, (digest,)).fetchone()
        if row is None:
            raise CorruptBlobError(f"Blob {digest} is missing from the index.", digest=digest, missing=True)
        size, stored_in, frame, encoding, needs, namespace = row
        return BlobLocation(digest, size, _kept_frame(stored_in, frame), encoding, needs, namespace=namespace)

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
            for digest, size, stored_in, frame, encoding, needs, namespace in connection.execute(
                f"SELECT b.digest, {_LOCATION_WITH_NAMESPACE} WHERE b.digest IN ({marks})", chunk
            ):
                found[digest] = BlobLocation(
                    digest, size, _kept_frame(stored_in, frame), encoding, needs, namespace=namespace
                )
        return found


def _kept_frame(stored_in: str, frame: bytes | None) -> bytes | None:
    # A blob kept in the index without its frame row is damage of that blob in the index: an empty frame fails to
    # decode as such (`CorruptBlobError`, not `missing`), where None would send the read looking for a file that
    # never was.
    if stored_in != STORED_IN_INDEX:
        return None
    return b"" if frame is None else frame
