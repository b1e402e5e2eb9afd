"""
`BlobHints`: which blobs this process stored or confirmed lately, so that a writer can skip a look-up that would
change nothing.

A hint is only ever learned from a transaction that committed (the blob layer publishes it through the transaction's
`on_commit`), and it is never proof that a blob is still stored: a write whose reference was visible found it through
the blob's row in its own transaction, and the hint only spares it rewriting `last_seen` that it made current less
than `LAST_SEEN_RESOLUTION` ago (and looking whether a read found it lost since: `needs_confirmation`). gc adds
nothing to its grace period for it: no writer relies on the grace period.
"""

import threading
import time
from datetime import timedelta

# How stale `last_seen` may get: a write refreshes it only when it is older than this.
LAST_SEEN_RESOLUTION = timedelta(seconds=1)
_RESOLUTION_SECONDS = LAST_SEEN_RESOLUTION.total_seconds()
# How many digests are remembered, least recently learned first out.
_REMEMBERED = 65_536


class BlobHints:
    """Digest -> when its `last_seen` was current (`time.monotonic()`) and whether it lives in the index."""

    def __init__(self) -> None:
        self._known: dict[str, tuple[float, bool]] = {}
        self._lock = threading.Lock()

    def now(self) -> float:
        """:returns: The clock the hints are kept in (tests replace this module's `time`)."""
        return time.monotonic()

    def remember(self, digest: str, *, current_at: float, in_index: bool) -> None:
        """Note that the blob was stored, with `last_seen` current as of `current_at`; call only after a commit."""
        with self._lock:
            known = self._known
            known.pop(digest, None)
            known[digest] = (current_at, in_index)
            while len(known) > _REMEMBERED:
                del known[next(iter(known))]

    def forget(self, digest: str) -> None:
        """Drop what is known of the blob (found lost): the next write of it looks at its row again."""
        with self._lock:
            self._known.pop(digest, None)

    def known(self, digest: str) -> bool:
        """:returns: Whether the blob was stored or confirmed lately: a hint, never proof."""
        return digest in self._known

    def needs_confirmation(self, digest: str) -> bool:
        """
        Whether a write whose reference was visible (so its blob row is there: the write's statement found the
        reference through it) should still confirm the blob, refreshing `last_seen`.

        :returns: False only if the blob was stored or confirmed less than `LAST_SEEN_RESOLUTION` ago and lives in the
            index (or as an object). A blob file could have been removed since, and only a confirmation notices; so
            does only a confirmation notice a blob found lost (`BlobCatalog.mark_lost`): one another process found
            lost within that second is stored again by the first write after it (this process's own finding drops
            the hint at once).
        """
        known = self._known.get(digest)
        # `time.monotonic()` as `now()` reads it, called here directly: this is on every duplicate write's path.
        return known is None or not known[1] or known[0] <= time.monotonic() - _RESOLUTION_SECONDS
