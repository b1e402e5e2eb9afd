"""
The index schema as a sqlite-utils `Migrations` set, built from the SQL files in `migrations/`.

Each SQL file is one migration, recorded by name in `_sqlite_migrations` once applied. Statements run one by one
inside the migration's transaction (`executescript` would commit it first).
"""

import sqlite3
from collections.abc import Callable, Iterator
from importlib import resources
from importlib.resources.abc import Traversable

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


def load_migrations(folder: Traversable | None = None) -> tuple[Migrations, tuple[str, ...]]:
    """
    :param folder: Where the SQL files are (None: casstore's own, `migrations/`); tests add a migration this way.
    :returns: The migrations, and their names in the order they apply.
    """
    migrations = Migrations(MIGRATION_SET)
    where = resources.files(_SCRIPTS_PACKAGE) if folder is None else folder
    scripts = sorted((entry for entry in where.iterdir() if entry.name.endswith(".sql")), key=lambda entry: entry.name)
    names = []
    for entry in scripts:
        name = entry.name.removesuffix(".sql")
        migrations(name=name)(_migration_from_script(entry.read_text(encoding="utf-8")))
        names.append(name)
    return migrations, tuple(names)


# The migrations, and their names in the order they apply.
MIGRATIONS, MIGRATION_NAMES = load_migrations()

# The migrations of casstore's development versions, before the baseline (SQLite's and PostgreSQL's had the same
# names). An index that records one was laid out in a way no release reads.
DEVELOPMENT_MIGRATIONS = frozenset(
    {
        "0001_blobs_and_writes",
        "0002_offloads",
        "0003_summary_views",
        "0004_readable_blobs_and_visibility_trigger",
        "0005_frame_sizes_for_reads",
        "0006_one_owner_for_visibility",
        "0007_writes_in_one_statement",
        "0008_learned_encodings",
        "0009_search_index",
        "0010_compactions",
        "0011_leaner_history",
        "0012_search_pending",
        "0013_frames_in_chunks",
        "0015_search_automerge",
        "0016_references_by_blob_id",
        "0017_dependencies_in_slots",
        "0018_digests_kept_once",
        "0019_blob_times_in_milliseconds",
        "0020_an_index_of_bases_only",
        "0021_key_stems",
        "0022_store_settings",
    }
)


def unknown_migrations_message(place: str, unknown: list[str], *, what: str = "") -> str:
    """
    :param place: The index, for the message (a path, or a PostgreSQL database without its password).
    :param unknown: The migrations it records that this release does not know.
    :returns: Why the index is refused: made by a development version of casstore, or by a newer release.
    """
    listed = ", ".join(unknown) + (f" {what}" if what else "")
    if any(name in DEVELOPMENT_MIGRATIONS for name in unknown):
        return (
            f"{place} was made by a development version of casstore, before its first release, whose index layout "
            f"this release cannot read (migrations {listed}). Start a new store (a new folder, or an empty "
            f"database) and write there; nothing was changed."
        )
    return (
        f"{place} was written by a newer casstore: its schema has migrations this release does not know "
        f"({listed}). Upgrade casstore to open it; nothing was changed."
    )
