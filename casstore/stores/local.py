"""
`ContentAddressedToolResultStore`: the Haystack `ToolResultStore`, a client of the repository (`casstore.repository`).

It turns Haystack's `write(key=..., content=...)` into prepared writes the repository stores as content-addressed
blobs plus rows in the offload history, hands back a hash path as the reference, and resolves references only within
its namespace.
"""

from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from haystack.core.serialization import default_from_dict, default_to_dict
from haystack.hooks.tool_result_offloading.types import ToolResultStore

from casstore.namespaces import DEFAULT_NAMESPACE
from casstore.references import split_reference
from casstore.repository import (
    BLOB_DIRECTORY_NAME,
    INDEX_FILE_NAME,
    MIN_TERM_CHARS,
    ArchiveRecord,
    CompactionRecord,
    OffloadRecord,
    PreparedWrite,
    Repository,
    SearchOutcome,
    check_dedup_scope,
    prepare,
)
from casstore.stores.history_records import check_archive, check_compaction, check_compaction_id, check_offloads
from casstore.stores.settings import DEFAULT_INLINE_MAX, check_settings

__all__ = [
    "BLOB_DIRECTORY_NAME",
    "DEFAULT_INLINE_MAX",
    "INDEX_FILE_NAME",
    "ContentAddressedToolResultStore",
    "RepositoryToolResultStore",
    "check_settings",
]


