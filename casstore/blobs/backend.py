"""
`BlobBackend`: the one small interface behind which blobs too large for the index are kept, by digest.

Two backends implement it: a folder (`files.BlobDirectory`) and an object store (`objects.ObjectBlobs`); both run the
same contract tests (`tests/blobs/test_backend_contract.py`). A third place holds blobs, the index itself (table
`blob_frames`, written by `catalog.BlobCatalog.put`), and it is deliberately not a `BlobBackend`: a frame kept there
is written in the caller's write transaction, together with the row that says how to decode it, where a backend
writes outside any transaction (`encoder.BlobEncoder.stage`), before the row that names it commits.
"""

from collections.abc import Iterator
from typing import Protocol

from casstore.blobs.files import BlobFile

# What `blobs.stored_in` says of a blob whose frame is kept inside the index (a backend's blobs: its `stored_in`).
STORED_IN_INDEX = "index"


class BlobBackend(Protocol):
    """Where blobs too large for the index are kept, by digest: frames in, frames out, nothing decoded."""

    stored_in: str
    """What `blobs.stored_in` says of a blob kept here (`file`, `object`); a class attribute."""
    rows_imply_presence: bool
    """Whether a blob's row is proof that it is here (False where a file can vanish under its row)."""

    def write(self, digest: str, frame: bytes) -> object: ...  # False: something was there and was left alone
    def replace(self, digest: str, frame: bytes) -> None: ...
    # A digest that is not 64 lowercase hex digits (a row damaged by hand) names nothing: `read` raises ValueError,
    # `exists` says False, `remove` does nothing.
    def read(self, digest: str) -> bytes: ...  # FileNotFoundError when absent
    def exists(self, digest: str) -> bool: ...
    def remove(self, digest: str) -> None: ...  # absent already: not an error
    def files(self) -> Iterator[BlobFile]: ...
    def remove_stray(self, blob_file: BlobFile) -> None: ...
    def close(self) -> None: ...
