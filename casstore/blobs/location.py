"""
Where a shared store's blob objects are, recorded in its index, so that a mistyped `blob_url` fails as a typo and
never reads as lost data.

When a shared store is made, its index records a random `store_id` and its `blob_url` (table `store_settings`), and a
marker object at that location, `<prefix>/casstore-store.json`, names the store id. Opening the store with another
location then fails at once, naming both, before any blob is looked for; a location that holds another store's marker
is refused too, as each index's gc removes the objects it has no row for. Blobs moved on purpose (every object under
the prefix, the marker with them) are recorded with `relocate_blobs` (`casstore relocate-blobs`), which first checks
that the marker at the new location names this store.

The order keeps one promise: a recorded location has its marker. The marker is written first, the location recorded
after it; a store interrupted between the two writes the same marker again the next time it opens.
"""

import json
import uuid
from typing import Any, Protocol

from casstore.blobs.object_checks import first_write_advice
from casstore.errors import BlobLocationError, StorageError

MARKER_NAME = "casstore-store.json"
"""The marker object's name under the prefix (outside `blake3/`, so gc never lists or removes it)."""
_MARKER_ATTEMPTS = 5
_RECORD = "INSERT INTO store_settings (name, value) VALUES (?, ?) ON CONFLICT (name) DO NOTHING"
_SETTINGS = "SELECT name, value FROM store_settings WHERE name IN ('store_id', 'blob_url')"
# The first blob kept as an object: if it is not at a location, no blob of this index is.
_FIRST_OBJECT_BLOB = "SELECT digest FROM blobs WHERE stored_in = 'object' ORDER BY id LIMIT 1"


class _Connection(Protocol):
    def execute(self, sql: str, parameters: Any = ()) -> Any: ...


class _Objects(Protocol):
    url: str

    def read_name(self, name: str) -> bytes | None: ...

    def create_name(self, name: str, data: bytes) -> bool: ...

    def exists(self, digest: str) -> bool: ...


def settle(connection: _Connection, objects: _Objects, *, index: str) -> None:
    """
    Check the location `objects` opened against the one the index records; for a store being made (or made by a
    release that recorded none), mark the location and record it.

    :param connection: A connection to the index, each statement committed on its own.
    :param objects: The blob objects at the location given.
    :param index: The index, for messages and the marker (no password).
    :raises BlobLocationError: If the index records another location, or the location holds another store's blobs,
        or (an index that recorded none) the index's object blobs are not there. Nothing is changed then.
    :raises StorageError: If the object store fails while the location is marked.
    """
    recorded = _settings(connection)
    if "blob_url" in recorded:
        _check_same(recorded["blob_url"], objects.url)
        return
    store_id = recorded.get("store_id")
    if store_id is None:
        connection.execute(_RECORD, ("store_id", uuid.uuid4().hex))
        store_id = _settings(connection)["store_id"]  # a store made at the same moment elsewhere may have won
    first = connection.execute(_FIRST_OBJECT_BLOB).fetchone()
    if first is not None and not objects.exists(first[0]):
        raise BlobLocationError(
            f"No casstore blobs at {objects.url}: the index at {index} keeps blobs as objects and records no location "
            "for them (it was made by an older casstore), and its first one is not there. Open the store with the URL "
            "its blobs are at."
        )
    _mark(objects, store_id=store_id, index=index)
    connection.execute(_RECORD, ("blob_url", _normal(objects.url)))
    _check_same(_settings(connection)["blob_url"], objects.url)  # another opener may have recorded another one


def relocate(connection: _Connection, objects: _Objects, *, index: str) -> str:
    """
    Record that the store's blobs are now at the location `objects` opened, after checking the marker there.

    :returns: The location recorded before.
    :raises BlobLocationError: If the index records no location yet (open the store to record one), or the new
        location has no marker naming this store, or the index's first object blob is not there.
    """
    recorded = _settings(connection)
    if "blob_url" not in recorded:
        raise BlobLocationError(
            f"The index at {index} records no blob location yet: open the store once with its blob URL to record it."
        )
    old = recorded["blob_url"]
    marker = objects.read_name(MARKER_NAME)
    if marker is None or _marked_store(marker) != recorded["store_id"]:
        found = "no marker" if marker is None else f"the marker of another store ({_describe_marker(marker)})"
        raise BlobLocationError(
            f"{objects.url} has {found}, so the blobs were not moved there: copy every object under {old} (its "
            f"{MARKER_NAME} too) to {objects.url}, then run this again."
        )
    first = connection.execute(_FIRST_OBJECT_BLOB).fetchone()
    if first is not None and not objects.exists(first[0]):
        raise BlobLocationError(
            f"{objects.url} has this store's marker but not its blob {first[0]}: finish copying every object under "
            f"{old}, then run this again."
        )
    connection.execute("UPDATE store_settings SET value = ? WHERE name = 'blob_url'", (_normal(objects.url),))
    return old


def _settings(connection: _Connection) -> dict[str, str]:
    return {str(name): str(value) for name, value in connection.execute(_SETTINGS).fetchall()}


def _normal(url: str) -> str:
    scheme, separator, rest = url.partition("://")
    return f"{scheme.lower()}{separator}{rest}".rstrip("/")


def _check_same(recorded: str, given: str) -> None:
    if _normal(given) != _normal(recorded):
        raise BlobLocationError(
            f"No casstore blobs at {given}; this index's blobs are at {recorded}. Open the store with that blob URL "
            "(blob_url, --blobs or CASSTORE_BLOB_URL); if the blobs were moved on purpose, record their new place with "
            "casstore relocate-blobs."
        )


def _mark(objects: _Objects, *, store_id: str, index: str) -> None:
    """Write the marker naming `store_id` unless it is there; refuse a location marked by another store."""
    marker = json.dumps({"casstore": "the blobs of a shared store", "store_id": store_id, "index": index}).encode()
    for _ in range(_MARKER_ATTEMPTS):
        try:
            created = objects.create_name(MARKER_NAME, marker)
        except StorageError as error:
            # The first object a store writes: a bucket that does not exist fails here, in words some servers choose.
            advised = first_write_advice(str(error))
            if not advised:
                raise
            raise StorageError(f"{error}{advised}") from error
        if created:
            return
        found = objects.read_name(MARKER_NAME)
        if found is None:  # S3's answer to a conflicting concurrent write, with nothing written: write again
            continue
        if _marked_store(found) == store_id:
            return
        raise BlobLocationError(
            f"{objects.url} holds the blobs of another casstore store ({_describe_marker(found)}): each index needs a "
            "blob location of its own, as its gc removes the objects it has no row for. Use another prefix."
        )
    raise StorageError(f"The object store {objects.url} kept saying {MARKER_NAME} exists, yet has none.")


def _marked_store(marker: bytes) -> str | None:
    try:
        found = json.loads(marker)
    except ValueError:
        return None
    store_id = found.get("store_id") if isinstance(found, dict) else None
    return store_id if isinstance(store_id, str) else None


def _describe_marker(marker: bytes) -> str:
    try:
        found = json.loads(marker)
    except ValueError:
        found = None
    if isinstance(found, dict) and isinstance(found.get("index"), str):
        return f"its index is at {found['index']}"
    return f"its {MARKER_NAME} is not one this release reads"
