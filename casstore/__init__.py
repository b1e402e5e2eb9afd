"""
casstore: a content-addressed, deduplicating `ToolResultStore` for Haystack agents, with a SQLite offload history.

```python
from casstore import ContentAddressedToolResultStore
```
"""

from casstore.errors import (
    BlobLocationError,
    CasStoreError,
    CorruptBlobError,
    IndexDamagedError,
    InvalidContentError,
    InvalidKeyError,
    InvalidReferenceError,
    ReadOnlyStoreError,
    ReferenceNotFoundError,
    SchemaError,
    SearchUnavailableError,
    StorageError,
    StoreClosedError,
    UnsafeBlobError,
)
from casstore.index import CompactionRecord, OffloadRecord
from casstore.prepared import PreparedWrite
from casstore.shared_store import SharedToolResultStore
from casstore.store import ContentAddressedToolResultStore

__all__ = [
    "BlobLocationError",
    "CasStoreError",
    "CompactionRecord",
    "ContentAddressedToolResultStore",
    "CorruptBlobError",
    "IndexDamagedError",
    "InvalidContentError",
    "InvalidKeyError",
    "InvalidReferenceError",
    "OffloadRecord",
    "PreparedWrite",
    "ReadOnlyStoreError",
    "ReferenceNotFoundError",
    "SchemaError",
    "SearchUnavailableError",
    "SharedToolResultStore",
    "StorageError",
    "StoreClosedError",
    "UnsafeBlobError",
]
