"""
The catalog: one `blobs` row per stored blob (its size, where it is: `stored_in`, and how it is encoded: `encoding`,
`dictionary_id`, `base_id`), the `blob_frames` row of a blob kept inside the index, and the trained `dictionaries`.

`BlobCatalog` records and confirms blobs inside the caller's write transaction (a `UnitOfWork`), so a blob and the
history row that references it commit together; what it learns (that a blob is stored) is published to `BlobHints`
by the transaction once it commits. A frame kept in the index is written here, with its row; a larger one is already
in the backend (`encoder.BlobEncoder.stage`).
"""

import sqlite3
from collections.abc import Sequence
from functools import partial

from casstore.blobs.backend import STORED_IN_INDEX, BlobBackend
from casstore.blobs.encoder import ACTIVE_DICTIONARY_SQL, StagedBlob
from casstore.blobs.frames import DICTIONARY, PLAIN
from casstore.blobs.hints import LAST_SEEN_RESOLUTION, BlobHints
from casstore.blobs.memory import VerifiedContent
from casstore.index.work import NOW_SQL, SHIFTED_NOW_SQL, UnitOfWork, ago
from casstore.references import content_digest

_CONFIRM_AGO = ago(LAST_SEEN_RESOLUTION)
_RESOLUTION_SECONDS = LAST_SEEN_RESOLUTION.total_seconds()
_COLUMNS = "digest, size, stored_size, stored_in, encoding, dictionary_id, base_id, first_seen, last_seen, namespace"
# A plain frame's row; a row already there is replaced (either layout holds the same content), keeping its id (a
# delta may be on it) and its first_seen. A blob found lost is stored again this way, so it is no longer lost.
_REPLACED = (
    "size = excluded.size, stored_size = excluded.stored_size, stored_in = excluded.stored_in, "
    "encoding = excluded.encoding, dictionary_id = NULL, base_id = NULL, lost_at = NULL"
)
_PUT_SQL = (
    f"INSERT INTO blobs ({_COLUMNS}) VALUES (?, ?, ?, ?, '{PLAIN}', NULL, NULL, {NOW_SQL}, {NOW_SQL}, ?) "
    f"ON CONFLICT (digest) DO UPDATE SET last_seen = excluded.last_seen, {_REPLACED} RETURNING id"
)
# The same for a blob copied from another store, which keeps its times; a row already there keeps its own.
_IMPORT_SQL = (
    f"INSERT INTO blobs ({_COLUMNS}) VALUES (?, ?, ?, ?, '{PLAIN}', NULL, NULL, ?, ?, ?) "
    f"ON CONFLICT (digest) DO UPDATE SET {_REPLACED} RETURNING id"
)
# A learned frame's row, only for content that has none yet (see `_needed_id`).
_PUT_LEARNED_SQL = (
    f"INSERT INTO blobs ({_COLUMNS}) VALUES (?, ?, ?, '{STORED_IN_INDEX}', ?, ?, ?, {NOW_SQL}, {NOW_SQL}, ?) "
    "ON CONFLICT (digest) DO NOTHING RETURNING id"
)
# A stored blob's row, as a write that found its reference confirms it; the row is read anyway (for `last_seen`), so
# asking whether it was found lost costs nothing more.
_CONFIRM_SQL = f"SELECT stored_in, last_seen < {SHIFTED_NOW_SQL}, lost_at IS NOT NULL FROM blobs WHERE digest = ?"
# Whether a write must store the content: no row, or one a read or `verify` found lost (`mark_lost`).
_NEEDS_STORING_SQL = "SELECT lost_at IS NULL FROM blobs WHERE digest = ?"
# Only rows not found lost already: a blob lost again keeps the time it was first found lost.
_MARK_LOST_SQL = f"UPDATE blobs SET lost_at = {NOW_SQL} WHERE digest = ? AND lost_at IS NULL"
_PUT_FRAME_SQL = (
    "INSERT INTO blob_frames (blob_id, frame) VALUES (?, ?) ON CONFLICT (blob_id) DO UPDATE SET frame = excluded.frame"
)


class LearnedFrameRefused(Exception):
    """
    Raised by `put`, inside the write transaction, for a learned frame it cannot record: the blob it needs is gone
    (a concurrent gc took it), or the content has a row already (a learned frame never replaces one, so a blob never
    comes to need itself). The caller rolls back and stages the content plain.
    """

    def __init__(self, digest: str) -> None:
        super().__init__(digest)
        self.digest = digest


