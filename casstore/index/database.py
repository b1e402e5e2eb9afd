"""
The SQLite connection behind a store: opening `index.db`, applying the schema, and transactions.

One `Database` holds one connection, shared by every thread that uses the store and guarded by a lock. Several
processes may open the same `index.db`: SQLite's WAL mode lets readers run beside one writer, and every write
transaction starts with `BEGIN IMMEDIATE` and waits (up to `busy_timeout`) for the write lock instead of failing with
`database is locked`.

A lazy `Database` (the local store's) creates nothing until its first write transaction: no folder, no `index.db`,
no write-ahead log. Until then it answers every read from an empty stand-in (the schema in memory, no rows), and
opens `index.db` as soon as another process has created it. Opening a file (its settings, schema check and
migrations) is in `sqlite_file`; giving its free space back, in `sqlite_space`; the `UnitOfWork` a write transaction
yields, in `work`.
"""

import os
import sqlite3
import threading
import time
from contextlib import AbstractContextManager
from pathlib import Path

from casstore import forks
from casstore.errors import IndexDamagedError, ReadOnlyStoreError, SchemaError
from casstore.index import read_only, sqlite_file, sqlite_space, sqlite_transaction
from casstore.index.sqlite_transaction import Held, Transaction
from casstore.index.work import UnitOfWork

# How long a write waits for another process's write transaction before giving up.
DEFAULT_BUSY_TIMEOUT_SECONDS = 60.0

# Pages `return_free_space` gives back to the file system per write transaction: 1 MiB of 4 KiB pages, so a writer
# waits for at most one such step (measured: benchmarks/gc_disk.py, docs/gc.md).
FREE_SPACE_STEP_PAGES = 256
# The longest pause gc takes between two of its transactions (`yield_to_writers`).
_YIELD_MAX_SECONDS = 0.05


