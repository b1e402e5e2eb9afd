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

import sqlite3
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta

from casstore.blob_files import BlobFile
from casstore.blobs import LAST_SEEN_RESOLUTION
from casstore.database import SHIFTED_NOW_SQL, ago
from casstore.errors import CorruptBlobError
from casstore.index import dangling_writes, forget_offloads, forget_writes, unreferenced_digests
from casstore.store import ContentAddressedToolResultStore

DEFAULT_GRACE = timedelta(hours=1)
# Rows deleted per transaction, so writers never wait long for the write lock.
_BATCH = 500


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
    """

    blobs_checked: int = 0
    corrupt: list[tuple[str, str]] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    dangling_writes: list[tuple[str, str]] = field(default_factory=list)
    stale_rows: int = 0
    stray_files: int = 0
    stray_bytes: int = 0
    unreferenced_blobs: int = 0

    @property
    def ok(self) -> bool:
        """:returns: Whether every blob verified and every write has its blob."""
        return not (self.corrupt or self.missing or self.dangling_writes)

    @property
    def clean(self) -> bool:
        """:returns: Whether the store is `ok` and holds no orphans either (no stray file, no stale row)."""
        return self.ok and not (self.stray_files or self.stale_rows)


def verify(
    store: ContentAddressedToolResultStore, *, progress: Callable[[int, int], None] | None = None
) -> VerifyReport:
    """
    Re-read and re-hash every blob, and look for writes without a blob, and for orphans: blob files without a row.

    :param store: The store to check (all namespaces).
    :param progress: Called as `progress(done, total)` after each blob.
    :returns: What was found.
    """
    report = VerifyReport()
    started = time.time()
    with store.keep_open():
        with store.database.snapshot() as connection:
            digests = store.blobs.digests(connection)
            report.dangling_writes = dangling_writes(connection)
            unreferenced = set(unreferenced_digests(connection))
        for done, digest in enumerate(digests, start=1):
            _verify_blob(store, report, digest, unreferenced=digest in unreferenced)
            report.blobs_checked = done
            if progress is not None:
                progress(done, len(digests))
        report.unreferenced_blobs = len(unreferenced) - report.stale_rows
        for blob_file in store.blobs.stray_files():
            if blob_file.mtime >= started:
                continue  # written since verify started: a write in flight, whose row may not be committed yet
            with store.database.reading() as connection:
                if store.blobs.is_stray(connection, blob_file):
                    report.stray_files += 1
                    report.stray_bytes += blob_file.size
    return report


def _verify_blob(
    store: ContentAddressedToolResultStore, report: VerifyReport, digest: str, *, unreferenced: bool
) -> None:
    try:
        with store.database.reading() as connection:
            stored = store.blobs.fetch(connection, digest)
        store.blobs.load(stored)
    except CorruptBlobError as error:
        if not error.missing:
            report.corrupt.append((digest, str(error)))
            return
        with store.database.reading() as connection:
            collected_meanwhile = not store.blobs.has(connection, digest)
        if collected_meanwhile:
            return  # a concurrent gc deleted it after the list was taken
        if unreferenced:
            report.stale_rows += 1
        else:
            report.missing.append(digest)


@dataclass
class GarbageReport:
    """What `collect_garbage` removed (or, with `dry_run`, would remove)."""

    dry_run: bool
    writes_forgotten: int = 0
    offloads_forgotten: int = 0
    blobs_deleted: int = 0
    blob_bytes_freed: int = 0
    stray_files_removed: int = 0
    stray_bytes_freed: int = 0


def collect_garbage(
    store: ContentAddressedToolResultStore,
    *,
    namespace: str | None = None,
    older_than: timedelta | None = None,
    grace: timedelta = DEFAULT_GRACE,
    dry_run: bool = False,
) -> GarbageReport:
    """
    Forget writes, then delete blobs nothing references and stray files, all outside the grace period.

    :param store: The store to clean (any namespace; `store.namespace` is not used).
    :param namespace: Forget every write and offload of this namespace.
    :param older_than: Forget writes and offloads older than this. With `namespace`, only that namespace's.
    :param grace: Blobs seen (written or re-written) and files modified within this period are kept.
    :param dry_run: Report what would go, and change nothing.
    :returns: The counts.
    :raises ValueError: If `grace` or `older_than` is negative.
    """
    if grace < timedelta(0) or (older_than is not None and older_than < timedelta(0)):
        raise ValueError("`grace` and `older_than` must not be negative.")
    report = GarbageReport(dry_run=dry_run)
    with store.keep_open():
        if dry_run:
            # The whole collection runs in one transaction that is rolled back; no file is touched.
            with store.database.rolled_back() as connection:
                _forget(connection, report, namespace=namespace, older_than=older_than)
                for _digest, stored_size in _collectable_blobs(connection, grace=grace):
                    report.blobs_deleted += 1
                    report.blob_bytes_freed += stored_size
        else:
            with store.database.transaction() as connection:
                _forget(connection, report, namespace=namespace, older_than=older_than)
            _delete_unreferenced_blobs(store, report, grace=grace)
        _remove_stray_files(store, report, grace=grace, dry_run=dry_run)
    return report


def _forget(
    connection: sqlite3.Connection, report: GarbageReport, *, namespace: str | None, older_than: timedelta | None
) -> None:
    if namespace is None and older_than is None:
        return
    for forget, column in ((forget_writes, "written_at"), (forget_offloads, "offloaded_at")):
        clauses: list[str] = []
        parameters: list[object] = []
        if namespace is not None:
            clauses.append("namespace = ?")
            parameters.append(namespace)
        if older_than is not None:
            clauses.append(f"{column} < {SHIFTED_NOW_SQL}")
            parameters.append(ago(older_than))
        deleted = forget(connection, where=" AND ".join(clauses), parameters=parameters)
        if forget is forget_writes:
            report.writes_forgotten = deleted
        else:
            report.offloads_forgotten = deleted


_COLLECTABLE = (
    f"last_seen <= {SHIFTED_NOW_SQL} AND NOT EXISTS (SELECT 1 FROM visible_references WHERE digest = blobs.digest)"
)


def _grace_parameter(grace: timedelta) -> str:
    # `last_seen` may lag a write by up to its resolution, so that much is added to the grace period.
    return ago(grace + LAST_SEEN_RESOLUTION)


def _collectable_blobs(connection: sqlite3.Connection, *, grace: timedelta) -> list[tuple[str, int]]:
    rows = connection.execute(f"SELECT digest, stored_size FROM blobs WHERE {_COLLECTABLE}", (_grace_parameter(grace),))
    return [(row[0], row[1]) for row in rows]


def _delete_unreferenced_blobs(
    store: ContentAddressedToolResultStore, report: GarbageReport, *, grace: timedelta
) -> None:
    # Candidates come from one scan without the write lock; each is checked again, by key, under the lock, so a
    # writer waits for at most one batch of deletions, however large the store.
    with store.database.reading() as connection:
        candidates = _collectable_blobs(connection, grace=grace)
    for start in range(0, len(candidates), _BATCH):
        with store.database.transaction() as connection:
            for digest, stored_size in candidates[start : start + _BATCH]:
                still_collectable = connection.execute(
                    f"SELECT 1 FROM blobs WHERE digest = ? AND {_COLLECTABLE}", (digest, _grace_parameter(grace))
                ).fetchone()
                if still_collectable and store.blobs.delete(connection, digest):
                    report.blobs_deleted += 1
                    report.blob_bytes_freed += stored_size


def _remove_stray_files(
    store: ContentAddressedToolResultStore, report: GarbageReport, *, grace: timedelta, dry_run: bool
) -> None:
    for batch in _batches(store.blobs.stray_files()):
        with store.database.transaction() as connection:
            cutoff = time.time() - grace.total_seconds()
            for blob_file in batch:
                if blob_file.mtime >= cutoff or not store.blobs.is_stray(connection, blob_file):
                    continue
                if not dry_run:
                    store.blobs.remove_stray(blob_file)
                report.stray_files_removed += 1
                report.stray_bytes_freed += blob_file.size


def _batches(files: Iterator[BlobFile]) -> Iterator[list[BlobFile]]:
    batch: list[BlobFile] = []
    for blob_file in files:
        batch.append(blob_file)
        if len(batch) == _BATCH:
            yield batch
            batch = []
    if batch:
        yield batch