class BlobCatalog:
    """The rows that record blobs and dictionaries, written inside the caller's transaction."""

    def __init__(self, *, files: BlobBackend, hints: BlobHints, verified: VerifiedContent) -> None:
        """
        :param files: Where blobs too large for the index are kept (checked where a file can vanish under its row).
        :param hints: What this process knows is stored, told after each commit.
        :param verified: The verified dictionaries and bases in memory, forgotten when found gone.
        """
        self._files = files
        self._hints = hints
        self._verified = verified
        self._stored_elsewhere = files.stored_in
        # Whether a blob kept by `files` can vanish while its row stays: then only a look-up notices.
        self._can_vanish = not files.rows_imply_presence

    def put(
        self,
        work: UnitOfWork,
        staged: StagedBlob,
        *,
        seen: tuple[str, str] | None = None,
        stored_under_lock: bool = False,
    ) -> None:
        """
        Record a staged blob, inside the caller's write transaction.

        :param seen: `(first_seen, last_seen)` to record instead of now, for a blob copied from another store; a row
            already there keeps its own.

        A file blob is checked to be in place first (and written again if a concurrent `gc` removed it), so the
        committed row never points at nothing. If the digest already has a row, the row is replaced by this one:
        either layout holds the same content, and this one was just checked to exist.

        :param stored_under_lock: The blob was staged inside this transaction, after its write lock was taken, to a
            backend whose rows imply presence (objects, removed only under gc's exclusive lock): it cannot have been
            removed since, and is not looked at again.
        """
        trusted = stored_under_lock and not self._can_vanish
        if not staged.in_index and not trusted and not self._files.exists(staged.digest):
            self._files.write(staged.digest, staged.frame)
        checked_at = self._hints.now()
        connection = work.connection
        stored_in = STORED_IN_INDEX if staged.in_index else self._stored_elsewhere
        if staged.needs is not None and seen is None:
            if not staged.in_index:
                raise LearnedFrameRefused(staged.digest)  # never made: `stage` keeps learned frames in the index
            dictionary_id, base_id = self._needed_id(work, staged)
            row = connection.execute(
                _PUT_LEARNED_SQL,
                (
                    staged.digest,
                    staged.size,
                    len(staged.frame),
                    staged.encoding,
                    dictionary_id,
                    base_id,
                    staged.namespace,
                ),
            ).fetchone()
            if row is None:
                raise LearnedFrameRefused(staged.digest)
        else:
            row = connection.execute(
                _PUT_SQL if seen is None else _IMPORT_SQL,
                (staged.digest, staged.size, len(staged.frame), stored_in, *(seen or ()), staged.namespace),
            ).fetchone()
        (blob_id,) = row
        if staged.in_index:
            connection.execute(_PUT_FRAME_SQL, (blob_id, staged.frame))
        else:
            connection.execute("DELETE FROM blob_frames WHERE blob_id = ?", (blob_id,))
        stays = staged.in_index or not self._can_vanish
        work.on_commit(partial(self._hints.remember, staged.digest, current_at=checked_at, in_index=stays))

    def _needed_id(self, work: UnitOfWork, staged: StagedBlob) -> tuple[int | None, int | None]:
        """
        Check that what a learned frame needs is there, under the write lock.

        :returns: `(dictionary_id, base_id)` for the frame's row, one of them set.
        :raises LearnedFrameRefused: If it is gone (gc took it meanwhile): the write is then stored plain.
        """
        # Under the write lock: what is needed is there (gc deletes only under it, and never a needed blob), and
        # (`_PUT_LEARNED_SQL`, after) the content has no row yet. Every base thus points from a newer row to an older
        # one: no cycle can form.
        connection = work.connection
        needs = staged.needs or ""
        if staged.encoding == DICTIONARY:
            row = connection.execute("SELECT id FROM dictionaries WHERE digest = ?", (needs,)).fetchone()
            if row is None:
                self._verified.forget(needs)
                raise LearnedFrameRefused(staged.digest)
            return int(row[0]), None
        # A base found lost is no base: a delta on it could not be read until the base is stored again.
        row = connection.execute(
            "SELECT id, stored_in FROM blobs WHERE digest = ? AND lost_at IS NULL", (needs,)
        ).fetchone()
        if row is None:
            self._verified.forget(needs)
            raise LearnedFrameRefused(staged.digest)
        if row[1] != STORED_IN_INDEX and self._can_vanish and not self._files.exists(needs):
            raise LearnedFrameRefused(staged.digest)
        return None, int(row[0])

    def confirm(self, work: UnitOfWork, digest: str) -> bool:
        """
        Make sure a blob is stored and mark it as just seen, inside the caller's write transaction, so `gc` leaves
        it alone.

        `last_seen` is rewritten only when it is more than `LAST_SEEN_RESOLUTION` old, so a burst of repeated writes
        costs one row update, not one each: it is kept to that resolution.

        :returns: True if the blob is stored; False if it is not (or its file has gone, or a read or `verify` found it
            lost: `mark_lost`), and the caller must `stage` and `put` it.
        """
        checked_at = self._hints.now()
        connection = work.connection
        row = connection.execute(_CONFIRM_SQL, (_CONFIRM_AGO, digest)).fetchone()
        if row is None or row[2]:
            return False
        stored_in, stale, _lost = row
        in_index = stored_in == STORED_IN_INDEX
        if not in_index and self._can_vanish and not self._files.exists(digest):
            return False
        if stale:
            connection.execute(f"UPDATE blobs SET last_seen = {NOW_SQL} WHERE digest = ?", (digest,))
        # Left alone, `last_seen` may already be up to a resolution old.
        current_at = checked_at if stale else checked_at - _RESOLUTION_SECONDS
        stays = in_index or not self._can_vanish
        work.on_commit(partial(self._hints.remember, digest, current_at=current_at, in_index=stays))
        return True

    def is_stored(self, work: UnitOfWork, digest: str) -> bool:
        """:returns: Whether the blob is stored (its row, and its file where one can vanish), changing nothing."""
        row = work.connection.execute("SELECT stored_in FROM blobs WHERE digest = ?", (digest,)).fetchone()
        if row is None:
            return False
        return row[0] == STORED_IN_INDEX or not self._can_vanish or self._files.exists(digest)

    def needs_storing(self, connection: sqlite3.Connection, digest: str) -> bool:
        """:returns: Whether a write of `digest` must store its content: it has no row, or was found lost."""
        row = connection.execute(_NEEDS_STORING_SQL, (digest,)).fetchone()
        return row is None or not row[0]

    def mark_lost(self, work: UnitOfWork, digests: Sequence[str]) -> None:
        """
        Record, inside the caller's write transaction, that a read or `verify` found these blobs' stored bytes missing
        or damaged: a write of the content then stores it again (`needs_storing` and `confirm` say so, and so does the
        engine's one-statement duplicate write), and `put` clears the mark. Reads never look at it. A digest with no
        row is passed over.
        """
        work.connection.executemany(_MARK_LOST_SQL, [(digest,) for digest in sorted(set(digests))])

    def exists(self, connection: sqlite3.Connection, digest: str) -> bool:
        """:returns: Whether a blob row exists for `digest` (its content is not checked; see `load`)."""
        return connection.execute("SELECT 1 FROM blobs WHERE digest = ?", (digest,)).fetchone() is not None

    def record_dictionary(
        self,
        work: UnitOfWork,
        data: bytes,
        *,
        tool: str,
        samples: int,
        sample_bytes: int,
        trained_on: Sequence[str],
    ) -> str:
        """
        Store a trained dictionary and make it the one `tool`'s new writes use, inside the caller's write transaction;
        the one it replaces stays as long as a blob needs it (gc).

        :param samples: How many results the training covered (those held out to judge it included), and
            `sample_bytes` their bytes.
        :param trained_on: The digests of the results its bytes were trained on.
        :returns: Its digest.
        """
        digest = content_digest(data)
        connection = work.connection
        connection.execute("UPDATE dictionaries SET active = 0 WHERE tool = ? AND active = 1", (tool,))
        (dictionary_id,) = connection.execute(
            "INSERT INTO dictionaries (tool, digest, data, samples, sample_bytes, trained_at, active) "
            f"VALUES (?, ?, ?, ?, ?, {NOW_SQL}, 1) "
            "ON CONFLICT (digest) DO UPDATE SET active = 1, tool = excluded.tool RETURNING id",
            (tool, digest, data, samples, sample_bytes),
        ).fetchone()
        connection.executemany(
            "INSERT INTO dictionary_samples (dictionary_id, digest) VALUES (?, ?) ON CONFLICT DO NOTHING",
            [(dictionary_id, sample) for sample in sorted(set(trained_on))],
        )
        return digest

    def active_dictionary(self, connection: sqlite3.Connection, tool: str) -> tuple[str, int] | None:
        """:returns: The digest of the dictionary `tool`'s writes use, and how many results it was trained on."""
        row = connection.execute(ACTIVE_DICTIONARY_SQL, (tool,)).fetchone()
        return None if row is None else (row[0], row[1])
