"""
The SQLite connection behind a store: opening `index.db`, applying the schema, and transactions.

One `Database` holds one connection, shared by every thread that uses the store and guarded by a lock. Several
processes may open the same `index.db`: SQLite's WAL mode lets readers run beside one writer, and every write
transaction starts with `BEGIN IMMEDIATE` and waits (up to `busy_timeout`) for the write lock instead of failing with
`database is locked`.
"""

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlite_utils import Database as SqliteUtilsDatabase

from casstore.errors import SchemaError, StoreClosedError
from casstore.schema import MIGRATION_NAMES, MIGRATION_SET, MIGRATIONS

# How long a write waits for another process's write transaction before giving up.
DEFAULT_BUSY_TIMEOUT_SECONDS = 60.0

# The time format of every timestamp column: UTC, sortable as text, and what SQLite's own `datetime()` compares with.
NOW_SQL = "strftime('%Y-%m-%d %H:%M:%f', 'now')"


class Database:
    """A thread-safe SQLite connection to one `index.db`, with its schema brought up to date."""

    def __init__(self, path: Path, *, durable: bool, busy_timeout: float = DEFAULT_BUSY_TIMEOUT_SECONDS) -> None:
        """
        Open (creating if needed) the index at `path` and apply pending schema migrations.

        :param path: The `index.db` file.
        :param durable: Use `synchronous=FULL`, so a committed write survives power loss, not only a process crash.
        :param busy_timeout: Seconds to wait for another process's write transaction.
        :raises SchemaError: If the index was written by a newer casstore or is not a casstore index. Nothing is
            changed in that case.
        """
        self.path = path
        self.lock = threading.RLock()
        try:
            self._connection: sqlite3.Connection | None = sqlite3.connect(
                path, timeout=busy_timeout, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as error:
            raise SchemaError(f"Cannot open the index {path}: {error}.") from error
        try:
            self._prepare(durable=durable)
        except BaseException:
            self._connection.close()
            self._connection = None
            raise

    @property
    def connection(self) -> sqlite3.Connection:
        """:raises StoreClosedError: If the database was closed."""
        if self._connection is None:
            raise StoreClosedError("This casstore store is closed; open a new ContentAddressedToolResultStore.")
        return self._connection

    def _prepare(self, *, durable: bool) -> None:
        connection = self.connection
        try:
            sqlite_utils_db = SqliteUtilsDatabase(connection, recursive_triggers=False, execute_plugins=False)
            _refuse_unknown_schema(sqlite_utils_db, self.path)
            if connection.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                connection.execute("PRAGMA journal_mode=WAL")
            connection.execute(f"PRAGMA synchronous={'FULL' if durable else 'NORMAL'}")
            if MIGRATIONS.pending(sqlite_utils_db):
                self._migrate(sqlite_utils_db)
        except sqlite3.DatabaseError as error:
            raise SchemaError(
                f"{self.path} is not a usable casstore index ({error}). If it is damaged, move it aside: see "
                f"'Recovery' in the casstore README."
            ) from error

    def _migrate(self, sqlite_utils_db: SqliteUtilsDatabase) -> None:
        # The write lock keeps two processes opening a new root at once from applying the same migration twice.
        with self.transaction():
            _refuse_unknown_schema(sqlite_utils_db, self.path)
            MIGRATIONS.apply(sqlite_utils_db)
            self.connection.execute(f"PRAGMA user_version = {len(MIGRATION_NAMES)}")

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """
        Run a write transaction: the thread lock, `BEGIN IMMEDIATE`, then `COMMIT`, or `ROLLBACK` on any error.

        :returns: A context manager yielding the connection.
        """
        with self.lock:
            connection = self.connection
            connection.execute("BEGIN IMMEDIATE")
            try:
                yield connection
            except BaseException:
                if connection.in_transaction:
                    connection.execute("ROLLBACK")
                raise
            connection.execute("COMMIT")

    @contextmanager
    def reading(self) -> Iterator[sqlite3.Connection]:
        """
        Use the connection for reads outside a transaction (each statement sees the latest committed state).

        :returns: A context manager yielding the connection.
        """
        with self.lock:
            yield self.connection

    def close(self) -> None:
        """Close the connection. Later use raises `StoreClosedError`; closing twice is harmless."""
        with self.lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None


def _refuse_unknown_schema(sqlite_utils_db: SqliteUtilsDatabase, path: Path) -> None:
    applied = [migration.name for migration in MIGRATIONS.applied(sqlite_utils_db)]
    unknown = [name for name in applied if name not in MIGRATION_NAMES]
    if unknown:
        raise SchemaError(
            f"{path} was written by a newer casstore: its schema has migrations this release does not know "
            f"({', '.join(unknown)} in set '{MIGRATION_SET}'). Upgrade casstore to open it; nothing was changed."
        )
    if not applied and _has_foreign_tables(sqlite_utils_db):
        raise SchemaError(
            f"{path} is a SQLite database but not a casstore index. Point the store at an empty or casstore folder."
        )


def _has_foreign_tables(sqlite_utils_db: SqliteUtilsDatabase) -> bool:
    return bool(set(sqlite_utils_db.table_names()) - {MIGRATIONS.migrations_table})
