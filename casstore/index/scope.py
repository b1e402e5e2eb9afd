"""
A store's dedup scope, recorded in its index (table `store_settings`) when the store is made.

Under `store` scope (the default) content is deduplicated across all namespaces: a blob's digest is the plain BLAKE3
of its content. Under `namespace` scope it is deduplicated only within a namespace: the digest of a write is BLAKE3
keyed with its namespace's key (`casstore.references.namespace_key`), derived from a random secret the index keeps,
so identical content in two namespaces has two digests, two blobs and two references (docs/dedup-scope.md).

The rows: `dedup_scope` (`store` or `namespace`) and, under `namespace` scope, `dedup_secret` (64 hex characters).
The secret is written before the scope, so a recorded `namespace` scope always has its secret.
"""

import secrets
import threading
from dataclasses import dataclass, field
from typing import Any, Protocol

from casstore.errors import SchemaError
from casstore.references import namespace_key

STORE = "store"
NAMESPACE = "namespace"
SCOPES = (STORE, NAMESPACE)

_SETTINGS = "SELECT name, value FROM store_settings WHERE name IN ('dedup_scope', 'dedup_secret')"
_RECORD = "INSERT INTO store_settings (name, value) VALUES (?, ?) ON CONFLICT (name) DO NOTHING"
_ANY_BLOB = "SELECT 1 FROM blobs LIMIT 1"


class _Connection(Protocol):
    def execute(self, sql: str, parameters: Any = ()) -> Any: ...


def check_dedup_scope(value: object) -> str | None:
    """
    :param value: What a store was given as `dedup_scope`.
    :returns: `value`, checked: `"store"`, `"namespace"` or None (whatever the index records).
    :raises TypeError: If it is neither a string nor None.
    :raises ValueError: If it is another string.
    """
    if value is None:
        return None
    if not isinstance(value, str):
        raise TypeError(
            f"`dedup_scope` must be 'store', 'namespace' or None, got {value!r:.60} ({type(value).__name__})."
        )
    if value in SCOPES:
        return value
    raise ValueError(
        f"`dedup_scope` must be 'store' (deduplicate across namespaces), 'namespace' (only within one) or None "
        f"(what the store's index records), got {value!r}."
    )


@dataclass(frozen=True)
class DedupScope:
    """A store's dedup scope, as its index records it, and the digest keys it implies."""

    name: str = STORE
    # Not in the repr: a scope printed in a log or a traceback must not hand out what keys every namespace's digests.
    secret: bytes | None = field(default=None, repr=False)
    _keys: dict[str, bytes] = field(default_factory=dict, compare=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, compare=False, repr=False)

    @property
    def per_namespace(self) -> bool:
        """Whether content is deduplicated only within a namespace."""
        return self.name == NAMESPACE

    def key_for(self, namespace: str | None) -> bytes | None:
        """
        :param namespace: A namespace, or None for a blob of the whole store.
        :returns: The key `namespace`'s digests are keyed with; None under `store` scope (plain digests).
        """
        if self.secret is None or namespace is None:
            return None
        key = self._keys.get(namespace)
        if key is None:
            key = namespace_key(self.secret, namespace)
            with self._lock:
                if len(self._keys) > 4096:  # a bound for a process that writes in ever new namespaces
                    self._keys.clear()
                self._keys[namespace] = key
        return key

    def blob_namespace(self, namespace: str) -> str | None:
        """:returns: What a blob written in `namespace` records as its `namespace`: it, or None under `store` scope."""
        return namespace if self.per_namespace else None


def recorded(connection: _Connection) -> DedupScope | None:
    """:returns: The scope the index records, or None if it records none yet."""
    rows = {str(name): str(value) for name, value in connection.execute(_SETTINGS).fetchall()}
    name = rows.get("dedup_scope")
    if name is None:
        return None
    if name not in SCOPES or (name == NAMESPACE and len(rows.get("dedup_secret", "")) != 64):
        raise SchemaError(
            f"The index records dedup scope {name!r} {'without its secret' if name in SCOPES else ''}: it is damaged "
            "or was made by a newer casstore. Restore it from a backup, or upgrade casstore."
        )
    secret = bytes.fromhex(rows["dedup_secret"]) if name == NAMESPACE else None
    return DedupScope(name, secret)


def settle(connection: _Connection, requested: str | None, *, index: str) -> DedupScope | None:
    """
    Record the scope of a store being made, or check an existing store's against `requested`.

    A store opened with `requested` None records nothing: its first write records `store` (`settle_default`), so a
    reader (the CLI's `stats` on a new shared store) never chooses a scope for the application that makes it.

    :param connection: A connection to the index, each statement committed on its own or in the caller's transaction.
    :param requested: The scope the store was opened with; None takes the recorded one.
    :param index: Where the index is, for messages (no password).
    :returns: The scope in force; None if the index records none and none was asked for.
    :raises ValueError: If `requested` is not the scope the index records.
    """
    found = recorded(connection)
    if found is None:
        if requested is None:
            return None
        found = _record(connection, requested)
    check_same(found.name, requested, index=index)
    return found


def settle_default(connection: _Connection) -> DedupScope:
    """
    Before a store's first write: the scope the index records, recording `store` if it records none.

    :param connection: A connection inside the caller's write transaction.
    """
    found = recorded(connection)
    return _record(connection, STORE) if found is None else found


def _record(connection: _Connection, requested: str) -> DedupScope:
    chosen = requested
    if connection.execute(_ANY_BLOB).fetchone() is not None:
        chosen = STORE  # blobs stored before the scope was recorded are shared by all namespaces
    if chosen == NAMESPACE:
        connection.execute(_RECORD, ("dedup_secret", secrets.token_hex(32)))
    connection.execute(_RECORD, ("dedup_scope", chosen))
    found = recorded(connection)  # a store made at the same moment elsewhere may have won
    assert found is not None
    return found


def check_same(recorded_name: str, requested: str | None, *, index: str) -> None:
    """:raises ValueError: If `requested` is a scope other than `recorded_name`."""
    if requested is not None and requested != recorded_name:
        raise ValueError(
            f"The store at {index} was made with dedup_scope={recorded_name!r}, not {requested!r}: a store's scope is "
            f"chosen when it is made. Open it with dedup_scope={recorded_name!r} or None (what the index records); "
            "for the other scope, make a new store with it and write there."
        )


def adopt(connection: _Connection, source: DedupScope, *, index: str) -> DedupScope:
    """
    Make a store being copied into hash as its source does (`casstore copy` keeps references, so digests too): an
    empty target takes the source's scope and secret; one that holds blobs must have them already.

    :param connection: A connection inside the caller's write transaction.
    :param source: The scope the source records.
    :param index: The target's index, for messages (no password).
    :returns: The target's scope, now the source's.
    :raises ValueError: If the target holds blobs and hashes otherwise than the source.
    """
    found = recorded(connection) or DedupScope()  # an index that records none is of `store` scope
    if found == source:
        return found
    if connection.execute(_ANY_BLOB).fetchone() is not None:
        theirs = f"{found.name!r}" + (" with another secret" if found.name == source.name else "")
        raise ValueError(
            f"Cannot copy into {index}: its dedup scope is {theirs}, and the source's is {source.name!r}; a copy keeps "
            "references, so both must hash alike. Copy into a new, empty store: it takes the source's scope."
        )
    connection.execute("DELETE FROM store_settings WHERE name IN ('dedup_scope', 'dedup_secret')")
    if source.secret is not None:
        connection.execute(_RECORD, ("dedup_secret", source.secret.hex()))
    connection.execute(_RECORD, ("dedup_scope", source.name))
    return source
