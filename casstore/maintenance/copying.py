"""
`copy_store`: move a store's content and history into another, such as a local store into a shared one when a user
outgrows one machine.

Every blob, write, offload, compaction and archive is copied with its namespace and its times. A copy compares what the
target holds with what the source holds, row by row (a write is its namespace, key, content, kind, size, reference and
time; a compaction is its id), and adds only what is missing, so running it twice adds nothing, and a copy that was
interrupted (even by `SIGKILL`) finishes when run again, with nothing lost or duplicated: blobs go first, each committed
alone; writes, offloads, compactions and archives follow in batches, each batch one transaction, and a batch's writes
are appended only once their blobs are there. A target that already had writes of its own keeps them; writes of the same
values in both count once per copy in the source.
"""

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from casstore.errors import CorruptBlobError
from casstore.repository import HasRepository, Repository, WriteRow, repository_of

# Rows appended per transaction.
_BATCH = 500


@dataclass
class CopyReport:
    """What `copy_store` added to the target, and what it could not copy."""

    blobs_copied: int = 0
    blob_bytes_copied: int = 0
    writes_copied: int = 0
    offloads_copied: int = 0
    compactions_copied: int = 0
    archives_copied: int = 0
    unreadable_blobs: list[str] = field(default_factory=list)
    writes_skipped: int = 0
    dedup_scope_adopted: str | None = None
    """The dedup scope the target took from the source, if it had no blobs and hashed otherwise before the copy."""

    @property
    def complete(self) -> bool:
        """:returns: Whether everything the source holds is now in the target."""
        return not self.unreadable_blobs and not self.writes_skipped


def copy_store(
    source: Repository | HasRepository,
    target: Repository | HasRepository,
    *,
    progress: Callable[[str, int, int], None] | None = None,
) -> CopyReport:
    """
    Copy every blob, write, offload, compaction and archive of `source` that `target` lacks.

    :param source: The store to copy from (any namespace; a store's own namespace is not used).
    :param target: The store to copy into.
    :param progress: Called as `progress(stage, done, total)` with stage `blobs`, `writes`, `offloads`,
        `compactions` or `archives`.
    :raises ValueError: If `target` holds blobs and its dedup scope (or secret) is not `source`'s: a copy keeps
        references, so a store of `namespace` scope copies only into an empty store or a copy of itself.
    :returns: The counts. A source blob that does not verify is not copied, nor are the writes that reference it;
        the report lists it, and `complete` is then False.
    """
    source, target = repository_of(source), repository_of(target)
    report = CopyReport()
    # References are copied as they are, so the target hashes as the source does (an empty target takes its scope).
    scope_before = target.dedup_scope  # its name and its secret: an empty target may take another secret alone
    target.copies.adopt_dedup_scope(source.copies.dedup_settings())
    if target.dedup_scope != scope_before:
        report.dedup_scope_adopted = target.dedup_scope.name
    keyed_for = source.copies.blob_namespaces()
    have = target.copies.blob_seen_times()
    wanted = {digest: seen for digest, seen in source.copies.blob_seen_times().items() if digest not in have}
    for done, (digest, seen) in enumerate(sorted(wanted.items()), start=1):
        try:
            data = source.copies.blob_content(digest)
        except CorruptBlobError:
            report.unreadable_blobs.append(digest)
        else:
            target.copies.import_blob(digest, data, seen=seen, namespace=keyed_for.get(digest))
            report.blobs_copied += 1
            report.blob_bytes_copied += len(data)
        if progress is not None:
            progress("blobs", done, len(wanted))

    unreadable = set(report.unreadable_blobs)
    in_target = Counter(target.copies.write_rows())
    missing_writes: list[WriteRow] = []
    for row in source.copies.write_rows():  # in the source's order; the first rows of a value are those present
        if in_target[row] > 0:
            in_target[row] -= 1
        elif row[2] in unreadable:
            report.writes_skipped += 1
        else:
            missing_writes.append(row)
    # In the order of their time (the row's 7th value), and within one time as the source has them: a stable sort.
    missing_writes.sort(key=lambda row: str(row[6]))
    for start in range(0, len(missing_writes), _BATCH):
        batch = missing_writes[start : start + _BATCH]
        target.copies.import_writes(batch)
        report.writes_copied += len(batch)
        if progress is not None:
            progress("writes", min(start + _BATCH, len(missing_writes)), len(missing_writes))

    # Offloads in the order of their time (the row's 8th value).
    report.offloads_copied = _copy_counted_rows(
        "offloads",
        in_source=source.copies.offload_rows(),
        in_target=target.copies.offload_rows(),
        import_rows=target.copies.import_offloads,
        time_column=7,
        progress=progress,
    )

    # A compaction's id is unique, so one present in the target is the same compaction.
    compactions_in_target = target.copies.compaction_rows()
    compactions_in_source = source.copies.compaction_rows()
    missing_compactions = sorted(
        (row for compaction_id, row in compactions_in_source.items() if compaction_id not in compactions_in_target),
        key=lambda row: (row[6], row[0]),
    )
    for start in range(0, len(missing_compactions), _BATCH):
        compactions = missing_compactions[start : start + _BATCH]
        target.copies.import_compactions(compactions)
        report.compactions_copied += len(compactions)
        if progress is not None:
            progress("compactions", min(start + _BATCH, len(missing_compactions)), len(missing_compactions))
    # Archives in the order of their time (the row's 9th value).
    report.archives_copied = _copy_counted_rows(
        "archives",
        in_source=source.copies.archive_rows(),
        in_target=target.copies.archive_rows(),
        import_rows=target.copies.import_archives,
        time_column=8,
        progress=progress,
    )
    return report


def _copy_counted_rows(
    stage: str,
    *,
    in_source: "Counter[Any]",
    in_target: "Counter[Any]",
    import_rows: Callable[[list[Any]], None],
    time_column: int,
    progress: Callable[[str, int, int], None] | None,
) -> int:
    """
    Import each row the source holds more often than the target, in batches, oldest first.

    :returns: How many rows were imported.
    """
    missing = [
        row
        for row, count in sorted(in_source.items(), key=lambda item: str(item[0][time_column]))  # stable, as above
        for _ in range(count - in_target.get(row, 0))
    ]
    for start in range(0, len(missing), _BATCH):
        import_rows(missing[start : start + _BATCH])
        if progress is not None:
            progress(stage, min(start + _BATCH, len(missing)), len(missing))
    return len(missing)
