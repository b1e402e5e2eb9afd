"""
Opening a SQLite `index.db` for `database.Database`: the connection's settings, the check that a file is a casstore
index this casstore knows, and the migrations it gets as it opens (the one place an index file is created and its
schema first applied: a setting a new file must get before its first table belongs here); the errors that say why a
file cannot be used; and the empty in-memory index a lazy `Database` answers reads from until its first write.
"""

import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

from sqlite_utils import Database as SqliteUtilsDatabase

from casstore.errors import CasStoreError, IndexDamagedError, SchemaError, StorageError
from casstore.index import read_only, rollback_journal
from casstore.index.schema import MIGRATION_NAMES, MIGRATION_SET, MIGRATIONS, unknown_migrations_message

# The most bytes the write-ahead log keeps on disk once it starts over: a bit more than the 1,000 pages after which
# SQLite checkpoints it, so an ordinary log is never cut and a large one does not stay large.
JOURNAL_SIZE_LIMIT = 8 * 2**20


def make_folder(path: Path) -> None:
    """Make the folder `path` (an index file) goes in, if missing."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        if error.errno in read_only.READ_ONLY_ERRNOS:
            raise read_only.store_error(path.parent, "its first write cannot create index.db") from error
        raise


def connect(path: Path, *, read_only_uri: str | None, busy_timeout: float, durable: bool) -> sqlite3.Connection:
    """
    :param read_only_uri: Open through this URI, for reading only (None: `path`, to read and write).
    :param busy_timeout: Seconds to wait for another process's write lock.
    :param durable: `synchronous=FULL`, so a committed write survives power loss.
    :returns: A connection to the index file with casstore's settings, usable from any thread.
    :raises SchemaError: If SQLite cannot open it (`IndexDamagedError` if it is damaged).
    """
    try:
        if read_only_uri is None:
            connection = sqlite3.connect(path, timeout=busy_timeout, isolation_level=None, check_same_thread=False)
        else:
            connection = sqlite3.connect(
                read_only_uri,
                uri=True,
                timeout=busy_timeout,
                isolation_level=None,
                check_same_thread=False,
            )
            # SQLite opens lazily: the first statement finds out whether the file can be read this way.
            connection.execute("SELECT count(*) FROM sqlite_master").fetchone()
        connection.execute(f"PRAGMA synchronous={'FULL' if durable else 'NORMAL'}")
        # A log that grew large (a rebuild writes the whole index into it) is cut down when it starts over.
        connection.execute(f"PRAGMA journal_size_limit = {JOURNAL_SIZE_LIMIT}")
        # Deleted means deleted: SQLite overwrites the bytes of what it deletes with zeros, so a frame gc deleted
        # leaves no copy in a free page of index.db (or in the write-ahead log's copy of that page).
        connection.execute("PRAGMA secure_delete = ON")
    except sqlite3.Error as error:
        raise unusable(path, error) from error
    return connection


def refuse_foreign_before_writing(path: Path) -> None:
    """
    Refuse a file that is not a casstore index of a known schema before it is opened for writing, if opening it so
    would change it: SQLite folds a pending write-ahead log into the file when the last writing connection closes, and
    rolls back a hot journal as it opens. Read through a read-only connection, which does neither, it is left byte
    for byte (and so are its log and journal). Anything else that fails here is left to the writing connection to
    report.

    :raises SchemaError: If `path` is not a casstore index, or one a newer casstore made.
    """
    journal = os.path.exists(f"{path}-journal")
    if not (journal or read_only.has_log(path)):
        return
    try:
        probe = sqlite3.connect(read_only.reading_uri(path), uri=True, isolation_level=None)
        try:
            with _one_snapshot(probe):
                _refuse_unknown_schema(
                    SqliteUtilsDatabase(probe, recursive_triggers=False, execute_plugins=False), path
                )
        finally:
            probe.close()
    except sqlite3.Error as error:
        if not journal:
            return
        # A read-only connection cannot read past a hot journal (one that must be rolled back first). casstore leaves
        # one only if killed while SQLite makes a new index (it writes the first page before the switch to the log),
        # and rolling that back loses nothing: the writing connection does, and the index is made. Any other journal
        # is another program's, or stale, and rolling it back would change or empty the file.
        if rollback_journal.undoes_to_empty(Path(f"{path}-journal"), path):
            return
        raise SchemaError(
            f"{path} has a rollback journal beside it ({path.name}-journal) that SQLite would replay into it on "
            f"opening it to write ({error}), changing what it holds; casstore's index keeps a write-ahead log, so the "
            f"journal is another program's, or left from an older file (an index restored from a backup, say). Nothing "
            f"was changed: if {path.name} is a casstore index, move the journal aside; else point the store at an "
            f"empty or casstore folder."
        ) from error


def prepare(
    connection: sqlite3.Connection,
    path: Path,
    *,
    for_reading: bool,
    busy_timeout: float,
    transaction: Callable[[], AbstractContextManager[object]],
) -> None:
    """
    Check that `connection` is to a casstore index of a schema this casstore knows, and (unless `for_reading`) put it in
    WAL mode and apply pending migrations; a new file gets `auto_vacuum` first, then its schema, here and only here.

    :param for_reading: The index is opened for reading only: its schema must be current already.
    :param transaction: Runs a write transaction on `connection` (the migrations' write lock).
    :raises SchemaError: If the index was made by a newer casstore or is not a casstore index.
    """
    try:
        sqlite_utils_db = SqliteUtilsDatabase(connection, recursive_triggers=False, execute_plugins=False)
        with _one_snapshot(connection):
            _refuse_unknown_schema(sqlite_utils_db, path)
        if for_reading:
            if MIGRATIONS.pending(sqlite_utils_db):
                raise read_only.store_error(
                    path.parent,
                    "its index was made by an older casstore and must be upgraded first, which writes it",
                    readable=False,
                )
            return
        if connection.execute("PRAGMA page_count").fetchone()[0] == 0:
            # A file being created: its first page, which the journal mode below writes, must already say that
            # freed pages can be given back (`return_free_space`); SQLite fixes that before the first table.
            connection.execute("PRAGMA auto_vacuum = INCREMENTAL")
        deadline = time.monotonic() + busy_timeout
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
            with transaction():
                _refuse_unknown_schema(sqlite_utils_db, path)
                MIGRATIONS.apply(sqlite_utils_db)
                connection.execute(f"PRAGMA user_version = {len(MIGRATION_NAMES)}")
    except sqlite3.DatabaseError as error:
        raise unusable(path, error) from error


# The empty schema in memory, made once per process and copied for each stand-in (a copy takes about 30 µs; applying
# the migrations, milliseconds, which a server making a store per request should not pay for each).
_EMPTY_TEMPLATE: list[sqlite3.Connection] = []
_TEMPLATE_LOCK = threading.Lock()


def empty_index() -> sqlite3.Connection:
    """:returns: An index in memory with the whole schema and no rows: what a store never written to holds."""
    with _TEMPLATE_LOCK:
        if not _EMPTY_TEMPLATE:
            template = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
            MIGRATIONS.apply(SqliteUtilsDatabase(template, recursive_triggers=False, execute_plugins=False))
            _EMPTY_TEMPLATE.append(template)
        connection = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        _EMPTY_TEMPLATE[0].backup(connection)
    return connection


# Connections inherited across fork(): kept alive so that they are never closed in the child.
INHERITED_CONNECTIONS: list[sqlite3.Connection] = []


def _after_fork_in_child() -> None:
    global _TEMPLATE_LOCK  # noqa: PLW0603 - a lock held at fork time must not stay held in the child
    _TEMPLATE_LOCK = threading.Lock()
    # Like any connection, the template is not used across fork(); the child makes its own (and never closes this).
    INHERITED_CONNECTIONS.extend(_EMPTY_TEMPLATE)
    _EMPTY_TEMPLATE.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)


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


# SQLite's primary result codes for a file that is damaged or not a database at all, and for one held by others.
_DAMAGED = {sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB}
_HELD = {sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED}
# And for a disk that is full or failing: the file may be fine.
_STORAGE = {sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR}


def unusable(path: Path, error: sqlite3.Error) -> CasStoreError:
    """:returns: The error that says why the index at `path` could not be opened, and what to do."""
    code = getattr(error, "sqlite_errorcode", 0) & 0xFF
    if code in _HELD:
        return SchemaError(f"{path} is locked by another process ({error}); try again when it is done.")
    if code in _STORAGE:
        return StorageError(
            f"Could not open or make the index {path}: {error}. Nothing was recorded; free space on its disk (or fix "
            f"the disk), then try again."
        )
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
    if not applied:
        foreign = _foreign_schema(sqlite_utils_db)
        if foreign is not None:
            raise SchemaError(
                f"{path} is a SQLite database but not a casstore index: it holds {foreign}. Nothing was changed. "
                "Point the store at an empty or casstore folder."
            )


def _foreign_schema(sqlite_utils_db: SqliteUtilsDatabase) -> str | None:
    """
    What shows that a database with no casstore migration is another application's: any schema object (table, view,
    index, trigger) but the migrations table sqlite-utils makes and its index, or that table's record of another
    migration set. Casstore writes its schema in the transaction that records its migrations, so a file of its own
    without a migration holds nothing at all.

    :returns: What the first such thing is, for the message; None for an empty database (a new store).
    """
    table = MIGRATIONS.migrations_table
    for kind, name, of_table in sqlite_utils_db.execute(
        "SELECT type, name, tbl_name FROM sqlite_master WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY rowid"
    ).fetchall():
        if not (kind == "table" and name == table) and not (kind == "index" and of_table == table):
            return f"the {kind} {name!r}"
    if table in sqlite_utils_db.table_names():
        row = sqlite_utils_db.execute(
            f"SELECT migration_set FROM [{table}] WHERE migration_set IS NOT ? LIMIT 1", [MIGRATION_SET]
        ).fetchone()
        if row is not None:
            return f"the migrations of another application (migration set {row[0]!r} in {table})"
    return None
