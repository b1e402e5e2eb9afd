"""
The SQLite connection behind a store: opening `index.db`, applying the schema, and transactions.

One `Database` holds one connection, shared by every thread that uses the store and guarded by a lock. Several
processes may open the same `index.db`: SQLite's WAL mode lets readers run beside one writer, and every write
transaction starts with `BEGIN IMMEDIATE` and waits (up to `busy_timeout`) for the write lock instead of failing with
`database is locked`.

A lazy `Database` (the local store's) creates nothing until its first write transaction: no folder, no `index.db`,
no write-ahead log. Until then it answers every read from an empty stand-in (the schema in memory, no rows), and
opens `index.db` as soon as another process has created it. This module is the one place an index file is created
and its schema first applied (`Database._prepare`): a setting a new file must get before its first table belongs there.
"""

import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlite_utils import Database as SqliteUtilsDatabase

from casstore import forks
from casstore.disk import disk_usage_of_file
from casstore.errors import IndexDamagedError, ReadOnlyStoreError, SchemaError, StoreClosedError
from casstore.index import read_only
from casstore.index.schema import MIGRATION_NAMES, MIGRATION_SET, MIGRATIONS, unknown_migrations_message
from casstore.index.work import UnitOfWork

# How long a write waits for another process's write transaction before giving up.
DEFAULT_BUSY_TIMEOUT_SECONDS = 60.0

# Pages `return_free_space` gives back to the file system per write transaction: 1 MiB of 4 KiB pages, so a writer
# waits for at most one such step (measured: benchmarks/gc_disk.py, docs/gc.md).
FREE_SPACE_STEP_PAGES = 256
# How long the final checkpoint that shrinks the write-ahead log may wait for readers (writers wait meanwhile).
_CHECKPOINT_WAIT_MS = 200
_CHECKPOINT_TRIES = 5
# How long gc waits, at most, for another connection's checkpoint to end before it reports the sizes.
_CHECKPOINT_PATIENCE_SECONDS = 120.0
_YIELD_MAX_SECONDS = 0.05
# The most bytes the write-ahead log keeps on disk once it starts over: a bit more than the 1,000 pages after which
# SQLite checkpoints it, so an ordinary log is never cut and a large one does not stay large.
_JOURNAL_SIZE_LIMIT = 8 * 2**20


