"""
The exceptions casstore raises.

Every error derives from `CasStoreError`, so `except CasStoreError` catches all of them. Each also derives from the
built-in exception a caller would already expect (`ValueError` for bad input, `FileNotFoundError` for an unknown
reference, `OSError` for damaged storage), so code written against `FileSystemToolResultStore` keeps working.
"""


class CasStoreError(Exception):
    """Base class of every error casstore raises."""


class InvalidReferenceError(CasStoreError, ValueError):
    """The value given as a reference is not a well-formed reference of this store."""


class ReferenceNotFoundError(CasStoreError, FileNotFoundError):
    """
    The reference is well formed but was never written in this store's namespace.

    The message is the same whether the content exists in another namespace or nowhere, so the store cannot be used to
    find out what other namespaces hold.
    """


class CorruptBlobError(CasStoreError, OSError):
    """The stored blob behind a reference is missing, truncated, undecodable, or its digest does not match."""

    def __init__(self, message: str, *, digest: str = "", missing: bool = False) -> None:
        """
        :param message: What is wrong, in words.
        :param digest: The BLAKE3 digest of the blob, named in the message so `casstore verify` output can be matched;
            empty when the damage is to the index as a whole.
        :param missing: True when the blob is gone (no row or no file) rather than damaged.
        """
        super().__init__(message)
        self.digest = digest
        self.missing = missing


class UnsafeBlobError(CorruptBlobError, ReferenceNotFoundError):
    """
    The blob path behind a reference is a symlink or not a regular file (planted, never written by casstore): refused,
    never followed.

    A `CorruptBlobError`, as the store was tampered with, and a `ReferenceNotFoundError`, as nothing this store wrote
    can be read behind the reference; code written to expect either catches it.
    """


class InvalidKeyError(CasStoreError, ValueError):
    """The key given to `write` cannot be recorded: empty, too long, or with NUL bytes or lone surrogates."""


class InvalidContentError(CasStoreError, ValueError):
    """The content given to `write` is a `str` that cannot be encoded as UTF-8 (for example a lone surrogate)."""


class StorageError(CasStoreError, OSError):
    """A write could not be stored: the disk is full, a file limit was hit, or the index refused the write.

    Nothing of that write was recorded: the index is left as it was before the write.
    """


class ReadOnlyStoreError(StorageError):
    """
    The store is on read-only media, or this process may not write its folder or `index.db`: it can be read (every
    reading command, `read`, the read tool), not written. A write, gc or copy into it raises this and changes nothing.

    A `StorageError`, as a write that could not be stored; code catching that keeps working.
    """


class SchemaError(CasStoreError):
    """The index was written by a newer casstore, or is not a casstore index at all."""


class StoreClosedError(CasStoreError):
    """The store was used after `close()`."""


class IndexDamagedError(SchemaError, CorruptBlobError):
    """
    `index.db` is damaged (SQLite finds it malformed, or not a database at all), so the store cannot open it.

    A `SchemaError`, as opening fails, and a `CorruptBlobError`, as the damage is to stored data: small blobs live in
    the index. docs/gc.md's "Recovery" says what to do.
    """


class ObjectSizeMismatchError(StorageError):
    """
    The object for a digest exists but has another size than the frame being written: it is damaged or was written
    with other settings. It is left as it is; the caller decides whether to read and check it or remove it.
    """


class BlobLocationError(CasStoreError, ValueError):
    """
    A shared store was opened with a blob location (`blob_url`) other than the one its index records, or one that
    holds another store's blobs: a mistyped prefix, not lost data. The message names both locations; nothing was
    changed. Blobs moved on purpose are recorded with `casstore relocate-blobs`.
    """


class SearchUnavailableError(CasStoreError):
    """
    The search index cannot be turned on for this index: its PostgreSQL server lacks the `pg_trgm` extension (the
    contrib modules) or the user may not create it. The message says what to install or ask for; nothing was changed.
    """
