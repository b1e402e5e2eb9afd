"""
What both index engines (SQLite, `database`; PostgreSQL, `postgres`) share with the layers above them: a write
transaction's `UnitOfWork`, and the SQL for times (`NOW_SQL`, `SHIFTED_NOW_SQL`, `ago`), written in SQLite's dialect,
which the PostgreSQL engine translates.
"""

import sqlite3
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any, Protocol

# The time format of every timestamp column: UTC, sortable as text, and what SQLite's own `datetime()` compares with.
NOW_SQL = "strftime('%Y-%m-%d %H:%M:%f', 'now')"
# The same, shifted by a parameter such as '-3600.0 seconds' (see `ago`).
SHIFTED_NOW_SQL = "strftime('%Y-%m-%d %H:%M:%f', 'now', ?)"


def ago(period: timedelta) -> str:
    """:returns: The parameter for `SHIFTED_NOW_SQL` that means `period` before now."""
    return f"-{period.total_seconds()} seconds"


class _Statements(Protocol):
    """What runs a statement: a connection or a cursor, of either engine."""

    def execute(self, sql: str, parameters: Sequence[object], /) -> Any: ...


class UnitOfWork:
    """
    One write transaction: its connection, and what the layers learned in it, published only if it commits.

    A layer that learns something worth remembering beyond the transaction (the blob layer's note that a blob is
    stored) registers it with `on_commit`; a transaction that rolls back publishes nothing, so no caller has to.
    """

    __slots__ = ("_committed", "_statements", "connection")

    def __init__(self, connection: sqlite3.Connection, statements: _Statements | None = None) -> None:
        """
        :param connection: The transaction's connection.
        :param statements: What runs `change`'s statements (a cursor kept for them); by default the connection.
        """
        self.connection = connection
        self._statements = connection if statements is None else statements
        self._committed: list[Callable[[], None]] = []

    def change(self, sql: str, parameters: Sequence[object]) -> int:
        """
        Run a statement that returns no rows (an INSERT, UPDATE or DELETE without RETURNING).

        :returns: How many rows the statement itself changed: SQLite's `changes()` or PostgreSQL's command tag, which
            count no trigger's rows. An `INSERT ... ON CONFLICT DO NOTHING` that met its conflict changed 0.
        """
        return self._statements.execute(sql, parameters).rowcount

    def on_commit(self, publish: Callable[[], None]) -> None:
        """:param publish: Called once, after this transaction has committed; never if it rolls back."""
        self._committed.append(publish)

    def _publish(self) -> None:
        for publish in self._committed:
            publish()
