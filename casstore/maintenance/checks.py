"""
Checking and cleaning a store: `verify` re-hashes every blob, `collect_garbage` applies retention.

How `collect_garbage` stays safe beside running writers (docs/gc.md says the same):

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

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta

from casstore.errors import StorageError
from casstore.repository import Collection, HasRepository, Repository, repository_of

DEFAULT_GRACE = timedelta(hours=1)


@dataclass
class VerifyReport:
    """
    What `verify` found.

    `ok` is False when content is lost or at risk: a blob or a trained dictionary that does not verify (`corrupt`, by
    digest: a blob that needs a damaged dictionary or base is listed too), a referenced blob whose file or row is gone
    (`missing`), a write whose blob row is gone (`dangling_writes`, by namespace and key). `clean` is False as well when
    the store holds orphans, which are garbage rather than damage and which `gc` removes: blob or temporary files no row
    points at (`stray_files`; files changed since `verify` started belong to writes in flight and are not counted) and
    rows of unreferenced blobs whose file is gone (`stale_rows`, as a crash during `gc` can leave). `unreferenced_blobs`
    counts blobs no write references any more, healthy, which `gc` deletes once they are older than its grace period:
    information, not a finding.

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


def _rebuild_or_give_back(repository: Repository, collected: Collection, *, asked: bool) -> bool:
    # A rebuild needs free disk of about twice the index: a gc run to free a full disk may not have it. Then the space
    # goes back in steps (which need next to none) before saying what is left to do, so the disk still comes back.
    # :returns: Whether the rebuilt index is all the files hold (`Retention.rebuild_index`).
    try:
        return repository.retention.rebuild_index()
    except StorageError as error:
        if asked:
            raise
        repository.retention.return_free_space()
        raise StorageError(
            f"gc deleted {collected.blobs_deleted} blobs and {collected.dictionaries_deleted} dictionaries and gave "
            f"their space back, but could not rebuild the index afterwards ({error}), so copies of deleted bytes may "
            f"remain inside index.db. Free disk space (a rebuild needs about twice the size of index.db), then run "
            f"casstore gc --vacuum."
        ) from error


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
    snapshot = repository.retention.integrity_snapshot()
    report.dangling_writes = snapshot.dangling_writes
    for done, digest in enumerate(snapshot.digests, start=1):
        check = repository.retention.check_blob(digest)
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
    for digest in snapshot.dictionaries:
        check = repository.retention.check_dictionary(digest)
        if check.status == "corrupt":
            report.corrupt.append((digest, check.message))
    report.unreferenced_blobs = len(snapshot.unreferenced) - report.stale_rows
    report.stray_files, report.stray_bytes = repository.retention.stray_files(modified_before=started)
    search = repository.search.check()
    report.search_documents_checked = search.documents
    report.search_mismatched = search.without_blob + search.mismatched + search.stray_entries
    report.search_stray_rows = search.stray_rows
    return report


