"""
A local store this process cannot write: on read-only media (a mounted backup, a read-only container layer), or with
a folder and `index.db` it has no permission to write.

Such a store is read, never written. SQLite cannot open an index in WAL mode the ordinary way there (it would make
`index.db-shm` and `index.db-wal` beside it), so the index is opened with `mode=ro`, which reads the write-ahead log
through an existing shared-memory file, or, when there is no log to read, as `immutable`: the file alone is then the
whole index. What would write it raises `ReadOnlyStoreError` and changes nothing.
"""

import errno
import os
import sqlite3
from pathlib import Path
from urllib.parse import quote

from casstore.errors import ReadOnlyStoreError

# What the file system answers to a write on read-only media, or to a process without the permission.
READ_ONLY_ERRNOS = frozenset({errno.EROFS, errno.EACCES, errno.EPERM})
# SQLite's primary result codes for a write refused because the file is read-only.
_REFUSED = {sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_PERM}


def cannot_write(path: Path) -> bool:
    """
    :param path: `index.db` (or, before it exists, its folder).
    :returns: Whether this process may not write `path` or its folder: the file system is mounted read-only, or the
        permissions (or an immutable attribute) forbid it. A missing `path` is judged by its folder alone.
    """
    folder = path if path.is_dir() else path.parent
    if not os.access(folder, os.W_OK):
        return True
    return path.is_file() and not os.access(path, os.W_OK)


def refuses_writes(connection: sqlite3.Connection) -> bool:
    """
    :returns: Whether SQLite refuses to write through `connection`, found by changing nothing: the schema version set
        to what it is, in a transaction that is rolled back.
    """
    version = int(connection.execute("PRAGMA user_version").fetchone()[0])
    try:
        connection.execute("BEGIN IMMEDIATE")
        try:
            connection.execute(f"PRAGMA user_version = {version}")
        finally:
            if connection.in_transaction:
                connection.execute("ROLLBACK")
    except sqlite3.Error as error:
        return (getattr(error, "sqlite_errorcode", 0) & 0xFF) in _REFUSED
    return False


def has_log(path: Path) -> bool:
    """:returns: Whether `path`'s write-ahead log holds anything (commits that may not be in `path` itself yet)."""
    try:
        return os.stat(f"{path}-wal").st_size > 0
    except FileNotFoundError:
        return False


def reading_uri(path: Path) -> str:
    """:returns: SQLite's URI that opens `path` for reading only, its write-ahead log included."""
    return f"file:{quote(str(path.absolute()))}?mode=ro"


def immutable_uri(path: Path) -> str:
    """:returns: SQLite's URI that reads `path` as a file nothing changes: no lock, no log, no shared memory."""
    return f"{reading_uri(path)}&immutable=1"


def store_error(root: Path, consequence: str, *, readable: bool = True) -> ReadOnlyStoreError:
    """
    :param root: The store's folder.
    :param consequence: What cannot be done, such as `it cannot be written`.
    :param readable: Whether the store can still be read.
    :returns: The error that says so, and what to do.
    """
    reading = (
        "Reading it works (stats, log, cat, verify, report, read); to write, gc or copy into it, "
        if readable
        else "To read it, "
    )
    return ReadOnlyStoreError(
        f"The casstore store at {root} is read-only (read-only media, or this process may not write its folder or "
        f"index.db): {consequence}. {reading}copy the folder to a writable place and open that, or remount it "
        f"writable."
    )
