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
from casstore.index.prepared import PreparedWrite
from casstore.index.writes import ArchiveRecord, CompactionRecord, OffloadRecord
from casstore.stores.local import ContentAddressedToolResultStore
from casstore.stores.shared import SharedToolResultStore

__all__ = [
    "ArchiveRecord",
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