class RepositoryToolResultStore(ToolResultStore):
    """
    Haystack's `ToolResultStore` over a casstore repository: what the local and the shared store have in common.

    Subclasses open the repository (`ContentAddressedToolResultStore`: SQLite and a folder; `SharedToolResultStore`:
    PostgreSQL and object storage) and serialize their own settings; references, namespaces, validation and errors are
    the same in both, so the same content under the same key gives the same reference in either.
    """

    supports_binary_content = True

    def __init__(self, *, repository: Repository, namespace: str) -> None:
        """
        :param repository: The opened repository; the store owns it and closes it.
        :param namespace: Whose results these are (already checked with `check_namespace`).
        """
        self.namespace = namespace
        self._repository = repository

    def prepare_write(self, *, key: str, content: str | bytes) -> PreparedWrite:
        """
        Check and hash a write without storing anything, so its reference is known in advance.

        `DedupOffloadCompactor` uses this to find out whether a reference saves tokens before it stores a result.

        :param key: As for `write`.
        :param content: As for `write`.
        :returns: A prepared write, whose `reference` is what `write` would return; store it with `write_prepared`.
        :raises TypeError: If `content` is neither `str` nor `bytes`, or `key` is not a string.
        :raises InvalidContentError: If `content` is a `str` that cannot be encoded as UTF-8.
        :raises InvalidKeyError: If `key` is empty, too long, or contains NUL or a lone surrogate.
        """
        namespace = self.namespace
        digest_key = self._repository.dedup_scope.key_for(namespace)
        return prepare(key=key, content=content, namespace=namespace, digest_key=digest_key)

    def write_prepared(self, prepared: PreparedWrite) -> str:
        """
        Store a write made by `prepare_write` and record it in the index.

        :param prepared: What `prepare_write` returned.
        :returns: `prepared.reference`.
        :raises TypeError: If `prepared` is not a `PreparedWrite`.
        :raises ValueError: If `prepared` is not what this store's `prepare_write` makes of its key and content.
        :raises StorageError: If the blob or its history row could not be stored (disk full, file size limit, I/O
            error); nothing of this write is recorded then.
        """
        return self.write_prepared_many([prepared])[0]

    def write_prepared_many(self, prepared: Sequence[PreparedWrite]) -> list[str]:
        """
        Store several prepared writes (the parts of one tool result) together: all of them, or none.

        :param prepared: What `prepare_write` returned, for each part.
        :returns: Their references, in order.
        :raises TypeError: If a part is not a `PreparedWrite`.
        :raises ValueError: If a part is not what this store's `prepare_write` makes of its key and content (made by
            another store or for another namespace, or changed since, as with `dataclasses.replace`): a digest that
            does not hash its content would name another result. Nothing is stored then.
        :raises StorageError: If any part could not be stored; then none of them is recorded.
        """
        checked = [self._checked(write) for write in prepared]
        self._repository.store(namespace=self.namespace, writes=checked)
        return [write.reference for write in checked]

    def _checked(self, write: PreparedWrite) -> PreparedWrite:
        # Hashed again, whatever it claims, and what is stored is the write made here, never the caller's object: the
        # index trusts a write's digest to name its content, so a part whose digest names another result (another
        # namespace's, or content not written yet) would be recorded as that result. One BLAKE3 pass, on the prepared
        # path only (`write` hashes once).
        if not isinstance(write, PreparedWrite):
            raise TypeError(f"`write_prepared` takes what `prepare_write` returned, got {type(write).__name__}.")
        namespace = self.namespace
        digest_key = self._repository.dedup_scope.key_for(namespace)
        if write.keyed_for != (None if digest_key is None else namespace):
            return write  # hashed for another namespace: the repository refuses it, naming both
        made: PreparedWrite | None = None
        data: object = write.data
        if type(data) is bytes:  # not a subclass, nor a bytearray another thread may change meanwhile
            try:
                content = data.decode("utf-8") if write.is_text is True else data
                made = prepare(key=write.key, content=content, namespace=namespace, digest_key=digest_key)
            except (TypeError, ValueError):  # a key that is not one, or text that is not UTF-8
                made = None
        claimed = (write.reference, write.key, write.digest, write.is_text, data, write.keyed_for)
        if made is None or (made.reference, made.key, made.digest, made.is_text, made.data, made.keyed_for) != claimed:
            raise ValueError(
                f"The prepared write {write.reference!r:.100} is not what this store's `prepare_write` makes of its "
                f"key and content (its digest does not hash its content here): it was made by another store, or "
                f"changed after `prepare_write`. Prepare it again with this store's `prepare_write`, then write it."
            )
        return made

    def write(self, *, key: str, content: str | bytes) -> str:
        """
        Store `content` once, record the write, and return its reference.

        Writing content that is already stored (in any namespace; under `dedup_scope="namespace"`, in this one) adds a
        row to the history but no blob.

        :param key: A per-result name such as `3_read_file_call_1.txt`. Only its extension is used (it ends the
            reference, if it is short plain ASCII); the whole key is recorded in the index, never used as a path.
        :param content: Text (stored as its UTF-8 bytes) or bytes.
        :returns: A hash path such as `blake3/9b/1c4e...e4a.txt` (`blake3/bin/9b/...` for bytes).
        :raises TypeError: If `content` is neither `str` nor `bytes`, or `key` is not a string.
        :raises InvalidContentError: If `content` is a `str` that cannot be encoded as UTF-8.
        :raises InvalidKeyError: If `key` is empty, too long, or contains NUL or a lone surrogate.
        """
        # `write_prepared_many` for one part, without building a list of one reference: this is every write's path.
        prepared = self.prepare_write(key=key, content=content)
        self._repository.store(namespace=self.namespace, writes=(prepared,))
        return prepared.reference

    def read(self, reference: str) -> str | bytes:
        """
        Return exactly what was written under `reference`, after checking its BLAKE3 digest.

        :param reference: A reference returned by `write` in this store's namespace.
        :returns: `str` for content written as text, `bytes` for content written as bytes.
        :raises InvalidReferenceError: If `reference` is not a well-formed reference.
        :raises ReferenceNotFoundError: If it was not written in this namespace.
        :raises CorruptBlobError: If the stored blob is missing or damaged; `UnsafeBlobError` (also a
            `ReferenceNotFoundError`) if its path inside the store is a planted symlink or not a regular file.
        """
        digest, is_text, _ = split_reference(reference)
        data = self._repository.read(namespace=self.namespace, digest=digest, reference=reference)
        return data.decode("utf-8") if is_text else data

    def search(
        self, *, terms: Sequence[str], tool_name: str | None = None, limit: int = 10, seconds: float = 3.0
    ) -> SearchOutcome:
        """
        Find this namespace's text results holding any of `terms`, best first, through the search index.

        :param terms: Case-insensitive substrings, each at least 3 characters (`search_index.MIN_TERM_CHARS`); what
            they hold is text, never query syntax.
        :param tool_name: Only results of this tool: those the offload history names for it, or whose key has the
            form Haystack gives that tool's keys (`<step>_<tool>_...`, `compacted_<tool>_...`).
        :param limit: At most this many hits.
        :param seconds: Answer with what was found after about this long.
        :returns: The hits (each distinct result once) and how many more there are; `enabled` is False if the store
            has no search index (open it with `search_index=True`, or run `casstore search-index`).
        :raises ValueError: If a term is shorter than 3 characters, or `limit` or `seconds` is not positive.
        """
        if limit < 1 or not seconds > 0:
            raise ValueError(f"`limit` and `seconds` must be positive, got {limit} and {seconds}.")
        short = [term for term in terms if len(term) < MIN_TERM_CHARS]
        if short:
            raise ValueError(f"Search terms must be at least {MIN_TERM_CHARS} characters: {short[0]!r} is not.")
        return self._repository.search.find(
            namespace=self.namespace, terms=list(terms), tool_name=tool_name, limit=limit, seconds=seconds
        )

    def record_offloads(self, *, compaction_id: str, offloads: list[OffloadRecord]) -> None:
        """
        Append a compaction's offloads to the index's `offloads` table, in one transaction.

        :param compaction_id: An id shared by all offloads of one `compact` call.
        :param offloads: One record per tool result that was replaced by references.
        :raises TypeError: If `offloads` is not a list of `OffloadRecord`, or a field of one is not of its type (a
            `str` as `references`: wrap it in a list). Nothing is written.
        :raises ValueError: If a tool name is empty, a tool name, call id or `compaction_id` holds a NUL or a lone
            surrogate, a reference is malformed (`InvalidReferenceError`), or a token count is negative, over
            `MAX_TOKENS` (10^12) or saves more than the result took. Nothing is written.
        """
        check_compaction_id(compaction_id)
        check_offloads(offloads)
        self._repository.record_offloads(namespace=self.namespace, compaction_id=compaction_id, offloads=offloads)

    def record_compaction(
        self, *, compaction_id: str, compaction: CompactionRecord, offloads: Sequence[OffloadRecord] = ()
    ) -> None:
        """
        Append what one `compact` call did to the index: a `compactions` row and its offloads, in one transaction.

        :param compaction_id: The call's id, shared by its offloads.
        :param compaction: The conversation's tokens before and after the call, its target and the model's window.
        :param offloads: One record per tool result the call replaced by references (none when it found nothing to
            offload).
        :raises TypeError: If `compaction` is not a `CompactionRecord` or a count in it not an `int`, or `offloads`
            is not as `record_offloads` takes it. Nothing is written.
        :raises ValueError: If a count is negative or over `MAX_TOKENS`, or an offload is refused as
            `record_offloads` refuses it. Nothing is written.
        """
        check_compaction_id(compaction_id)
        check_compaction(compaction)
        check_offloads(offloads)
        self._repository.record_compaction(
            namespace=self.namespace, compaction_id=compaction_id, compaction=compaction, offloads=offloads
        )

    def record_archive(self, *, compaction_id: str, compaction: CompactionRecord, archive: ArchiveRecord) -> None:
        """
        Append what one `StepArchiveCompactor` call did to the index: a `compactions` row and an `archives` row for the
        transcript it wrote, in one transaction.

        :param compaction_id: The call's id, also in the note's meta (`meta["casstore"]["compaction_id"]`).
        :param compaction: The conversation's tokens before and after the call, its target and the model's window.
        :param archive: The transcript's references, the messages and steps it holds and the tokens they took.
        :raises TypeError: If `compaction` or `archive` is not of its record type, or a field of one is not of its
            type. Nothing is written.
        :raises ValueError: If a count is negative or over `MAX_TOKENS`, a reference is malformed
            (`InvalidReferenceError`), or the steps do not run from a first to a last of 1 or more. Nothing is written.
        """
        check_compaction_id(compaction_id)
        check_compaction(compaction)
        check_archive(archive)
        self._repository.record_archive(
            namespace=self.namespace, compaction_id=compaction_id, compaction=compaction, archive=archive
        )

    @property
    def repository(self) -> Repository:
        """The repository the store is built on, for `casstore.maintenance` and `casstore.history`."""
        return self._repository

    def close(self) -> None:
        """
        Close the index and the blob folder, after waiting for operations in flight in other threads.

        Later calls raise `StoreClosedError`; closing twice is harmless.
        """
        self._repository.close()

    def __enter__(self) -> "Self":
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()


