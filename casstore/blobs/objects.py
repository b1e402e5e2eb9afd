"""
Blob objects in object storage, through obstore: `<prefix>/blake3/<2 hex>/<62 hex>`.

The object-store counterpart of `casstore.blobs.files.BlobDirectory`, for a store shared between machines: S3 and
S3-compatible servers (`s3://bucket/prefix`), Google Cloud Storage (`gs://`), Azure Blob Storage (`az://`), a local
folder (`file:///path`) or memory (`memory://`, for tests; one `ObjectBlobs` sees only its own objects).

A blob is written once and never changed: `write` is a conditional put ("create only if absent"), so concurrent
writers of the same content on any number of machines leave exactly one object and none of them fails. Every request
is bounded (timeouts, a few retries), so an unreachable object store gives an error within seconds instead of holding
the caller for minutes. Credentials are never taken as options: they come from the environment (for S3,
`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, or an instance or web identity role).
"""

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import obstore
from obstore.exceptions import AlreadyExistsError, BaseError
from obstore.store import from_url

from casstore.blobs.files import BlobFile
from casstore.blobs.object_checks import advice, check_blob_url, check_s3_settings
from casstore.errors import ObjectSizeMismatchError, StorageError, StoreClosedError
from casstore.references import is_digest

__all__ = ["BlobObject", "ObjectBlobs", "ObjectSizeMismatchError", "digest_of", "object_name"]

if TYPE_CHECKING:
    from obstore.store import ObjectStore

_FOLDER = "blake3"
# Options that configure the HTTP client rather than the store; every other option goes to the store's config.
_CLIENT_OPTIONS = frozenset(
    {
        "allow_http",
        "allow_invalid_certificates",
        "connect_timeout",
        "http1_only",
        "http2_only",
        "pool_idle_timeout",
        "proxy_url",
        "proxy_excludes",
        "read_timeout",
        "timeout",
        "user_agent",
    }
)
_BOOLEAN_CLIENT_OPTIONS = frozenset({"allow_http", "allow_invalid_certificates", "http1_only", "http2_only"})
# Options read by ObjectBlobs itself, for the retry policy.
_RETRY_OPTIONS = frozenset({"max_retries", "retry_timeout"})
# Any key containing one of these names a secret (or where to find one) for some object store.
_CREDENTIAL_WORDS = (
    "access_key",
    "secret",
    "token",
    "password",
    "account_key",
    "sas_key",
    "service_account",
    "credential",
    "customer_key",
    "encryption_key",
)
DEFAULT_TIMEOUT = "30s"
"""How long one request may take (connecting, sending and receiving), unless the option `timeout` says otherwise."""
DEFAULT_CONNECT_TIMEOUT = "5s"
"""How long connecting may take, unless the option `connect_timeout` says otherwise."""
DEFAULT_MAX_RETRIES = 3
"""How many times a failed request (a connection error, a 5xx answer) is retried, unless `max_retries` says."""
DEFAULT_RETRY_TIMEOUT_SECONDS = 10.0
"""No retry starts after this many seconds from the first attempt, unless `retry_timeout` (seconds) says."""
_CREATE_ATTEMPTS = 5


@dataclass(frozen=True, slots=True)
class BlobObject:
    """An object found under the prefix: a blob (with its digest) or a foreign object (digest `None`)."""

    digest: str | None
    size: int
    last_modified: float
    """Unix timestamp."""
    name: str
    """The name relative to the prefix, as `remove_name` takes it."""


