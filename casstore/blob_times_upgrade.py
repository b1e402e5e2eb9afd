"""
What migration 0019 (a blob's times in milliseconds) needs of a SQLite index before it runs: 0019 turns the text times
of the table `blobs` into `blob_rows`' integer milliseconds, so a `first_seen` or `last_seen` edited by hand into
something that is not a time would fail it. Such rows are named, with the statement that fixes them, before anything
changes.
"""

import sqlite3
from collections.abc import Sequence

from casstore.errors import SchemaError

# The migration that turns `blobs`' text times into integer milliseconds.
BLOB_TIMES_IN_MILLISECONDS = "0019_blob_times_in_milliseconds"
_EXAMPLES = 3
_UNREADABLE = "julianday(first_seen) IS NULL OR julianday(last_seen) IS NULL"


def refuse_unreadable_blob_times(connection: sqlite3.Connection, *, pending: Sequence[str], path: object) -> None:
    """
    Before migration 0019 runs: every `first_seen` and `last_seen` of the table `blobs` must be a time SQLite can read.

    :param connection: The index's connection, inside the transaction that will apply `pending`.
    :param pending: The names of the migrations about to be applied.
    :param path: The index file, for the message.
    :raises SchemaError: If a row's `first_seen` or `last_seen` is not a time. Nothing is changed.
    """
    if BLOB_TIMES_IN_MILLISECONDS not in pending:
        return
    kind = connection.execute("SELECT type FROM sqlite_master WHERE name = 'blobs'").fetchone()
    if kind is None or kind[0] != "table":
        return  # a new index: its `blobs` is made by the migrations about to run
    unreadable = connection.execute(
        f"SELECT id, first_seen, last_seen FROM blobs WHERE {_UNREADABLE} ORDER BY id"
    ).fetchall()
    if unreadable:
        raise SchemaError(unreadable_blob_times_message(unreadable, place=str(path)))


def unreadable_blob_times_message(unreadable: Sequence[tuple[object, object, object]], *, place: str) -> str:
    """
    :param unreadable: `(id, first_seen, last_seen)` of each row of `blobs` with a time that is not a time.
    :param place: The index, as the message names it.
    :returns: What `SchemaError` says: the rows, and the statement that gives them a time.
    """
    examples = ", ".join(
        f"id {row_id}: first_seen {first!r}, last_seen {last!r}" for row_id, first, last in unreadable[:_EXAMPLES]
    )
    more = f" and {len(unreadable) - _EXAMPLES} more" if len(unreadable) > _EXAMPLES else ""
    rows = "1 row of the table blobs has" if len(unreadable) == 1 else f"{len(unreadable)} rows of the table blobs have"
    fix = (
        "UPDATE blobs SET first_seen = CASE WHEN julianday(first_seen) IS NULL "
        "THEN strftime('%Y-%m-%d %H:%M:%f', 'now') ELSE first_seen END, "
        "last_seen = CASE WHEN julianday(last_seen) IS NULL "
        "THEN strftime('%Y-%m-%d %H:%M:%f', 'now') ELSE last_seen END "
        f"WHERE {_UNREADABLE}"
    )
    return (
        f"{place} cannot be upgraded: {rows} a first_seen or last_seen that is not a time ({examples}{more}), and "
        f"this release keeps a blob's times as milliseconds (migration {BLOB_TIMES_IN_MILLISECONDS}). Nothing was "
        f"changed. Give those rows a time, for example now (which keeps the blob from gc for its grace period), with "
        f"sqlite3: {fix}; then open the store again."
    )
