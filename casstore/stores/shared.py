"""
`SharedToolResultStore`: the same store as `ContentAddressedToolResultStore`, shared by a fleet of processes on any
number of hosts, with the index in PostgreSQL and the blobs in S3-compatible (or other) object storage.

It is the same class of store on another repository: references, namespaces, validation, errors and the history's
meaning are `RepositoryToolResultStore`'s; what differs is the index engine (`casstore.index.postgres`) and the blob
backend (`casstore.blobs.objects`). Needs the `shared` extra: `pip install 'casstore[shared]'`.
"""

from typing import Any

from haystack.core.serialization import default_from_dict, default_to_dict
from haystack.utils import Secret, deserialize_secrets_inplace

from casstore.namespaces import DEFAULT_NAMESPACE
from casstore.repository import check_dedup_scope
from casstore.repository.shared import open_shared_repository
from casstore.stores.local import RepositoryToolResultStore
from casstore.stores.settings import DEFAULT_INLINE_MAX, check_settings

INDEX_URL_VARIABLE = "CASSTORE_INDEX_URL"
BLOB_URL_VARIABLE = "CASSTORE_BLOB_URL"


class SharedToolResultStore(RepositoryToolResultStore):
    """
    A deduplicating, compressed `ToolResultStore` shared by many processes and hosts.

    ```python
    from haystack.utils import Secret

    from casstore import SharedToolResultStore

    store = SharedToolResultStore(
        index_url=Secret.from_env_var("CASSTORE_INDEX_URL"),  # postgresql://user:password@host:5432/db
        blob_url="s3://bucket/tool-results",
        blob_options={"endpoint": "http://127.0.0.1:8333", "region": "us-east-1", "allow_http": "true"},
        namespace="alice",
    )
    ```

    Every replica that opens the same index and bucket reads what any other wrote in the same namespace, and content
    that several of them write is stored once. Small blobs are kept inside PostgreSQL, larger ones as objects named
    `<prefix>/blake3/<2 hex>/<62 hex>`, written only if absent.
    """

    def __init__(
        self,
        *,
        index_url: Secret | str = Secret.from_env_var(INDEX_URL_VARIABLE),  # noqa: B008 - Haystack's idiom
        blob_url: str,
        blob_options: dict[str, str] | None = None,
        namespace: str = DEFAULT_NAMESPACE,
        compression_level: int = 3,
        inline_max: int = DEFAULT_INLINE_MAX,
        learn: bool = True,
        search_index: bool = False,
        dedup_scope: str | None = None,
    ) -> None:
        """
        Connect to the index and the object store, bringing the index's schema up to date if needed.

        :param index_url: The PostgreSQL URL (`postgresql://user:password@host:5432/db`) as a Haystack `Secret`; a
            plain string is taken as a token secret (and such a store cannot be serialized). Its `connect_timeout`
            parameter bounds connecting (default 10 s).
        :param blob_url: Where the blobs go: `s3://bucket/prefix`, `gs://...`, `az://...` or `file:///path`.
        :param blob_options: The object-store client's settings as strings (such as `endpoint`, `region`,
            `allow_http`, `timeout`, `connect_timeout`); anything not given comes from the environment
            (`AWS_ENDPOINT_URL`, `AWS_REGION`, `AWS_ALLOW_HTTP`, ...). Never credentials: those come from the
            environment (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, ...) or the machine's role.
        :param namespace: Whose results these are, as for `ContentAddressedToolResultStore`.
        :param compression_level: The zstd compression level, 1 (fastest) to 22 (smallest).
        :param inline_max: Blobs whose compressed size is at most this many bytes are kept inside PostgreSQL instead
            of as objects. `0` stores every blob as an object.
        :param learn: Compress new content with what the store learned from what it holds: zstd dictionaries trained
            per tool, and deltas against an earlier version of a result (docs/compression.md). False stores plain zstd
            frames, as before; blobs stored either way are read either way.
        :param search_index: Index the text of every result written, after its write commits, so the search tool
            (`casstore.compactor.make_search_tool`) finds it (docs/search.md). Off by default. Turning it on needs the
            server's `pg_trgm` extension (PostgreSQL's contrib modules), which it creates if it may.
        :param dedup_scope: `"store"`: identical results are stored once across all namespaces; `"namespace"`: only
            within a namespace, so a write does nothing observably different because of what another namespace holds
            (for stores shared by parties who must not learn about each other: docs/dedup-scope.md). Chosen when the
            store is made (`"store"` unless said otherwise) and recorded in its index; None (the default) opens
            whichever the index records.
        :raises TypeError: If `index_url` is neither a `Secret` nor a string, `dedup_scope` is not a string,
            `compression_level` or `inline_max` is not an `int` (a `bool` or `float` is refused), or `learn` or
            `search_index` is not a `bool`; raised before connecting to anything.
        :raises ValueError: If `blob_options` hold credentials, a setting is out of range or not a string, or
            `dedup_scope` is unknown or not the scope the index records (the message names both).
        :raises SearchUnavailableError: With `search_index=True`, if the server has no `pg_trgm` or the user may not
            create it (the message says what to install or ask for).
        :raises StorageError: If PostgreSQL or the object store cannot be reached (the message says which).
        :raises SchemaError: If the database holds a newer casstore schema, or another application's tables of the
            same names.
        :raises BlobLocationError: If the index records another blob location than `blob_url` (the message names
            both), or `blob_url` holds another store's blobs. A store being made records `blob_url` in its index and
            writes a marker object there (docs/shared-store.md).
        """
        check_settings(
            namespace=namespace,
            compression_level=compression_level,
            inline_max=inline_max,
            learn=learn,
            search_index=search_index,
        )
        self.dedup_scope = check_dedup_scope(dedup_scope)
        if isinstance(index_url, str):
            index_url = Secret.from_token(index_url)
        if not isinstance(index_url, Secret):
            raise TypeError(f"`index_url` must be a haystack Secret or a str, got {type(index_url).__name__}.")
        if not isinstance(blob_url, str) or not blob_url:
            raise ValueError("`blob_url` must name an object store, such as s3://bucket/prefix.")
        self.index_url = index_url
        self.blob_url = blob_url
        self.blob_options = dict(blob_options) if blob_options is not None else None
        self.compression_level = compression_level
        self.inline_max = inline_max
        self.learn = learn
        self.search_index = search_index
        url = index_url.resolve_value()
        if not url:
            raise ValueError(
                f"No PostgreSQL URL: set {INDEX_URL_VARIABLE} or pass `index_url` (postgresql://user:password@host/db)."
            )
        super().__init__(
            repository=open_shared_repository(
                index_url=url,
                blob_url=blob_url,
                blob_options=self.blob_options,
                compression_level=compression_level,
                inline_max=inline_max,
                learn=learn,
                search_index=search_index,
                dedup_scope=dedup_scope,
            ),
            namespace=namespace,
        )

    def __repr__(self) -> str:
        return f"SharedToolResultStore(index={self._repository.description!r}, namespace={self.namespace!r})"

    def to_dict(self) -> dict[str, Any]:
        """
        Serialize the store's settings (not its content): the index URL as its `Secret` (an environment variable),
        never a password or a key.

        :returns: A dictionary for Haystack's serialization.
        :raises ValueError: If the store was made from a token (a plain string URL), which must not be written out.
        """
        try:
            index_url = self.index_url.to_dict()
        except ValueError as error:
            raise ValueError(
                "This SharedToolResultStore was made from a token (a plain URL), which would write its password out: "
                f"make it with index_url=Secret.from_env_var({INDEX_URL_VARIABLE!r}) to serialize it."
            ) from error
        return default_to_dict(
            self,
            index_url=index_url,
            blob_url=self.blob_url,
            blob_options=self.blob_options,
            namespace=self.namespace,
            compression_level=self.compression_level,
            inline_max=self.inline_max,
            learn=self.learn,
            search_index=self.search_index,
            dedup_scope=self.dedup_scope,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "SharedToolResultStore":
        """
        Connect to a store from what `to_dict` produced.

        :param data: A dictionary representation produced by `to_dict`.
        :returns: The store, connected.
        """
        data = {**data, "init_parameters": dict(data["init_parameters"])}  # the caller's dict stays as it was
        deserialize_secrets_inplace(data["init_parameters"], keys=["index_url"])
        return default_from_dict(cls, data)