class ObjectBlobs:
    """Blob objects under one prefix of an object store; each method is one or a few bounded requests."""

    # What the index's `blobs.stored_in` says of a blob kept here.
    stored_in = "object"
    # A blob row exists only while its object does (gc deletes the row, commits, then the object, under its exclusive
    # lock), so a write that finds the row trusts it without asking the object store: a duplicate write touches none.
    rows_imply_presence = True

    def __init__(self, url: str, *, options: dict[str, str] | None = None) -> None:
        """
        Connect to the object store named by `url` (no request is sent yet).

        :param url: `s3://bucket/prefix`, `gs://bucket/prefix`, `az://container/prefix`, `file:///path` (the folder
            is created if needed) or `memory://`.
        :param options: Store settings as strings, by obstore's names: for S3 `endpoint`, `region`,
            `virtual_hosted_style_request`, ...; for the HTTP client `allow_http`, `timeout`, `connect_timeout`, ...;
            and `max_retries`, `retry_timeout` (seconds) for the retry policy. For S3, `allow_http` defaults to the
            environment's `AWS_ALLOW_HTTP`. `file://` and `memory://` take only the timing options (and ignore them).
        :raises ValueError: If `url` is not an object-store URL, `options` hold credentials (they come from the
            environment), a malformed number, or settings the URL's store does not take; for S3, a plain-HTTP endpoint
            without `allow_http`, or only one of `AWS_ACCESS_KEY_ID` and `AWS_SECRET_ACCESS_KEY` (each message says
            what to set).
        :raises StorageError: If obstore refuses the URL or an option.
        """
        options = dict(options or {})
        credentials = sorted(key for key in options if _is_credential(key))
        if credentials:
            raise ValueError(
                f"ObjectBlobs does not take credentials as options ({', '.join(credentials)}): they come from the "
                "environment (for S3, AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or a role)."
            )
        self.url = url
        self._store: ObjectStore | None = _open_store(url, options)

    def __repr__(self) -> str:
        return f"ObjectBlobs({self.url!r})"

    @property
    def _opened(self) -> "ObjectStore":
        if self._store is None:
            raise StoreClosedError("This casstore object store is closed; open a new ObjectBlobs.")
        return self._store

    def close(self) -> None:
        """Let go of the connection pool; any later call raises `StoreClosedError`."""
        self._store = None

    def write(self, digest: str, frame: bytes) -> bool:
        """
        Store `frame` as the object for `digest` unless that object exists (a conditional put).

        When the store says the object exists, its size is checked before the write is trusted: S3 reports a
        conflicting concurrent conditional put (409) as "already exists" even when nothing was written, so an object
        found absent is written again, a bounded number of times.

        :param digest: The blob's BLAKE3 digest, 64 lowercase hex digits.
        :param frame: The bytes to store.
        :returns: True if this call created the object, False if it was already there with the same size.
        :raises ValueError: If `digest` is not 64 lowercase hex digits.
        :raises ObjectSizeMismatchError: If the object exists with another size.
        :raises StorageError: If the object store fails, or keeps saying "exists" for an object it does not have.
        """
        name = object_name(digest)
        store = self._opened
        for attempt in range(_CREATE_ATTEMPTS):
            try:
                obstore.put(store, name, frame, mode="create", use_multipart=False)
            except AlreadyExistsError:
                size = self._size(name)
                if size == len(frame):
                    return False
                if size is not None:
                    raise ObjectSizeMismatchError(
                        f"The object store {self.url} holds {name} with {size} bytes where {len(frame)} were being "
                        "written; it was left as it is."
                    ) from None
                if attempt < _CREATE_ATTEMPTS - 1:  # a concurrent writer's request conflicted with ours: try again
                    time.sleep(0.05 * 2**attempt)
            except (BaseError, OSError) as error:
                raise self._error("write", name, error) from error
            else:
                return True
        raise StorageError(
            f"The object store {self.url} answered 'already exists' {_CREATE_ATTEMPTS} times for {name}, yet has no "
            "such object; nothing was written."
        )

    def read(self, digest: str) -> bytes:
        """
        :param digest: The blob's BLAKE3 digest.
        :returns: The bytes of the object for `digest`.
        :raises FileNotFoundError: If there is no such object.
        :raises StorageError: If the object store fails.
        """
        name = object_name(digest)
        try:
            return obstore.get(self._opened, name).bytes().to_bytes()
        except FileNotFoundError:
            raise FileNotFoundError(f"No object {name} in the object store {self.url}.") from None
        except (BaseError, OSError) as error:
            raise self._error("read", name, error) from error

    def exists(self, digest: str) -> bool:
        """
        :param digest: The blob's BLAKE3 digest.
        :returns: Whether the object for `digest` exists.
        :raises StorageError: If the object store fails (an outage is not an absence).
        """
        if not is_digest(digest):
            return False  # a digest damaged by hand in the index names no object
        return self._size(object_name(digest)) is not None

    def replace(self, digest: str, frame: bytes) -> None:
        """
        Store `frame` as the object for `digest` whatever is there: for a damaged leftover no row points at.

        :raises StorageError: If the object store fails.
        """
        name = object_name(digest)
        try:
            obstore.put(self._opened, name, frame, use_multipart=False)
        except (BaseError, OSError) as error:
            raise self._error("write", name, error) from error

    def remove(self, digest: str) -> None:
        """
        Remove the object for `digest`; a missing object is not an error.

        :param digest: The blob's BLAKE3 digest.
        :raises StorageError: If the object store fails.
        """
        if is_digest(digest):  # a digest damaged by hand in the index names no object of this store
            self.remove_name(object_name(digest))

    def read_name(self, name: str) -> bytes | None:
        """
        :param name: An object's name relative to the prefix, such as the store's marker.
        :returns: Its bytes, or None if there is no such object.
        :raises StorageError: If the object store fails.
        """
        try:
            return obstore.get(self._opened, name).bytes().to_bytes()
        except FileNotFoundError:
            return None
        except (BaseError, OSError) as error:
            raise self._error("read", name, error) from error

    def create_name(self, name: str, data: bytes) -> bool:
        """
        Write the object `name` (relative to the prefix) unless it exists.

        :returns: True if written; False if the store says it exists (S3 may say so of a conflicting concurrent
            write too: read it to be sure).
        :raises StorageError: If the object store fails.
        """
        try:
            obstore.put(self._opened, name, data, mode="create", use_multipart=False)
        except AlreadyExistsError:
            return False
        except (BaseError, OSError) as error:
            raise self._error("write", name, error) from error
        return True

    def remove_name(self, name: str) -> None:
        """
        Remove an object by its name relative to the prefix (as `objects` gives it); a missing one is not an error.

        :param name: The object's name, such as `blake3/ab/<62 hex>` or a foreign object's name.
        :raises StorageError: If the object store fails or refuses the name.
        """
        try:
            obstore.delete(self._opened, name)
        except FileNotFoundError:
            return
        except (BaseError, OSError) as error:
            raise self._error("remove", name, error) from error

    def objects(self) -> Iterator[BlobObject]:
        """
        Yield every object under the prefix, blobs and foreign objects alike, in the store's listing order.

        :returns: An iterator of `BlobObject`.
        :raises StorageError: If the object store fails while listing.
        """
        try:
            for batch in obstore.list(self._opened):
                for meta in batch:
                    name = meta["path"]
                    yield BlobObject(
                        digest=digest_of(name),
                        size=meta["size"],
                        last_modified=meta["last_modified"].timestamp(),
                        name=name,
                    )
        except (BaseError, OSError) as error:
            raise self._error("list", "the objects", error) from error

    def files(self) -> Iterator[BlobFile]:
        """
        Yield every object under the prefix's `blake3/` folder, as the blob layer's maintenance sees files: a blob
        (with its digest) or a misnamed object there (digest `None`, removed by gc as a stray). Objects elsewhere under
        the prefix are not casstore's and are never listed, so gc never removes them.

        :raises StorageError: If the object store fails while listing.
        """
        for found in self.objects():
            if found.name.startswith(f"{_FOLDER}/"):
                yield BlobFile(
                    digest=found.digest, size=found.size, mtime=found.last_modified, fanout="", name=found.name
                )

    def remove_stray(self, blob_file: BlobFile) -> None:
        """Remove an object `files` listed; a missing one is not an error. :raises StorageError: If the store fails."""
        self.remove_name(blob_file.name)

    def total_bytes(self) -> int:
        """:returns: The bytes of every object under the prefix's `blake3/` folder."""
        return sum(found.size for found in self.files())

    def _size(self, name: str) -> int | None:
        try:
            return obstore.head(self._opened, name)["size"]
        except FileNotFoundError:
            return None
        except (BaseError, OSError) as error:
            raise self._error("look up", name, error) from error

    def _error(self, operation: str, name: str, error: Exception) -> StorageError:
        summary = str(error).split("\n\nDebug source:")[0].strip() or type(error).__name__
        return StorageError(f"The object store {self.url} failed to {operation} {name}: {summary}{advice(summary)}")


