"""
Checking and cleaning a store: `verify` re-hashes every blob, `collect_garbage` applies retention.

How `collect_garbage` stays safe beside running writers (the README's "Garbage collection" says the same):

- A write that finds its content already stored adds its `writes` row and, in the same `BEGIN IMMEDIATE`
  transaction, looks the blob up (refreshing its `last_seen` when due), unless its reference was visible already,
  which proves the blob is there (see the next point); a write of new content adds the blob row and the `writes` row
  in one transaction, after checking, under that transaction's lock, that the blob's file is in place.
- `collect_garbage` deletes a blob only inside a write transaction, only when no `writes` row references it and its
  `last_seen` is older than the grace period, and removes the blob's file before that transaction commits.
- SQLite lets one write transaction run at a time, so a blob a writer is referencing is either already referenced
  (and kept) or already gone (and the writer, which checks under the lock, stores it again).
- A blob file with no row (a writer's file staged but not yet recorded, or a crash's leftover) is removed only once
  its modification time is older than the grace period, again under the write lock.
"""

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta

from casstore.repository import HasRepository, Repository, repository_of

DEFAULT_GRACE = timedelta(hours=1)


@dataclass
class VerifyReport:
    """
    What `verify` found.

    `ok` is False when content is lost or at risk: a blob that does not verify (`corrupt`), a referenced blob whose
    file or row is gone (`missing`), a write whose blob row is gone (`dangling_writes`). `clean` is False as well when
    the store holds orphans, which are garbage rather than damage and which `gc` removes: blob or temporary files no
    row points at (`stray_files`; files changed since `verify` started belong to writes in flight and are not
    counted) and rows of unreferenced blobs whose file is gone (`stale_rows`, as a crash during `gc` can leave).
    `unreferenced_blobs` counts blobs no write references any more, healthy, which `gc` deletes once they are older
    than its grace period: information, not a finding.

    The search index is checked against the blobs too: `search_mismatched` counts documents whose blob is gone or
    whose trigrams do not hold their blob's text, and namespace entries of no document or of a forgotten reference
    (damage to the search index, not to content: `ok` is False, and
    `casstore search-index --rebuild` repairs it); `search_stray_rows` counts trigram rows of no document, left when
    gc removed a damaged blob (an orphan: matched by nothing, removed by a rebuild).
    """

    blobs_checked: int = 0
    corrupt: list[tuple[str, str]] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    dangling_writes: list[tuple[str, str]] = field(default_factory=list)
    stale_rows: int = 0
    stray_files: int = 0
    stray_bytes: int = 0
    unreferenced_blobs: int = 0
    search_documents_checked: int = 0
    search_mismatched: int = 0
    search_stray_rows: int = 0

    @property
    def ok(self) -> bool:
        """:returns: Whether every blob verified, every write has its blob, and the search index matches the blobs."""
        return not (self.corrupt or self.missing or self.dangling_writes or self.search_mismatched)

    @property
    def clean(self) -> bool:
        """:returns: Whether the store is `ok` and holds no orphans either (no stray file, no stale row)."""
        return self.ok and not (self.stray_files or self.stale_rows or self.search_stray_rows)


def verify(source: Repository | HasRepository, *, progress: Callable[[int, int], None] | None = None) -> VerifyReport:
    """
    Re-read and re-hash every blob, and look for writes without a blob, and for orphans: blob files without a row.

    :param source: The store (or its repository) to check, all namespaces.
    :param progress: Called as `progress(done, total)` after each blob.
    :returns: What was found.
    """
    repository = repository_of(source)
    report = VerifyReport()
    started = time.time()
    snapshot = repository.integrity_snapshot()
    report.dangling_writes = snapshot.dangling_writes
    for done, digest in enumerate(snapshot.digests, start=1):
        check = repository.check_blob(digest)
        if check.status == "corrupt":
            report.corrupt.append((digest, check.message))
        elif check.status == "missing":
            if digest in snapshot.unreferenced:
                report.stale_rows += 1
            else:
                report.missing.append(digest)
        report.blobs_checked = done
        if progress is not None:
            progress(done, len(snapshot.digests))
    report.unreferenced_blobs = len(snapshot.unreferenced) - report.stale_rows
    report.stray_files, report.stray_bytes = repository.stray_files(modified_before=started)
    search = repository.check_search_index()
    report.search_documents_checked = search.documents
    report.search_mismatched = search.without_blob + search.mismatched + search.stray_entries
    report.search_stray_rows = search.stray_rows
    return report


@dataclass
class GarbageReport:
    """
    What `collect_garbage` removed (or, with `dry_run`, would remove), and what the store occupied before and after:
    `index_bytes` (`index.db` on disk; casstore's tables in PostgreSQL, whose freed space autovacuum reuses) and
    `blob_bytes` (the blob files; the objects under the prefix).
    """

    dry_run: bool
    writes_forgotten: int = 0
    offloads_forgotten: int = 0
    blobs_deleted: int = 0
    blob_bytes_freed: int = 0
    stray_files_removed: int = 0
    stray_bytes_freed: int = 0
    index_bytes_before: int = 0
    blob_bytes_before: int = 0
    index_bytes_after: int = 0
    blob_bytes_after: int = 0


def collect_garbage(
    source: Repository | HasRepository,
    *,
    namespace: str | None = None,
    older_than: timedelta | None = None,
    grace: timedelta = DEFAULT_GRACE,
    dry_run: bool = False,
) -> GarbageReport:
    """
    Forget writes, then delete blobs nothing references and stray files, all outside the grace period.

    :param source: The store (or its repository) to clean, any namespace (a store's own namespace is not used).
    :param namespace: Forget every write and offload of this namespace.
    :param older_than: Forget writes and offloads older than this. With `namespace`, only that namespace's.
    :param grace: Blobs seen (written or re-written) and files modified within this period are kept.
    :param dry_run: Report what would go, and change nothing.
    :returns: The counts.
    :raises ValueError: If `grace` or `older_than` is negative.
    """
    if grace < timedelta(0) or (older_than is not None and older_than < timedelta(0)):
        raise ValueError("`grace` and `older_than` must not be negative.")
    repository = repository_of(source)
    index_before, blobs_before = repository.footprint()
    if dry_run:
        # The forgetting and the blob selection run in one transaction that is rolled back; no file is touched.
        forgotten = repository.preview_collection(namespace=namespace, older_than=older_than, grace=grace)
        collected = forgotten
    else:
        forgotten = repository.forget(namespace=namespace, older_than=older_than)
        collected = repository.delete_collectable_blobs(grace=grace)
    strays, stray_bytes = repository.remove_stray_files(
        modified_before=time.time() - grace.total_seconds(), dry_run=dry_run
    )
    index_after, blobs_after = repository.footprint()
    return GarbageReport(
        dry_run=dry_run,
        index_bytes_before=index_before,
        blob_bytes_before=blobs_before,
        index_bytes_after=index_after,
        blob_bytes_after=blobs_after,
        writes_forgotten=forgotten.writes_forgotten,
        offloads_forgotten=forgotten.offloads_forgotten,
        blobs_deleted=collected.blobs_deleted,
        blob_bytes_freed=collected.blob_bytes_freed,
        stray_files_removed=strays,
        stray_bytes_freed=stray_bytes,
    )
