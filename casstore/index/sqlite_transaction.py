"""
Holding a SQLite `database.Database`'s connection for one thread (`Held`), and the write transaction on it
(`Transaction`: `BEGIN IMMEDIATE`, then `COMMIT` and the `UnitOfWork`'s `on_commit` callbacks, or `ROLLBACK`), plain
classes, not generator context managers, as one is entered on every read and write; and the rarer transactions,
`rolled_back` (a dry run's) and `snapshot` (reads that see one state).
"""

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol

from casstore import forks
from casstore.errors import StoreClosedError
from casstore.index.work import UnitOfWork


class Database(Protocol):
    """
    What holding `casstore.index.database.Database`'s connection uses of it: its state, which it shares with this
    module alone (declared here, so this module needs nothing from the one that uses it).
    """

    read_only: bool
    _closed: bool
    _connection: sqlite3.Connection
    _statements: sqlite3.Cursor
    _generation: int
    _lock: threading.RLock

    def _catch_up(self) -> None: ...


class Held:
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


class Transaction(Held):
    """A write transaction on a held connection; a plain class, as this is on every write's path."""

    __slots__ = ("_work",)

    def __enter__(self) -> UnitOfWork:  # type: ignore[override]
        connection = Held.__enter__(self)
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


@contextmanager
def rolled_back(database: Database) -> Iterator[UnitOfWork]:
    """`Database.rolled_back`: a write transaction on the held connection, always rolled back."""
    with Held(database) as connection:
        # A read-only index takes no write lock (nothing can write it meanwhile); a statement that would change
        # it fails, and is rolled back.
        connection.execute("BEGIN" if database.read_only else "BEGIN IMMEDIATE")
        try:
            yield UnitOfWork(connection, database._statements)
        finally:
            if connection.in_transaction:
                connection.execute("ROLLBACK")


@contextmanager
def snapshot(database: Database) -> Iterator[sqlite3.Connection]:
    """`Database.snapshot`: reads in one read transaction on the held connection."""
    with Held(database) as connection:
        connection.execute("BEGIN")
        try:
            yield connection
        finally:
            if connection.in_transaction:
                connection.execute("COMMIT")
