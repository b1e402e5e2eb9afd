"""
Giving an SQLite index's space back: checkpointing the write-ahead log into `index.db` and emptying it, and running
the scripts that hand free pages back to the file system (`database.Database.return_free_space`, `rebuild`).
"""

import sqlite3
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

from casstore.disk import disk_usage_of_file
from casstore.index.sqlite_file import JOURNAL_SIZE_LIMIT

# How long the final checkpoint that shrinks the write-ahead log may wait for readers (writers wait meanwhile).
_CHECKPOINT_WAIT_MS = 200
_CHECKPOINT_TRIES = 5
# How long gc waits, at most, for another connection's checkpoint to end before it reports the sizes.
_CHECKPOINT_PATIENCE_SECONDS = 120.0
INCREMENTAL = 2  # `PRAGMA auto_vacuum`'s value for INCREMENTAL


def checkpoint(held: Callable[[], AbstractContextManager[sqlite3.Connection]], log: Path) -> bool:
    """
    Copy the write-ahead log `log` into the index and empty it, waiting briefly for readers.

    :param held: Holds the index's connection.
    :returns: Whether it was done: False while another connection reads an older state of the index, whose pages
        `index.db` (and the log) keep until that read ends.
    """
    # A PASSIVE checkpoint copies the log into index.db beside readers and writers (and truncates the file once
    # all of it is copied). The TRUNCATE one that follows empties the log, but holds writers off while it waits
    # for readers of older pages: each try waits briefly, a few tries apart, and if readers are still there the
    # log is cut down to `JOURNAL_SIZE_LIMIT` when a later write starts it over (a log already that small gets
    # one try). While another connection runs a checkpoint (a writer's automatic one, after a rebuild that put the
    # whole index in the log), no try can run: gc waits for it, holding no lock, so that its report says what is on
    # disk once it is done.
    blocking_tries = 0
    deadline = time.monotonic() + _CHECKPOINT_PATIENCE_SECONDS
    while blocking_tries < _CHECKPOINT_TRIES and time.monotonic() < deadline:
        with held() as connection:
            connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            small = disk_usage_of_file(log) <= JOURNAL_SIZE_LIMIT
            timeout_ms = connection.execute("PRAGMA busy_timeout").fetchone()[0]
            connection.execute(f"PRAGMA busy_timeout = {_CHECKPOINT_WAIT_MS}")
            try:
                busy, log_frames, _ = connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            finally:
                connection.execute(f"PRAGMA busy_timeout = {timeout_ms}")
        if not busy and log_frames <= 0:
            return True
        if log_frames >= 0:  # it ran, and readers kept it from finishing
            blocking_tries += 1
            if small:
                return False  # one try for a log this small, which is reused as it is
        time.sleep(_CHECKPOINT_WAIT_MS / 1000)
    return False


def estimated_bytes(connection: sqlite3.Connection, *, rebuilt: bool) -> int:
    """:returns: The bytes the index would take with its free pages given back (`Database.estimated_bytes`)."""
    execute = connection.execute
    pages = int(execute("PRAGMA page_count").fetchone()[0])
    if rebuilt or execute("PRAGMA auto_vacuum").fetchone()[0] == INCREMENTAL:
        pages -= int(execute("PRAGMA freelist_count").fetchone()[0])
    return pages * int(execute("PRAGMA page_size").fetchone()[0])


def free_pages(
    held: Callable[[], AbstractContextManager[sqlite3.Connection]], *, step_pages: int, pause: Callable[[float], None]
) -> None:
    """
    Give the index's free pages back to the file system, `step_pages` per write transaction.

    :param held: Holds the index's connection.
    :param pause: Called after each step with how long it held the write lock (`Database.yield_to_writers`).
    """
    script = f"BEGIN IMMEDIATE; PRAGMA incremental_vacuum({step_pages}); COMMIT;"
    with held() as connection:
        free = connection.execute("PRAGMA freelist_count").fetchone()[0]
    # Bounded by what was free at the start: pages freed later (by another gc) are left for its own run.
    for _ in range(-(-free // step_pages)):
        with held() as connection:
            if connection.execute("PRAGMA freelist_count").fetchone()[0] == 0:
                break
            started = time.perf_counter()
            # `executescript` steps the pragma to its end (`execute` would move one page).
            run_script(connection, script)
        pause(time.perf_counter() - started)


def run_script(connection: sqlite3.Connection, script: str) -> None:
    """Run `script` to its end (`execute` would step a pragma once), rolling back what it left open if it fails."""
    try:
        connection.executescript(script)
    except BaseException:
        if connection.in_transaction:
            connection.execute("ROLLBACK")
        raise