class Database:
    """A thread-safe SQLite connection to one `index.db`, with its schema brought up to date."""

    # What a failed call raises beneath this layer (the repository reports it as `StorageError`), and what of that
    # means the index itself is damaged (reported on a read as `CorruptBlobError`).
    failures: tuple[type[Exception], ...] = (sqlite3.Error,)
    damage: tuple[type[Exception], ...] = (sqlite3.DatabaseError,)
    # What a transaction that should simply run again raises: nothing, as SQLite runs one writer at a time.
    conflicts: tuple[type[Exception], ...] = ()
    kind = "SQLite index"

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
            self._use(_empty_index(), pending=True)
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
            self._make_folder()
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

    def _make_folder(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            if error.errno in read_only.READ_ONLY_ERRNOS:
                raise read_only.store_error(self.path.parent, "its first write cannot create index.db") from error
            raise

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
        try:
            if self._read_only_uri is None:
                connection = sqlite3.connect(
                    self.path, timeout=self._busy_timeout, isolation_level=None, check_same_thread=False
                )
            else:
                connection = sqlite3.connect(
                    self._read_only_uri,
                    uri=True,
                    timeout=self._busy_timeout,
                    isolation_level=None,
                    check_same_thread=False,
                )
                # SQLite opens lazily: the first statement finds out whether the file can be read this way.
                connection.execute("SELECT count(*) FROM sqlite_master").fetchone()
            connection.execute(f"PRAGMA synchronous={'FULL' if self._durable else 'NORMAL'}")
            # A log that grew large (a rebuild writes the whole index into it) is cut down when it starts over.
            connection.execute(f"PRAGMA journal_size_limit = {_JOURNAL_SIZE_LIMIT}")
            # Deleted means deleted: SQLite overwrites the bytes of what it deletes with zeros, so a frame gc deleted
            # leaves no copy in a free page of index.db (or in the write-ahead log's copy of that page).
            connection.execute("PRAGMA secure_delete = ON")
        except sqlite3.Error as error:
            raise _unusable(self.path, error) from error
        self._use(connection, pending=False)

    def _prepare(self) -> None:
        connection = self._connection
        try:
            sqlite_utils_db = SqliteUtilsDatabase(connection, recursive_triggers=False, execute_plugins=False)
            with _one_snapshot(connection):
                _refuse_unknown_schema(sqlite_utils_db, self.path)
            if self.read_only:
                if MIGRATIONS.pending(sqlite_utils_db):
                    raise read_only.store_error(
                        self.path.parent,
                        "its index was made by an older casstore and must be upgraded first, which writes it",
                        readable=False,
                    )
                return
            if connection.execute("PRAGMA page_count").fetchone()[0] == 0:
                # A file being created: its first page, which the journal mode below writes, must already say that
                # freed pages can be given back (`return_free_space`); SQLite fixes that before the first table.
                connection.execute("PRAGMA auto_vacuum = INCREMENTAL")
            deadline = time.monotonic() + self._busy_timeout
            while connection.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                try:
                    connection.execute("PRAGMA journal_mode=WAL")
                except sqlite3.OperationalError as error:
                    # While another process creating this file holds its write lock, SQLite refuses the switch at
                    # once instead of waiting out the busy timeout: the wait is ours.
                    if error.sqlite_errorcode & 0xFF != sqlite3.SQLITE_BUSY or time.monotonic() > deadline:
                        raise
                    time.sleep(0.01)
            if MIGRATIONS.pending(sqlite_utils_db):
                # The write lock keeps processes opening a new root at once from applying a migration twice. A new
                # index file gets its schema here, and only here.
                with self.transaction():
                    _refuse_unknown_schema(sqlite_utils_db, self.path)
                    MIGRATIONS.apply(sqlite_utils_db)
                    connection.execute(f"PRAGMA user_version = {len(MIGRATION_NAMES)}")
        except sqlite3.DatabaseError as error:
            raise _unusable(self.path, error) from error

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
                _INHERITED_CONNECTIONS.append(self._connection)
                self._owner = forks.generation
                self._lock = threading.RLock()
                if self._pending:
                    self._use(_empty_index(), pending=True)
                elif not self._closed:
                    self._connect()
        if self._pending:
            with self._lock:
                if self._pending and not self._closed and self.path.exists():
                    self._leave_pending(create=False)

    def _held(self) -> "_Held":
        """:returns: A context manager holding the connection for this thread (reopened first in a forked child)."""
        return _Held(self)

    def transaction(self, *, exclusive: bool = False) -> "_Transaction":
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
        return _Transaction(self)

    def read_only_error(self, what: str) -> ReadOnlyStoreError:
        """:returns: The error that says the index is read-only and `what` follows from that."""
        return read_only.store_error(self.path.parent, what)

    @contextmanager
    def rolled_back(self) -> Iterator["UnitOfWork"]:
        """
        Run a write transaction that is always rolled back: a dry run sees its own changes and keeps none.

        :returns: A context manager yielding the transaction's `UnitOfWork` (its `on_commit` callbacks never run).
        """
        with self._held() as connection:
            # A read-only index takes no write lock (nothing can write it meanwhile); a statement that would change
            # it fails, and is rolled back.
            connection.execute("BEGIN" if self.read_only else "BEGIN IMMEDIATE")
            try:
                yield UnitOfWork(connection, self._statements)
            finally:
                if connection.in_transaction:
                    connection.execute("ROLLBACK")

    @contextmanager
    def snapshot(self) -> Iterator[sqlite3.Connection]:
        """
        Run reads in one read transaction, so they all see the same committed state.

        :returns: A context manager yielding the connection.
        """
        with self._held() as connection:
            connection.execute("BEGIN")
            try:
                yield connection
            finally:
                if connection.in_transaction:
                    connection.execute("COMMIT")

    def reading(self) -> "_Held":
        """
        Use the connection for reads outside a transaction (each statement sees the latest committed state).

        :returns: A context manager yielding the connection.
        """
        return _Held(self)

    # Giving space back.

    @property
    def returns_free_space(self) -> bool:
        """Whether `index.db` can give freed pages back (`auto_vacuum=INCREMENTAL`), which `rebuild` makes so."""
        with self._held() as connection:
            return bool(connection.execute("PRAGMA auto_vacuum").fetchone()[0] == _INCREMENTAL)

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
        execute = work.connection.execute
        pages = int(execute("PRAGMA page_count").fetchone()[0])
        if rebuilt or execute("PRAGMA auto_vacuum").fetchone()[0] == _INCREMENTAL:
            pages -= int(execute("PRAGMA freelist_count").fetchone()[0])
        return pages * int(execute("PRAGMA page_size").fetchone()[0])

    def return_free_space(self, *, step_pages: int = FREE_SPACE_STEP_PAGES) -> bool:
        """
        Give `index.db`'s free pages back to the file system, `step_pages` per write transaction so that a writer
        waits for one step at most, then checkpoint the write-ahead log so the file shrinks and the log is emptied.

        :returns: Whether the space was given back: False for an index made before casstore set `auto_vacuum`
            (see `rebuild`), whose free pages stay inside the file for later writes.
        """
        if not self.returns_free_space:
            return False
        script = f"BEGIN IMMEDIATE; PRAGMA incremental_vacuum({step_pages}); COMMIT;"
        with self._held() as connection:
            free = connection.execute("PRAGMA freelist_count").fetchone()[0]
        # Bounded by what was free at the start: pages freed later (by another gc) are left for its own run.
        for _ in range(-(-free // step_pages)):
            with self._held() as connection:
                if connection.execute("PRAGMA freelist_count").fetchone()[0] == 0:
                    break
                started = time.perf_counter()
                # `executescript` steps the pragma to its end (`execute` would move one page).
                _run_script(connection, script)
            self.yield_to_writers(time.perf_counter() - started)
        self._checkpoint()
        return True

    def yield_to_writers(self, held: float) -> None:
        """
        Pause after a maintenance transaction that held the write lock for `held` seconds, as long again (at most
        `_YIELD_MAX_SECONDS`): SQLite's lock is not a queue, and a waiting writer, which polls for it between sleeps,
        would otherwise find it taken by gc's next transaction again and again.
        """
        time.sleep(min(held, _YIELD_MAX_SECONDS))

    def rebuild(self) -> None:
        """
        Rebuild `index.db` with a full `VACUUM`, turning on `auto_vacuum=INCREMENTAL` if the file predates it. This
        holds the write lock for the whole rebuild (writers wait; see docs/gc.md for how long on 1 GB) and needs
        free disk space of about twice the file while it runs.
        """
        with self._held() as connection:
            connection.execute("PRAGMA auto_vacuum = INCREMENTAL")
            connection.execute("VACUUM")
        self._checkpoint()

    def _checkpoint(self) -> None:
        # A PASSIVE checkpoint copies the log into index.db beside readers and writers (and truncates the file once
        # all of it is copied). The TRUNCATE one that follows empties the log, but holds writers off while it waits
        # for readers of older pages: each try waits briefly, a few tries apart, and if readers are still there the
        # log is cut down to `_JOURNAL_SIZE_LIMIT` when a later write starts it over (a log already that small gets
        # one try). While another connection runs
        # a checkpoint (a writer's automatic one, after a rebuild that put the whole index in the log), no try can
        # run: gc waits for it, holding no lock, so that its report says what is on disk once it is done.
        blocking_tries = 0
        deadline = time.monotonic() + _CHECKPOINT_PATIENCE_SECONDS
        while blocking_tries < _CHECKPOINT_TRIES and time.monotonic() < deadline:
            with self._held() as connection:
                connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                small = disk_usage_of_file(self._log) <= _JOURNAL_SIZE_LIMIT
                timeout_ms = connection.execute("PRAGMA busy_timeout").fetchone()[0]
                connection.execute(f"PRAGMA busy_timeout = {_CHECKPOINT_WAIT_MS}")
                try:
                    busy, log_frames, _ = connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
                finally:
                    connection.execute(f"PRAGMA busy_timeout = {timeout_ms}")
            if not busy and log_frames <= 0:
                return
            if log_frames >= 0:  # it ran, and readers kept it from finishing
                blocking_tries += 1
                if small:
                    return  # one try for a log this small, which is reused as it is
            time.sleep(_CHECKPOINT_WAIT_MS / 1000)

    def close(self) -> None:
        """Close the connection. Later use raises `StoreClosedError`; closing twice is harmless."""
        if self._owner != forks.generation:
            self._catch_up()
        with self._lock:
            if not self._closed:
                self._closed = True
                self._connection.close()


_INCREMENTAL = 2  # `PRAGMA auto_vacuum`'s value for INCREMENTAL


@contextmanager
def _one_snapshot(connection: sqlite3.Connection) -> Iterator[None]:
    """
    The statements inside read one state of the index. Outside a transaction each statement reads the latest, so
    another process committing a new index's schema between two of them would show its tables without the record
    of its migrations: a casstore index taken for another application's database.
    """
    connection.execute("BEGIN")
    try:
        yield
    finally:
        connection.execute("ROLLBACK")


def _run_script(connection: sqlite3.Connection, script: str) -> None:
    try:
        connection.executescript(script)
    except BaseException:
        if connection.in_transaction:
            connection.execute("ROLLBACK")
        raise


class _Held:
    """Holds a `Database`'s connection for one thread; a plain class, as this is on every read's path."""

    __slots__ = ("_database",)

    def __init__(self, database: Database) -> None:
        self._database = database

    def __enter__(self) -> sqlite3.Connection:
        database = self._database
        if database._generation != forks.generation:
            database._catch_up()
        database._lock.acquire()
        if database._closed:
            database._lock.release()
            raise StoreClosedError("This casstore store is closed; open a new ContentAddressedToolResultStore.")
        return database._connection

    def __exit__(self, exc_type: type[BaseException] | None, exc: object, traceback: object) -> None:
        self._database._lock.release()


class _Transaction(_Held):
    """A write transaction on a held connection; a plain class, as this is on every write's path."""

    __slots__ = ("_work",)

    def __enter__(self) -> UnitOfWork:  # type: ignore[override]
        connection = _Held.__enter__(self)
        statements = self._database._statements
        try:
            statements.execute("BEGIN IMMEDIATE")
        except BaseException:
            self._database._lock.release()
            raise
        self._work = UnitOfWork(connection, statements)
        return self._work

    def __exit__(self, exc_type: type[BaseException] | None, exc: object, traceback: object) -> None:
        database = self._database
        connection = database._connection
        try:
            if exc_type is None:
                try:
                    database._statements.execute("COMMIT")
                except BaseException:
                    if connection.in_transaction:
                        connection.execute("ROLLBACK")
                    raise
            elif connection.in_transaction:
                connection.execute("ROLLBACK")
        finally:
            database._lock.release()
        if exc_type is None and self._work._committed:
            self._work._publish()


# `Database._generation` while a lazy index waits for its first write: no process's generation.
_PENDING = -1


# The empty schema in memory, made once per process and copied for each stand-in (a copy takes about 30 µs; applying
# the migrations, milliseconds, which a server making a store per request should not pay for each).
_EMPTY_TEMPLATE: list[sqlite3.Connection] = []
_EMPTY_TEMPLATE_LOCK = threading.Lock()


def _empty_index() -> sqlite3.Connection:
    """:returns: An index in memory with the whole schema and no rows: what a store never written to holds."""
    with _EMPTY_TEMPLATE_LOCK:
        if not _EMPTY_TEMPLATE:
            template = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
            MIGRATIONS.apply(SqliteUtilsDatabase(template, recursive_triggers=False, execute_plugins=False))
            _EMPTY_TEMPLATE.append(template)
        connection = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        _EMPTY_TEMPLATE[0].backup(connection)
    return connection


# Connections inherited across fork(): kept alive so that they are never closed in the child.
_INHERITED_CONNECTIONS: list[sqlite3.Connection] = []
_FORK_LOCK = threading.Lock()


def _reset_fork_lock() -> None:
    global _FORK_LOCK, _EMPTY_TEMPLATE_LOCK  # noqa: PLW0603 - a lock held at fork time must not stay held in the child
    _FORK_LOCK = threading.Lock()
    _EMPTY_TEMPLATE_LOCK = threading.Lock()
    # Like any connection, the template is not used across fork(); the child makes its own (and never closes this).
    _INHERITED_CONNECTIONS.extend(_EMPTY_TEMPLATE)
    _EMPTY_TEMPLATE.clear()


os.register_at_fork(after_in_child=_reset_fork_lock)


# SQLite's primary result codes for a file that is damaged or not a database at all, and for one held by others.
_DAMAGED = {sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB}
_HELD = {sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED}


def _unusable(path: Path, error: sqlite3.Error) -> SchemaError:
    code = getattr(error, "sqlite_errorcode", 0) & 0xFF
    if code in _HELD:
        return SchemaError(f"{path} is locked by another process ({error}); try again when it is done.")
    message = (
        f"{path} is not a usable casstore index ({error}). If it is damaged, move it aside: see 'Recovery' in "
        f"casstore's docs/gc.md."
    )
    return IndexDamagedError(message) if code in _DAMAGED else SchemaError(message)


def _refuse_unknown_schema(sqlite_utils_db: SqliteUtilsDatabase, path: Path) -> None:
    applied = [migration.name for migration in MIGRATIONS.applied(sqlite_utils_db)]
    unknown = [name for name in applied if name not in MIGRATION_NAMES]
    if unknown:
        raise SchemaError(unknown_migrations_message(str(path), unknown, what=f"in set '{MIGRATION_SET}'"))
    if not applied and _has_foreign_tables(sqlite_utils_db):
        raise SchemaError(
            f"{path} is a SQLite database but not a casstore index. Point the store at an empty or casstore folder."
        )


def _has_foreign_tables(sqlite_utils_db: SqliteUtilsDatabase) -> bool:
    return bool(set(sqlite_utils_db.table_names()) - {MIGRATIONS.migrations_table})
