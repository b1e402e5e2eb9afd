"""
The SQLite schema of `index.db`, as an ordered list of sqlite-utils migrations.

Each `NNNN_name.sql` file in this folder is one migration, applied in file-name order and recorded by name in the
`_sqlite_migrations` table. This folder is installed as `casstore.migrations` (see `pyproject.toml`); nothing installs
a top-level `migrations` package. To change the schema, add a new file with the next number: never edit one that has
shipped, since indexes made by older releases have already applied it.
"""

import sqlite3
from collections.abc import Callable, Iterator
from importlib import resources

from sqlite_utils import Database
from sqlite_utils.migrations import Migrations

MIGRATION_SET = "casstore"


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
        (entry for entry in resources.files(__name__).iterdir() if entry.name.endswith(".sql")),
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
