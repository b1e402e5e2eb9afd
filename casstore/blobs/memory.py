"""
`VerifiedContent`: the dictionaries and delta bases this process has read or stored and verified, kept in memory for
the next write or read that needs them (`ContentCache`, bounded by bytes, plus the few trained dictionaries with
their zstd tables).
"""

import threading
from collections import OrderedDict

from casstore import forks
from casstore.blobs.frames import DELTA, DICTIONARY, FrameDictionary

# Trained dictionaries kept in memory, verified (each 16 KiB and its zstd contexts).
_TRAINED_KEPT = 64
# Bytes of verified dictionaries and bases kept in memory for the next write or read that needs them.
CONTENT_CACHE_BYTES = 8 * 1024 * 1024


class ContentCache:
    """Verified content of dictionaries and bases by digest, least recently used dropped past `CONTENT_CACHE_BYTES`."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._bytes = 0
        self._items: OrderedDict[tuple[str, str], tuple[int, object]] = OrderedDict()
        self._lock = threading.Lock()
        self._generation = forks.generation

    def _after_fork(self) -> None:
        # The lock may have been held by a thread the child does not have; what the cache holds stays true.
        self._lock = threading.Lock()
        self._generation = forks.generation

    def get(self, kind: str, digest: str) -> object | None:
        if self._generation != forks.generation:
            self._after_fork()
        with self._lock:
            item = self._items.get((kind, digest))
            if item is None:
                return None
            self._items.move_to_end((kind, digest))
            return item[1]

    def put(self, kind: str, digest: str, value: object, size: int) -> None:
        if self._generation != forks.generation:
            self._after_fork()
        with self._lock:
            if (kind, digest) not in self._items:
                self._store(kind, digest, value, size)

    def discard(self, digest: str) -> None:
        """Forget `digest` under every kind (a blob gc deleted: it must be looked up, and found gone, again)."""
        if self._generation != forks.generation:
            self._after_fork()
        with self._lock:
            for kind in (DICTIONARY, DELTA):
                old = self._items.pop((kind, digest), None)
                if old is not None:
                    self._bytes -= old[0]

    def replace(self, kind: str, digest: str, value: object, size: int) -> None:
        if self._generation != forks.generation:
            self._after_fork()
        with self._lock:
            old = self._items.pop((kind, digest), None)
            if old is not None:
                self._bytes -= old[0]
            self._store(kind, digest, value, size)

    def _store(self, kind: str, digest: str, value: object, size: int) -> None:
        if size > self._limit // 4:
            return
        self._items[(kind, digest)] = (size, value)
        self._bytes += size
        while self._bytes > self._limit:
            _, (dropped, _) = self._items.popitem(last=False)
            self._bytes -= dropped


class VerifiedContent:
    """What a learned frame needs, verified: trained dictionaries by digest, and the content cache."""

    def __init__(self) -> None:
        self.cache = ContentCache(CONTENT_CACHE_BYTES)
        # Trained dictionaries by digest, verified: few, small, and asked on every read or write that uses one, so a
        # plain dict (no lock: a look-up and an assignment are atomic) in front of the cache.
        self.trained: dict[str, FrameDictionary] = {}

    def keep_trained(self, dictionary: FrameDictionary) -> None:
        """Keep a verified trained dictionary (all of them dropped past `_TRAINED_KEPT`: they are few)."""
        if len(self.trained) >= _TRAINED_KEPT:
            self.trained.clear()
        self.trained[dictionary.digest] = dictionary

    def forget(self, digest: str) -> None:
        """Forget a dictionary or base gc deleted: the next write looks it up and trains or finds anew."""
        self.trained.pop(digest, None)
        self.cache.discard(digest)