@dataclass
class GarbageReport:
    """
    What `collect_garbage` removed (or, with `dry_run`, would remove), and what the store occupied before and after.

    - `index_bytes_*`: `index.db` on disk with its write-ahead log (not `index.db-shm`), after the space of what gc
      deleted went back to the file system; for a shared store, casstore's tables in PostgreSQL, whose deleted rows'
      space autovacuum makes reusable but does not give back (`index_space` says which happened).
    - `blob_bytes_*`: the blob files on disk (the objects under the prefix). A dry run's `*_after` are estimates.
    - `index_space`: `returned` (given back in short steps), `rebuilt` (a full rebuild: with `vacuum`, or after
      deleting a blob or a dictionary from a SQLite index, so no byte of them stays in the file),
      `kept-until-rebuilt` (an index made before casstore set `auto_vacuum` keeps free pages for later writes until
      one `gc --vacuum` converts it), `reused-after-autovacuum` (PostgreSQL), `vacuumed` (PostgreSQL, with `vacuum`).
    - `dictionaries_deleted`: trained dictionaries deleted (retired, or trained only on deleted results, and used by
      no kept blob). `bases_kept`, `dictionaries_kept`: what holds bytes of deleted results and stays while a kept
      blob needs it (blobs no write names kept as a delta base; dictionaries trained on deleted results that a kept
      blob uses).
    - `blobs_waiting`, `waiting_bytes`, `collectable_from`: blobs no reference is visible for that the grace period
      keeps, their stored bytes, and when (UTC) the first becomes collectable (None when none wait).
    - With `max_size`: `needed_bytes_before`/`_after`, the stored bytes of the blobs the writes in scope need (their
      dependencies included), and `over_max_size`, by how much what the scope holds after gc (those blobs, and the
      forgotten ones the grace period keeps: every waiting blob store-wide, or with `namespace` those its forgotten
      writes referenced) exceeds `max_size`; 0 when it fits.
    - `old_pages_held`: the index was rebuilt, but another connection was still reading an older state of it when gc
      ended, so `index.db` and its log keep those pages, deleted content included, until that read ends. gc waits
      for such a reader only briefly, as its checkpoint holds writers off (about 5 tries 200 ms apart, one if the log
      is under 8 MiB; up to two minutes only while another connection checkpoints): run gc again once the reader is
      done, and it (or the store's last connection closing) leaves only the rebuilt index.
    """

    dry_run: bool
    writes_forgotten: int = 0
    offloads_forgotten: int = 0
    blobs_deleted: int = 0
    blob_bytes_freed: int = 0
    dictionaries_deleted: int = 0
    bases_kept: int = 0
    dictionaries_kept: int = 0
    stray_files_removed: int = 0
    stray_bytes_freed: int = 0
    index_bytes_before: int = 0
    blob_bytes_before: int = 0
    index_bytes_after: int = 0
    blob_bytes_after: int = 0
    index_space: str = "returned"
    blobs_waiting: int = 0
    waiting_bytes: int = 0
    collectable_from: str | None = None
    max_size: int | None = None
    needed_bytes_before: int | None = None
    needed_bytes_after: int | None = None
    over_max_size: int = 0
    old_pages_held: bool = False

    @property
    def disk_bytes_before(self) -> int:
        """:returns: The index's and the blobs' bytes before gc."""
        return self.index_bytes_before + self.blob_bytes_before

    @property
    def disk_bytes_after(self) -> int:
        """:returns: The index's and the blobs' bytes after gc (a dry run's estimate)."""
        return self.index_bytes_after + self.blob_bytes_after


