"""
The step archive's questions behind `casstore report`: the transcripts `StepArchiveCompactor` wrote (the `archives`
table), newest first, over a `report_scope.Scope`.
"""

import json
import sqlite3
from dataclasses import dataclass

from casstore.index.report_scope import Scope


@dataclass(frozen=True, slots=True)
class ArchiveRow:
    """One transcript `StepArchiveCompactor` wrote: when, where, which steps, and what it took out of the context."""

    archived_at: str
    namespace: str
    first_step: int | None
    last_step: int | None
    messages: int
    original_tokens: int
    saved_tokens: int
    reference: str


def archives(connection: sqlite3.Connection, scope: Scope, limit: int) -> tuple[int, list[ArchiveRow]]:
    """:returns: How many archives the scope holds, and the newest `limit` of them, newest first."""
    where, parameters = scope.where("archived_at")
    total = int(connection.execute(f"SELECT count(*) FROM archives {where}", parameters).fetchone()[0])
    rows = connection.execute(
        f"SELECT archived_at, namespace, first_step, last_step, messages, original_tokens, saved_tokens, refs "
        f"FROM archives {where} ORDER BY archived_at DESC, id DESC LIMIT ?",
        [*parameters, limit],
    )
    return total, [
        ArchiveRow(str(row[0]), row[1], row[2], row[3], int(row[4]), int(row[5]), int(row[6]), json.loads(row[7])[0])
        for row in rows
    ]
