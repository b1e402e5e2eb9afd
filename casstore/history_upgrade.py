"""
What migration 0011 (the leaner history) needs of an index before it runs, on either engine: 0011 turns the text
times of the table `writes` into `write_log`'s integer milliseconds, so a time edited by hand into something that is
not a time would fail it. Such rows are named, with the statement that fixes them, before anything changes.
"""

import sqlite3
from collections.abc import Sequence

from casstore.errors import SchemaError

# The migration that turns `writes.written_at` text into `write_log`'s integer milliseconds.
LEANER_HISTORY = "0011_leaner_history"
_EXAMPLES = 3


def refuse_unreadable_write_times(connection: sqlite3.Connection, *, pending: Sequence[str], path: object) -> None:
    """
    Before migration 0011 runs: every `written_at` of the table `writes` must be a time SQLite can read, as 0011 keeps
    times as milliseconds. A time edited by hand into something else would fail the migration half-way through its
    statements; this names the rows and the fix instead, before anything changes.

    :param connection: The index's connection, inside the transaction that will apply `pending`.
    :param pending: The names of the migrations about to be applied.
    :param path: The index file, for the message.
    :raises SchemaError: If a row's `written_at` is not a time. Nothing is changed.
    """
    if LEANER_HISTORY not in pending:
        return
    kind = connection.execute("SELECT type FROM sqlite_master WHERE name = 'writes'").fetchone()
    if kind is None or kind[0] != "table":
        return
    unreadable = connection.execute(
        "SELECT id, written_at FROM writes WHERE julianday(written_at) IS NULL ORDER BY id"
    ).fetchall()
    if unreadable:
        raise SchemaError(
            unreadable_times_message(
                unreadable, place=str(path), engine="sqlite3", rows_to_fix="julianday(written_at) IS NULL"
            )
        )


def unreadable_times_message(
    unreadable: Sequence[tuple[object, object]], *, place: str, engine: str, rows_to_fix: str | None = None
) -> str:
    """
    :param unreadable: `(id, written_at)` of each row of `writes` whose time is not a time.
    :param place: The index, as the message names it.
    :param engine: The command line a person fixes the rows with.
    :param rows_to_fix: A condition the engine can test that selects those rows; without it, their ids.
    :returns: What `SchemaError` says: the rows, and the statement that gives them a time.
    """
    examples = ", ".join(f"id {row_id}: {written_at!r}" for row_id, written_at in unreadable[:_EXAMPLES])
    more = f" and {len(unreadable) - _EXAMPLES} more" if len(unreadable) > _EXAMPLES else ""
    if rows_to_fix is None:
        rows_to_fix = "id IN (" + ", ".join(str(row_id) for row_id, _ in unreadable) + ")"
    fix = (
        "UPDATE writes SET written_at = (SELECT first_seen FROM blobs WHERE blobs.digest = writes.digest) "
        f"WHERE {rows_to_fix}"
    )
    rows = (
        "1 row of the table writes has" if len(unreadable) == 1 else f"{len(unreadable)} rows of the table writes have"
    )
    return (
        f"{place} cannot be upgraded: {rows} a written_at that is not a time "
        f"({examples}{more}), and this release keeps times as milliseconds (migration {LEANER_HISTORY}). Nothing was "
        f"changed. Give those rows a time, for example the time their content was first stored, with {engine}: "
        f"{fix}; then open the store again."
    )