def object_name(digest: str) -> str:
    """
    :param digest: A BLAKE3 digest, 64 lowercase hex digits.
    :returns: The object's name relative to the prefix: `blake3/<2 hex>/<62 hex>`.
    :raises ValueError: If `digest` is not 64 lowercase hex digits.
    """
    if not is_digest(digest):
        raise ValueError(f"A blob digest is 64 lowercase hex digits, not {digest!r}.")
    return f"{_FOLDER}/{digest[:2]}/{digest[2:]}"


def digest_of(name: str) -> str | None:
    """
    :param name: An object's name relative to the prefix.
    :returns: The digest of a blob object's name, or None for any other name.
    """
    parts = name.split("/")
    if len(parts) != 3 or parts[0] != _FOLDER or len(parts[1]) != 2 or len(parts[2]) != 62:
        return None
    digest = parts[1] + parts[2]
    return digest if is_digest(digest) else None


def _is_credential(key: str) -> bool:
    lowered = key.lower()
    return any(word in lowered for word in _CREDENTIAL_WORDS)


def _open_store(url: str, options: dict[str, str]) -> "ObjectStore":
    scheme = check_blob_url(url)
    retry = {key: options.pop(key) for key in _RETRY_OPTIONS & options.keys()}
    try:
        retry_config: Any = {
            "max_retries": int(retry.get("max_retries", DEFAULT_MAX_RETRIES)),
            "retry_timeout": timedelta(seconds=float(retry.get("retry_timeout", DEFAULT_RETRY_TIMEOUT_SECONDS))),
            "backoff": {"init_backoff": timedelta(milliseconds=100), "max_backoff": timedelta(seconds=2), "base": 2},
        }
    except ValueError as error:
        raise ValueError(f"max_retries and retry_timeout are numbers: {error}") from error
    try:
        if scheme in {"file", "memory"}:
            extra = sorted(options.keys() - {"timeout", "connect_timeout"})
            if extra:
                raise ValueError(f"{scheme}:// object stores take no options such as {', '.join(extra)}.")
            if scheme == "file":
                return from_url(url, mkdir=True)
            return from_url(url)
        # Any: obstore types each store's settings separately, and the URL decides which store this is.
        client: Any = {"timeout": DEFAULT_TIMEOUT, "connect_timeout": DEFAULT_CONNECT_TIMEOUT}
        if scheme in {"s3", "s3a"} and "AWS_ALLOW_HTTP" in os.environ:  # explicit client options hide it from obstore
            client["allow_http"] = os.environ["AWS_ALLOW_HTTP"].strip().lower() == "true"
        config: Any = {}
        for key, value in options.items():
            if key in _BOOLEAN_CLIENT_OPTIONS:
                client[key] = value.strip().lower() == "true"
            elif key in _CLIENT_OPTIONS:
                client[key] = value
            else:
                config[key] = value
        if scheme in {"s3", "s3a"}:
            check_s3_settings(client=client, config=config, environ=os.environ)
        store: ObjectStore = from_url(url, config=config, client_options=client, retry_config=retry_config)
    except BaseError as error:
        summary = str(error).split("\n\nDebug source:")[0].strip()
        raise StorageError(f"Cannot open the object store {url}: {summary}{advice(summary)}") from error
    return store