class ContentAddressedToolResultStore(RepositoryToolResultStore):
    """
    A deduplicating, compressed `ToolResultStore` with a queryable SQLite history.

    ```python
    from casstore import ContentAddressedToolResultStore

    with ContentAddressedToolResultStore(root="tool_results", namespace="alice") as store:
        reference = store.write(key="search_1.txt", content="...")  # 'blake3/9b/1c4e...e4a.txt'
        assert store.read(reference) == "..."
    ```

    Each distinct piece of content is stored once, keyed by its BLAKE3 digest and zstd-compressed: small blobs inside
    `<root>/index.db`, larger ones under `<root>/blobs/`. Every `write` is recorded in the index. A store reads only
    what was written in its own namespace, while the blobs themselves are shared between namespaces.

    A store may be shared by threads, and several processes may open the same root at once.
    """

    def __init__(
        self,
        root: str | Path,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        compression_level: int = 3,
        inline_max: int = DEFAULT_INLINE_MAX,
        durable: bool = False,
        learn: bool = True,
        search_index: bool = False,
        dedup_scope: str | None = None,
    ) -> None:
        """
        Open the store at `root`; a store that does not exist yet is created by its first write.

        Like Haystack's `FileSystemToolResultStore`, which makes its folder on the first write, this creates nothing
        on disk until something is written: a store made for a request that offloads nothing leaves no trace. Until
        then it reads as an empty store (a read raises `ReferenceNotFoundError`), and it sees what another process
        writes there meanwhile. An existing `index.db` is opened, checked and brought up to date now.

        :param root: The store's folder: `index.db` and `blobs/` live in it.
        :param namespace: Whose results these are. Reads see only what was written in the same namespace; use one
            namespace per user or run to isolate them without storing shared content twice.
        :param compression_level: The zstd compression level, 1 (fastest) to 22 (smallest).
        :param inline_max: Blobs whose compressed size is at most this many bytes are kept inside `index.db` instead
            of in a file of their own. `0` stores every blob as a file.
        :param durable: Fsync blob files and use SQLite's `synchronous=FULL`, so a write survives power loss. The
            default survives a crash of the process, but not of the machine.
        :param learn: Compress new content with what the store learned from what it holds: zstd dictionaries trained
            per tool, and deltas against an earlier version of a result (docs/compression.md). False stores plain zstd
            frames, as before; blobs stored either way are read either way.
        :param search_index: Index the text of every result written, so the search tool
            (`casstore.compactor.make_search_tool`) finds it: the write records it as pending in its own transaction,
            and it is indexed after the commit, in batches (a search indexes what is pending first). Off by default:
            the write path is then unchanged. Results written before (or by a store with it off) are indexed by
            `casstore search-index`.
        :param dedup_scope: `"store"`: identical results are stored once across all namespaces; `"namespace"`: only
            within a namespace, so a write does nothing observably different because of what another namespace holds
            (for stores shared by parties who must not learn about each other: docs/dedup-scope.md). Chosen when the
            store is made (`"store"` unless said otherwise) and recorded in its index; None (the default) opens
            whichever the index records.
        :raises TypeError: If `namespace` or `dedup_scope` is not a string, `compression_level` or `inline_max` is
            not an `int` (a `bool` or `float` is refused), or `durable`, `learn` or `search_index` is not a `bool`;
            raised before anything is opened or created.
        :raises ValueError: If `namespace` is empty, too long or contains control characters, if
            `compression_level` is not from 1 to 22 or `inline_max` not from 0 to 1,000,000,000, or if `dedup_scope`
            is unknown or not the scope the index records (the message names both).
        :raises SchemaError: If an existing `index.db` was written by a newer casstore or is not a casstore index;
            `IndexDamagedError` (also a `CorruptBlobError`) if SQLite finds it damaged or not a database at all.
        :raises CasStoreError: If an existing `blobs` folder is a symlink or not a folder.
        """
        check_settings(
            namespace=namespace,
            compression_level=compression_level,
            inline_max=inline_max,
            durable=durable,
            learn=learn,
            search_index=search_index,
        )
        self.dedup_scope = check_dedup_scope(dedup_scope)
        self.root = Path(root)
        self.compression_level = compression_level
        self.inline_max = inline_max
        self.learn = learn
        self.durable = durable
        self.search_index = search_index
        super().__init__(
            repository=Repository.local(
                self.root,
                compression_level=compression_level,
                inline_max=inline_max,
                durable=durable,
                learn=learn,
                search_index=search_index,
                dedup_scope=dedup_scope,
            ),
            namespace=namespace,
        )

    def __repr__(self) -> str:
        return f"ContentAddressedToolResultStore(root={str(self.root)!r}, namespace={self.namespace!r})"

    def to_dict(self) -> dict[str, Any]:
        """
        Serialize the store's settings (not its content).

        :returns: A dictionary for Haystack's serialization.
        """
        return default_to_dict(
            self,
            root=str(self.root),
            namespace=self.namespace,
            compression_level=self.compression_level,
            inline_max=self.inline_max,
            learn=self.learn,
            durable=self.durable,
            search_index=self.search_index,
            dedup_scope=self.dedup_scope,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ContentAddressedToolResultStore":
        """
        Open a store from what `to_dict` produced.

        :param data: A dictionary representation produced by `to_dict`.
        :returns: The store, opened.
        """
        return default_from_dict(cls, data)
