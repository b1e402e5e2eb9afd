"""`repository.copies`, for `casstore copy`: each row and blob read out of a store, and imported into another."""

from collections import Counter
from collections.abc import Sequence

from casstore.errors import CorruptBlobError
from casstore.index import copy_rows
from casstore.index import scope as dedup_scopes
from casstore.index import writes as index
from casstore.index.copy_rows import ArchiveRow, CompactionRow, OffloadRow, WriteRow
from casstore.index.scope import DedupScope
from casstore.repository.core import RepositoryCore, lost_blobs


class Copies:
    """Reading a store out whole and importing another store's rows and blobs, times kept."""

    def __init__(self, core: RepositoryCore) -> None:
        self._core = core
        self._index = core.index
        self._database = core.database
        self._blobs = core.blobs
        self._guard = core.guard

    def blob_seen_times(self) -> dict[str, tuple[str, str]]:
        """:returns: Every blob's digest with its `(first_seen, last_seen)`."""
        with self._index() as connection:
            return self._blobs.seen_times(connection)

    def dedup_settings(self) -> DedupScope:
        """:returns: The dedup scope this store hashes with, its secret included (for `casstore copy` only)."""
        return self._core.dedup_scope()

    def adopt_dedup_scope(self, source: DedupScope) -> None:
        """
        Hash as `source` does from now on: an empty store takes its scope and secret (see `dedup_scopes.adopt`).

        :raises ValueError: If this store holds blobs and hashes otherwise.
        """
        core = self._core
        core.refuse_if_read_only("a copy cannot be made into it")
        with self._guard.held():
            create_index = getattr(self._database, "create", None)
            if create_index is not None:
                create_index()  # a lazy index is made now; one that exists is left as it is
            with self._database.transaction() as work:
                core.scope = dedup_scopes.adopt(work.connection, source, index=core.description)
            core.scope_settled = core.scope_read = True

    def blob_namespaces(self) -> dict[str, str]:
        """:returns: The namespace of every blob whose digest is keyed with one (`namespace` dedup scope)."""
        with self._index() as connection:
            return self._blobs.namespaces(connection)

    def blob_content(self, digest: str) -> bytes:
        """
        :returns: The verified content of the blob `digest`, whoever references it.
        :raises CorruptBlobError: If the blob is missing or damaged.
        """
        with self._guard.held():
            with self._index() as connection:
                location = self._blobs.locate(connection, digest)
            try:
                return self._blobs.load(location, guarded=False)
            except CorruptBlobError as error:
                self._core.mark_lost(lost_blobs(error))  # so the next write of it stores it again, as after a read
                raise

    def import_blob(self, digest: str, data: bytes, *, seen: tuple[str, str], namespace: str | None = None) -> None:
        """
        Store a blob copied from another store (`data` already verified against `digest`), keeping its times.

        :param namespace: The namespace whose key `digest` is keyed with, in a store of `namespace` dedup scope.
        """
        with self._guard.held():
            staged = self._blobs.stage(digest, data, namespace=namespace)
            with self._database.transaction() as work:
                self._blobs.put(work, staged, seen=seen)

    def write_rows(self) -> list[WriteRow]:
        """:returns: Every write's `(namespace, key, digest, kind, size, reference, written_at)`, in recorded order."""
        with self._index() as connection:
            return copy_rows.write_rows(connection)

    def offload_rows(self) -> "Counter[OffloadRow]":
        """:returns: How many offloads there are of each row's values."""
        with self._index() as connection:
            return copy_rows.offload_rows(connection)

    def archive_rows(self) -> "Counter[ArchiveRow]":
        """:returns: How many archives there are of each row's values."""
        with self._index() as connection:
            return copy_rows.archive_rows(connection)

    def compaction_rows(self) -> dict[str, CompactionRow]:
        """:returns: Every compaction's `(compaction_id, namespace, tokens_before, tokens_after, target_tokens,
        context_window, compacted_at)`, by id."""
        with self._index() as connection:
            return copy_rows.compaction_rows(connection)

    def import_writes(self, rows: Sequence[WriteRow]) -> None:
        """
        Append writes copied from another store, with their own times, in one transaction.

        :raises CorruptBlobError: If a write's blob is not stored here (copy the blobs first); nothing is appended.
        """
        with self._guard.held(), self._database.transaction() as work:
            for digest in sorted({row[2] for row in rows}):
                if not self._blobs.is_stored(work, digest):
                    raise CorruptBlobError(
                        f"Blob {digest} is not stored here; copy it before its writes.", digest=digest
                    )
            index.import_writes(work, rows)

    def import_offloads(self, rows: Sequence[OffloadRow]) -> None:
        """Append offloads copied from another store, with their own times, in one transaction."""
        with self._guard.held(), self._database.transaction() as work:
            index.import_offloads(work, rows)

    def import_archives(self, rows: Sequence[ArchiveRow]) -> None:
        """Append archives copied from another store, with their own times, in one transaction."""
        with self._guard.held(), self._database.transaction() as work:
            index.import_archives(work, rows)

    def import_compactions(self, rows: Sequence[CompactionRow]) -> None:
        """Append compactions copied from another store, with their own times, in one transaction (ids held already
        are skipped)."""
        with self._guard.held(), self._database.transaction() as work:
            index.import_compactions(work, rows)