def collect_garbage(
    source: Repository | HasRepository,
    *,
    namespace: str | None = None,
    older_than: timedelta | None = None,
    grace: timedelta = DEFAULT_GRACE,
    max_size: int | None = None,
    vacuum: bool = False,
    dry_run: bool = False,
) -> GarbageReport:
    """
    Forget writes, then delete blobs nothing references and stray files, all outside the grace period, and give the
    space back to the file system.

    :param source: The store (or its repository) to clean, any namespace (a store's own namespace is not used).
    :param namespace: Forget every write and offload of this namespace; with `max_size`, only this namespace's
        writes count towards the size and are forgotten.
    :param older_than: Forget writes and offloads older than this. With `namespace`, only that namespace's.
    :param grace: Blobs seen (written or re-written) and files modified within this period are kept.
    :param max_size: Then forget the least recently written writes, oldest first (with the offloads recorded no later
        than the last of them), until the blobs the remaining writes need take at most this many stored bytes.
        Exceeding it afterwards (the grace period keeps forgotten blobs) is reported in `over_max_size`, not raised.
    :param vacuum: Rebuild the index afterwards, whatever was deleted (SQLite: a full `VACUUM`, which holds writers off
        while it runs, and which a run that deletes a blob or a dictionary does anyway, so that no byte of it stays
        inside `index.db`; PostgreSQL: `VACUUM FULL` of the tables that hold content, so deleted rows' bytes leave
        its files; it locks those tables against readers and writers while it runs).
    :param dry_run: Report what would go and estimate the sizes after, and change nothing.
    :returns: The counts and sizes.
    :raises ValueError: If `grace`, `older_than` or `max_size` is negative.
    :raises ReadOnlyStoreError: If the store is read-only; nothing is changed.
    """
    if grace < timedelta(0) or (older_than is not None and older_than < timedelta(0)):
        raise ValueError("`grace` and `older_than` must not be negative.")
    if max_size is not None and max_size < 0:
        raise ValueError(f"`max_size` must be a number of bytes, 0 or more; got {max_size}.")
    repository = repository_of(source)
    if repository.read_only:
        # A dry run too: it finds what would go by deleting it in a transaction that is rolled back.
        raise repository.read_only_error("gc cannot collect anything in it, nor preview that with --dry-run")
    index_before, blobs_before = repository.history.footprint()
    report = GarbageReport(
        dry_run=dry_run, index_bytes_before=index_before, blob_bytes_before=blobs_before, max_size=max_size
    )
    if dry_run:
        # The forgetting and the deletions run in one transaction that is rolled back; no file is touched.
        preview = repository.retention.preview_collection(
            namespace=namespace, older_than=older_than, grace=grace, max_size=max_size, rebuild=vacuum
        )
        collected = preview.collection
        waiting, released_waiting, needed_after = preview.waiting, preview.released_waiting, preview.needed_bytes_after
        strays, stray_bytes = repository.retention.remove_stray_files(
            modified_before=time.time() - grace.total_seconds(), dry_run=True
        )
        # Collecting only deletes, so the estimate never exceeds what is there: a store never written (no index file,
        # previewed on an empty stand-in whose schema pages are in memory) answers 0 after as before.
        estimate = index_before if preview.index_bytes_after is None else preview.index_bytes_after
        report.index_bytes_after = min(index_before, estimate)
        report.blob_bytes_after = max(0, blobs_before - preview.outside_bytes_freed - stray_bytes)
        rebuild = vacuum or repository.retention.rebuilds_after(collected)
        report.index_space = repository.retention.index_space(rebuild=rebuild)
    else:
        forgotten = repository.retention.forget(namespace=namespace, older_than=older_than, max_size=max_size)
        deleted = repository.retention.delete_collectable_blobs(grace=grace)
        collected = dataclasses.replace(
            deleted,
            writes_forgotten=forgotten.writes_forgotten,
            offloads_forgotten=forgotten.offloads_forgotten,
            needed_bytes_before=forgotten.needed_bytes_before,
            released=forgotten.released,
        )
        strays, stray_bytes = repository.retention.remove_stray_files(
            modified_before=time.time() - grace.total_seconds(), dry_run=False
        )
        # Deleted means deleted: on SQLite, a run that deleted content rebuilds the index, so no copy of it stays
        # inside a page (docs/gc.md); otherwise the freed pages go back in short steps beside writers.
        rebuild = vacuum or repository.retention.rebuilds_after(collected)
        report.index_space = repository.retention.index_space(rebuild=rebuild)
        if rebuild:
            report.old_pages_held = not _rebuild_or_give_back(repository, collected, asked=vacuum)
        else:
            repository.retention.return_free_space()
        waiting = repository.retention.waiting_blobs(grace=grace)
        released_waiting = repository.retention.waiting_blobs(grace=grace, among=collected.released)
        needed_after = None if max_size is None else repository.retention.needed_bytes(namespace=namespace)
        report.index_bytes_after, report.blob_bytes_after = repository.history.footprint()
    report.writes_forgotten, report.offloads_forgotten = collected.writes_forgotten, collected.offloads_forgotten
    report.blobs_deleted, report.blob_bytes_freed = collected.blobs_deleted, collected.blob_bytes_freed
    report.dictionaries_deleted = collected.dictionaries_deleted
    report.bases_kept, report.dictionaries_kept = collected.bases_kept, collected.dictionaries_kept
    report.stray_files_removed, report.stray_bytes_freed = strays, stray_bytes
    report.blobs_waiting, report.waiting_bytes = waiting.count, waiting.stored_bytes
    report.collectable_from = waiting.collectable_from
    if max_size is not None:
        report.needed_bytes_before, report.needed_bytes_after = collected.needed_bytes_before, needed_after
        kept_by_grace = waiting.stored_bytes if namespace is None else released_waiting.stored_bytes
        report.over_max_size = max(0, (needed_after or 0) + kept_by_grace - max_size)
    return report