class Database:
    """A thread-safe SQLite connection to one `index.db`, with its schema brought up to date."""

    # What a failed call raises beneath this layer (the repository reports it as `StorageError`), and what of that
    # means the index itself is damaged (reported on a read as `CorruptBlobError`).
    failures: tuple[type[Exception], ...] = (sqlite3.Error,)
    damage: tuple[type[Exception], ...] = (sqlite3.DatabaseError,)
    # What a transaction that should simply run again raises: nothing, as SQLite runs one writer at a time.
    conflicts: tuple[type[Exception], ...] = ()
    kind = "SQLite index"
    # What to check when a write fails: this index is a local file.
    failure_causes = "free space, permissions"

    def __init__(
        self, path: Path, *, durable: bool, busy_timeout: float = DEFAULT_BUSY_TIMEOUT_SECONDS, lazy: bool = False
    ) -> None:
        """
        Open the index at `path` and apply pending schema migrations; create it now, or (`lazy`) at the first write.

        :param path: The `index.db` file.
        :param durable: Use `synchronous=FULL`, so a committed write survives power loss, not only a process crash.
        :param busy_timeout: Seconds to wait for another process's write transaction.
        :param lazy: If `path` does not exist, create nothing now: its folder and the file are made by the first
            write transaction (`transaction()`), and until then reads see an empty index. An existing file is
            opened and checked now either way.
        :raises SchemaError: If the index was written by a newer casstore or is not a casstore index
            (`IndexDamagedError` if SQLite finds it damaged or not a database at all). Nothing is changed then.
        """
        self.path = path
        self._log = Path(f"{path}-wal")
        self.description = str(path)
        self._durable = durable
        self._busy_timeout = busy_timeout
        self._closed = False
        # Set when the index is on read-only media or this process may not write it: reads only (`_open_read_only`).
        self.read_only = False
        self._read_only_uri: str | None = None
        self._owner = forks.generation
        self._lock = threading.RLock()
        # While `_pending`, no index file is open (none existed when last looked at), `_connection` is the empty
        # stand-in, and `_generation` is never this process's, so that every use takes the slow way (`_catch_up`).
        self._pending = lazy and not path.exists()
        if self._pending:
            self._use(sqlite_file.empty_index(), pending=True)
            return
        self._open_file()

    def _use(self, connection: sqlite3.Connection, *, pending: bool) -> None:
        """
        The one place the connection is set: the index file's (this process's generation), or the empty stand-in
        (`pending`: every use then takes the slow way, `_catch_up`). Anything kept per connection belongs here.
        """
        self._connection = connection
        # One cursor for the statements a write transaction runs and reads no rows from (BEGIN, COMMIT,
        # `UnitOfWork.change`): `Connection.execute` makes a new cursor per statement, which costs a duplicate
        # write more than a statement of its own. Used only under `_lock`, and its rows are never read.
        self._statements = connection.cursor()
        self._generation = _PENDING if pending else forks.generation

    def _open_file(self, *, create: bool = True) -> None:
        """
        Open `path` and bring its schema up to date; with `create`, a missing file is made, with its folder. An index
        this process cannot write (read-only media, or its permissions) is opened for reading only.
        """
        if create:  # the folder first; SQLite creates the file as it connects, and `_prepare` gives it its schema
            sqlite_file.make_folder(self.path)
        sqlite_file.refuse_foreign_before_writing(self.path)
        try:
            self._connect()
            try:
                self._prepare()
            except BaseException:
                self._connection.close()
                raise
        except SchemaError:
            # SQLite could not open it for writing; only if the file system agrees is it a read-only store, not a
            # damaged one (a damaged index on read-only media is reported as damaged by the second attempt too).
            if not read_only.cannot_write(self.path):
                raise
            self._open_read_only()
            return
        if read_only.cannot_write(self.path) and read_only.refuses_writes(self._connection):
            # SQLite opened the file read-only by itself (its folder is writable, the file is not): say so up front.
            self.read_only = True

    def _open_read_only(self) -> None:
        """Open `path` for reading only (`read_only.reading_uri`, else `immutable_uri`); its schema must be current."""
        if not self.path.exists():
            raise read_only.store_error(self.path.parent, "its first write cannot create index.db")
        self._read_only_uri = read_only.reading_uri(self.path)
        self.read_only = True
        try:
            self._connect()
        except IndexDamagedError:
            raise  # damaged is damaged, on read-only media too: the message says so and what to do
        except SchemaError:
            # No shared-memory file beside the index, and none can be made: without a write-ahead log to read, the
            # file alone is the whole index, and nothing can change it while it is read-only.
            if read_only.has_log(self.path):
                raise read_only.store_error(
                    self.path.parent,
                    f"its write-ahead log {self._log.name} cannot be read without writing {self.path.name}-shm beside "
                    f"it",
                    readable=False,
                ) from None
            self._read_only_uri = read_only.immutable_uri(self.path)
            self._connect()
        try:
            self._prepare()
        except BaseException:
            self._connection.close()
            raise

    def _connect(self) -> None:
        """Open a connection to `path` (read-only through `_read_only_uri` once set), owned by this process."""
        connection = sqlite_file.connect(
            self.path, read_only_uri=self._read_only_uri, busy_timeout=self._busy_timeout, durable=self._durable
        )
        self._use(connection, pending=False)

    def _prepare(self) -> None:
        sqlite_file.prepare(
            self._connection,
            self.path,
            for_reading=self.read_only,
            busy_timeout=self._busy_timeout,
            transaction=self.transaction,
        )

    @property
    def exists(self) -> bool:
        """Whether the index file exists (a lazy index not created yet: False, until any process creates it)."""
        if self._pending or self._generation != forks.generation:
            self._catch_up()
        return not self._pending

    def create(self) -> None:
        """
        Create the index now if it is lazy and does not exist yet: its folder, `index.db` and the schema. Processes
        creating the same index at once create it once (SQLite creates the file; the schema is applied under the
        write lock). Nothing happens if the index is open already.

        :raises SchemaError: If another process created a file there meanwhile that is not a usable casstore index.
        """
        if self._generation != forks.generation:
            self._catch_up()
        if self._pending:
            with self._lock:
                if self._pending and not self._closed:
                    self._leave_pending(create=True)

    def _leave_pending(self, *, create: bool) -> None:
        """Under `_lock`: open the index file (creating it if `create`), in place of the empty stand-in."""
        stand_in = self._connection
        self._pending = False
        try:
            self._open_file(create=create)
        except BaseException:
            self._pending = True
            self._use(stand_in, pending=True)
            raise
        stand_in.close()

    def _catch_up(self) -> None:
        """
        The slow way in: in a forked child, a connection of its own (the inherited one is kept, never used); in a
        lazy index not yet created, the file another process may have created meanwhile.
        """
        with _FORK_LOCK:
            if self._owner != forks.generation:
                # SQLite forbids using a connection across fork(), and the lock may have been held by a thread that
                # does not exist in the child. The inherited connection is kept, never used or closed: closing it
                # could disturb the parent's locks on index.db.
                sqlite_file.INHERITED_CONNECTIONS.append(self._connection)
                self._owner = forks.generation
                self._lock = threading.RLock()
                if self._pending:
                    self._use(sqlite_file.empty_index(), pending=True)
                elif not self._closed:
                    self._connect()
        if self._pending:
            with self._lock:
                if self._pending and not self._closed and self.path.exists():
                    self._leave_pending(create=False)

    def transaction(self, *, exclusive: bool = False) -> "Transaction":
        """
        Run a write transaction: the thread lock, `BEGIN IMMEDIATE`, then `COMMIT`, or `ROLLBACK` on any error.

        :param exclusive: Asked by gc for a transaction no other write transaction runs beside; every SQLite write
            transaction is one already (`BEGIN IMMEDIATE` takes the database's one write lock).

        A lazy index that does not exist yet is created by a write transaction, but not by gc's (`exclusive`): those
        only delete, and there is nothing to delete then, so they run on the empty stand-in.

        :returns: A context manager yielding the transaction's `UnitOfWork`, whose `on_commit` callbacks run after
            the commit.
        """
        if self._pending and not exclusive:
            self.create()
        if self.read_only:
            raise self.read_only_error("it cannot be written")
        return Transaction(self)

    def read_only_error(self, what: str) -> ReadOnlyStoreError:
        """:returns: The error that says the index is read-only and `what` follows from that."""
        return read_only.store_error(self.path.parent, what)

    def rolled_back(self) -> AbstractContextManager[UnitOfWork]:
        """
        Run a write transaction that is always rolled back: a dry run sees its own changes and keeps none.

        :returns: A context manager yielding the transaction's `UnitOfWork` (its `on_commit` callbacks never run).
        """
        return sqlite_transaction.rolled_back(self)

    def snapshot(self) -> AbstractContextManager[sqlite3.Connection]:
        """
        Run reads in one read transaction, so they all see the same committed state.

        :returns: A context manager yielding the connection.
        """
        return sqlite_transaction.snapshot(self)

    def reading(self) -> Held:
        """
        Use the connection for reads outside a transaction (each statement sees the latest committed state); the
        connection is held for this thread (reopened first in a forked child).

        :returns: A context manager yielding the connection.
        """
        return Held(self)

    # Giving space back.

    # Deleted means deleted, in the same run: `secure_delete` zeroes a deleted row where it lies, but when SQLite
    # balances its B-tree (as deletions make pages underfull) it rebuilds a page from the rows kept in it and leaves its
    # unused part as it was, holding copies of rows that moved to another page; a row deleted later leaves such a copy
    # behind. Only a rebuild of the file (VACUUM) leaves no copy, so gc rebuilds after deleting content.
    rebuilds_to_delete = True

    @property
    def returns_free_space(self) -> bool:
        """Whether `index.db` can give freed pages back (`auto_vacuum=INCREMENTAL`), which `rebuild` makes so."""
        with Held(self) as connection:
            return bool(connection.execute("PRAGMA auto_vacuum").fetchone()[0] == sqlite_space.INCREMENTAL)

    def space_policy(self, *, rebuilt: bool) -> str:
        """:returns: What a collection's deleted rows become: `rebuilt`, `returned`, or `kept-until-rebuilt`."""
        if rebuilt:
            return "rebuilt"
        return "returned" if self.returns_free_space else "kept-until-rebuilt"

    def estimated_bytes(self, work: "UnitOfWork", *, rebuilt: bool) -> int:
        """
        :param work: A transaction that has deleted what a collection would delete (a dry run's).
        :param rebuilt: As if `rebuild` ran afterwards.
        :returns: The bytes `index.db` would take once the free pages are given back (`return_free_space`, or
            `rebuild`), with the write-ahead log emptied; an index that cannot give them back keeps its pages. As in
            `casstore.disk.local_footprint`, the shared-memory file, which lives only while a connection does, is
            not counted.
        """
        return sqlite_space.estimated_bytes(work.connection, rebuilt=rebuilt)

    def return_free_space(self, *, step_pages: int = FREE_SPACE_STEP_PAGES) -> bool:
        """
        Give `index.db`'s free pages back to the file system, `step_pages` per write transaction so that a writer
        waits for one step at most, then checkpoint the write-ahead log so the file shrinks and the log is emptied.

        :returns: Whether the space was given back: False for an index made before casstore set `auto_vacuum`
            (see `rebuild`), whose free pages stay inside the file for later writes.
        """
        if not self.returns_free_space:
            return False
        sqlite_space.free_pages(self.reading, step_pages=step_pages, pause=self.yield_to_writers)
        sqlite_space.checkpoint(self.reading, self._log)
        return True

    def yield_to_writers(self, held: float) -> None:
        """
        Pause after a maintenance transaction that held the write lock for `held` seconds, as long again (at most
        `_YIELD_MAX_SECONDS`): SQLite's lock is not a queue, and a waiting writer, which polls for it between sleeps,
        would otherwise find it taken by gc's next transaction again and again.
        """
        time.sleep(min(held, _YIELD_MAX_SECONDS))

    def rebuild(self) -> bool:
        """
        Rebuild `index.db` with a full `VACUUM`, turning on `auto_vacuum=INCREMENTAL` if the file predates it. This
        holds the write lock for the whole rebuild (writers wait; see docs/gc.md for how long on 1 GB) and needs
        free disk space of about twice the file while it runs.

        :returns: Whether the rebuilt index replaced the old one in `index.db`: False while another connection reads
            an older state, whose pages the file keeps until that read ends (`sqlite_space.checkpoint`).
        """
        with Held(self) as connection:
            connection.execute("PRAGMA auto_vacuum = INCREMENTAL")
            connection.execute("VACUUM")
        return sqlite_space.checkpoint(self.reading, self._log)

    def close(self) -> None:
        """Close the connection. Later use raises `StoreClosedError`; closing twice is harmless."""
        if self._owner != forks.generation:
            self._catch_up()
        with self._lock:
            if not self._closed:
                self._closed = True
                self._connection.close()


# `Database._generation` while a lazy index waits for its first write: no process's generation.
_PENDING = -1


# Held while a forked child takes its own connection (`Database._catch_up`).
_FORK_LOCK = threading.Lock()


def _reset_fork_lock() -> None:
    global _FORK_LOCK  # noqa: PLW0603 - a lock held at fork time must not stay held in the child
    _FORK_LOCK = threading.Lock()


os.register_at_fork(after_in_child=_reset_fork_lock)
