"""
The index schema as a sqlite-utils `Migrations` set, built from the SQL files in `migrations/`.

Each SQL file is one migration, recorded by name in `_sqlite_migrations` once applied. Statements run one by one
inside the migration's transaction (`executescript` would commit it first).
"""

import sqlite3
from collections.abc import Callable, Iterator
from importlib import resources

from sqlite_utils import Database
from sqlite_utils.migrations import Migrations

MIGRATION_SET = "casstore"
# The installed name of the repository's `migrations/` folder.
_SCRIPTS_PACKAGE = "casstore.migrations"


def _statements(script: str) -> Iterator[str]:
    """
    Split a SQL script into statements.

    `executescript` would commit the migration's transaction first, so statements run one by one instead.
    """
    pending = ""
    for line in script.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            yield pending
            pending = ""
    if pending.strip() and not all(line.strip().startswith("--") for line in pending.strip().splitlines()):
        raise ValueError(f"Incomplete SQL statement at the end of a migration: {pending.strip()[:200]!r}")


def _migration_from_script(script: str) -> Callable[[Database], None]:
    def apply(db: Database) -> None:
        for statement in _statements(script):
            db.execute(statement)

    return apply


def _load() -> tuple[Migrations, tuple[str, ...]]:
    migrations = Migrations(MIGRATION_SET)
    scripts = sorted(
        (entry for entry in resources.files(_SCRIPTS_PACKAGE).iterdir() if entry.name.endswith(".sql")),
        key=lambda entry: entry.name,
    )
    names = []
    for entry in scripts:
        name = entry.name.removesuffix(".sql")
        migrations(name=name)(_migration_from_script(entry.read_text(encoding="utf-8")))
        names.append(name)
    return migrations, tuple(names)


# The migrations, and their names in the order they apply.
MIGRATIONS, MIGRATION_NAMES = _load()
