"""Small helpers the tests share: looking into a store's folder and index the way a person would."""

import hashlib
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

import blake3

from casstore.repository import Repository
from casstore.store import DEFAULT_INLINE_MAX


def blake3_hex(data: bytes) -> str:
    return blake3.blake3(data).hexdigest()


def create_store(root: Path) -> None:
    """
    Create an empty store on disk (`root`, `index.db` with the schema, `blobs/`), as a first write would, but with
    nothing in it: for tests that look into the index, or whose child processes must find the schema in place.
    """
    Repository.local(root, compression_level=3, inline_max=DEFAULT_INLINE_MAX, durable=False, lazy=False).close()


@contextmanager
def open_index(root: Path) -> Iterator[sqlite3.Connection]:
    """
    A connection to the store's `index.db`, committed and closed when the block ends.

    `with sqlite3.connect(...)` only commits: the connection lives on until the cyclic garbage collector frees it,
    whenever that runs, and while it is open the write-ahead log stays on disk (its last close removes it). A test
    that measures the store's files would then measure the collector's timing too.
    """
    with closing(sqlite3.connect(root / "index.db")) as connection, connection:
        yield connection


def count_rows(root: Path, table: str) -> int:
    with open_index(root) as connection:
        return int(connection.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


def blob_files(root: Path) -> list[Path]:
    """Every file under `blobs/`, temporary ones included."""
    blobs = root / "blobs"
    return sorted(path for path in blobs.rglob("*") if path.is_file()) if blobs.exists() else []


def tree_fingerprint(root: Path) -> dict[str, str]:
    """Path -> sha256 of every file in the store, to show that an operation changed nothing."""
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file() and not path.name.endswith(("-wal", "-shm"))
    }


def snapshot(root: Path) -> tuple[int, int, list[Path]]:
    """(write rows, blob rows, blob files): what a failed write must leave unchanged."""
    return count_rows(root, "writes"), count_rows(root, "blobs"), blob_files(root)


def inline_frame(root: Path, digest: str) -> bytes:
    """The zstd frame of a blob stored in the index."""
    with open_index(root) as connection:
        row = connection.execute(
            "SELECT frame FROM blob_frames JOIN blobs ON blobs.id = blob_frames.blob_id WHERE digest = ?", (digest,)
        ).fetchone()
    return bytes(row[0])


def replace_inline_frame(root: Path, digest: str, frame: bytes) -> None:
    with open_index(root) as connection:
        connection.execute(
            "UPDATE blob_frames SET frame = ? WHERE blob_id = (SELECT id FROM blobs WHERE digest = ?)", (frame, digest)
        )


# What migration 0016 (references by blob id) added, and the objects it changed.
REFERENCES_BY_BLOB_ID = "0016_references_by_blob_id"
_BLOB_ID_TRIGGERS = ("blobs_attach_references", "blobs_detach_references", "blobs_follow_references")


def schema_through(last: str) -> dict[str, tuple[str, str]]:
    """:returns: `sqlite_master`'s type and SQL of every object an index of the migrations up to `last` has, by name."""
    import contextlib

    import sqlite_utils

    from casstore.schema import MIGRATION_NAMES, _migration_from_script

    scripts = Path(__file__).resolve().parent.parent / "migrations"
    with contextlib.closing(sqlite3.connect(":memory:")) as connection:
        database = sqlite_utils.Database(connection)
        for name in MIGRATION_NAMES[: MIGRATION_NAMES.index(last) + 1]:
            _migration_from_script((scripts / f"{name}.sql").read_text(encoding="utf-8"))(database)
        return {
            row[0]: (row[1], row[2])
            for row in connection.execute("SELECT name, type, sql FROM sqlite_master WHERE sql IS NOT NULL")
        }


def undo_references_by_blob_id(connection: sqlite3.Connection) -> None:
    """
    Turn an index back into what the migration before 0016 left, with the same rows: `namespace_references` without
    `blob_id`, its unique index by digest, `readable_blobs` joining blobs by digest, no triggers on `blobs`, and 0016
    not recorded as applied (opening the store applies it again). Later migrations are the caller's to undo first.
    """
    from casstore.schema import MIGRATION_NAMES

    before = schema_through(MIGRATION_NAMES[MIGRATION_NAMES.index(REFERENCES_BY_BLOB_ID) - 1])
    for name in _BLOB_ID_TRIGGERS:
        connection.execute(f"DROP TRIGGER {name}")
    connection.execute("DROP VIEW readable_blobs")
    connection.execute("DROP INDEX namespace_references_by_blob")
    connection.execute("ALTER TABLE namespace_references DROP COLUMN blob_id")
    connection.execute(before["namespace_references_by_digest"][1])
    connection.execute(before["readable_blobs"][1])
    connection.execute("DELETE FROM _sqlite_migrations WHERE name = ?", (REFERENCES_BY_BLOB_ID,))
    connection.execute(f"PRAGMA user_version = {MIGRATION_NAMES.index(REFERENCES_BY_BLOB_ID)}")


def statements_of(migration: str, *starts: str) -> list[str]:
    """:returns: The statements of `migrations/<migration>.sql` that begin with one of `starts`, in their order."""
    from casstore.schema import _statements

    script = (Path(__file__).parent.parent / "migrations" / f"{migration}.sql").read_text(encoding="utf-8")
    found = []
    for statement in _statements(script):
        text = "\n".join(line for line in statement.splitlines() if not line.lstrip().startswith("--")).strip()
        if text.startswith(starts):
            found.append(text)
    return found


def as_before_0017(connection: sqlite3.Connection) -> None:
    """
    Turn a SQLite index back into what it was before migration 0017: `blob_dependencies` a table of its own (0008)
    with the slots' dependencies, and the views and triggers that read and write it as 0008, 0013 and 0016 made them.
    """
    from casstore.schema import MIGRATION_NAMES

    rows = connection.execute("SELECT blob_id, needs_id, encoding FROM blob_dependencies").fetchall()
    for trigger in ("blob_dependencies_insert", "blob_dependencies_update", "blob_dependencies_delete"):
        connection.execute(f"DROP TRIGGER {trigger}")
    for trigger in ("blob_frames_insert", "blob_frames_update"):
        connection.execute(f"DROP TRIGGER {trigger}")
    for view in ("blob_dependencies", "readable_blobs", "blob_locations", "blob_encodings"):
        connection.execute(f"DROP VIEW {view}")
    as_before_0020(connection)
    connection.execute("DROP INDEX frame_slots_by_needs")
    connection.execute("ALTER TABLE frame_slots DROP COLUMN is_delta")
    connection.execute("ALTER TABLE frame_slots DROP COLUMN needs_id")
    for statement in statements_of(
        "0008_learned_encodings",
        "CREATE TABLE blob_dependencies",
        "CREATE INDEX blob_dependencies_by_needs",
        "CREATE VIEW blob_encodings",
    ):
        connection.execute(statement)
    for statement in statements_of(
        "0013_frames_in_chunks",
        "CREATE TRIGGER blob_frames_insert",
        "CREATE TRIGGER blob_frames_update",
        "CREATE VIEW blob_locations",
    ):
        connection.execute(statement)
    # `readable_blobs` as the migration before 0017 left it: 0016 joined it to `blobs` by the reference's blob id.
    (readable,) = statements_of(REFERENCES_BY_BLOB_ID, "CREATE VIEW readable_blobs")
    connection.execute(readable)
    connection.executemany("INSERT INTO blob_dependencies (blob_id, needs_id, encoding) VALUES (?, ?, ?)", rows)
    connection.execute("DELETE FROM _sqlite_migrations WHERE name = '0017_dependencies_in_slots'")
    connection.execute(f"PRAGMA user_version = {MIGRATION_NAMES.index('0017_dependencies_in_slots')}")


# What migration 0018 (digests kept once) changed, and the objects it dropped and made again.
DIGESTS_KEPT_ONCE = "0018_digests_kept_once"
_DIGESTS_KEPT_ONCE_VIEWS = (
    "offloaded_parts",
    "writes",
    "visible_references",
    "dedup_summary",
    "namespace_summary",
    "repeated_results",
    "readable_blobs",
)


def as_before_0018(connection: sqlite3.Connection) -> None:
    """
    Turn a SQLite index back into what it was before migration 0018, with the same rows: every reference with its own
    copy of its digest (taken from its blob row), the index of the references' text, and the views and triggers as
    0017 left them; 0018 not recorded as applied (opening the store applies it again). 0019 is undone first, if the
    index has it (`blobs` a table again, where 0018's triggers are).
    """
    from casstore.schema import MIGRATION_NAMES

    if connection.execute("SELECT 1 FROM sqlite_master WHERE name = 'blob_rows'").fetchone() is not None:
        as_before_0019(connection)
    before = schema_through(MIGRATION_NAMES[MIGRATION_NAMES.index(DIGESTS_KEPT_ONCE) - 1])
    rows = connection.execute(
        "SELECT r.id, r.namespace_id, coalesce(r.digest, b.digest), r.is_binary, r.extension, r.size, r.blob_id "
        "FROM namespace_references r LEFT JOIN blobs b ON b.id = r.blob_id ORDER BY r.id"
    ).fetchall()
    for view in _DIGESTS_KEPT_ONCE_VIEWS:
        connection.execute(f"DROP VIEW {view}")
    for trigger in _BLOB_ID_TRIGGERS:
        connection.execute(f"DROP TRIGGER {trigger}")
    connection.execute("DROP TABLE namespace_references")
    connection.execute(before["namespace_references"][1])
    connection.executemany(
        "INSERT INTO namespace_references (id, namespace_id, digest, is_binary, extension, size, blob_id) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        rows,
    )
    _make_missing(connection, before)
    connection.execute("DELETE FROM _sqlite_migrations WHERE name = ?", (DIGESTS_KEPT_ONCE,))
    connection.execute(f"PRAGMA user_version = {MIGRATION_NAMES.index(DIGESTS_KEPT_ONCE)}")


def _make_missing(connection: sqlite3.Connection, schema: dict[str, tuple[str, str]]) -> None:
    """Make the indexes, views and triggers of `schema` (as `schema_through` gives it) that the index lacks."""
    present = {row[0] for row in connection.execute("SELECT name FROM sqlite_master")}
    for kind in ("index", "view", "trigger"):
        for name, (object_type, sql) in schema.items():
            if object_type == kind and name not in present:
                connection.execute(sql)


# What migration 0019 (a blob's times in milliseconds) changed.
BLOB_TIMES_IN_MILLISECONDS = "0019_blob_times_in_milliseconds"


def as_before_0019(connection: sqlite3.Connection) -> None:
    """
    Turn a SQLite index back into what it was before migration 0019, with the same rows: `blobs` a table again, its
    times the text the view showed, with 0018's triggers on it; 0019 not recorded as applied (opening the store
    applies it again). The views that read `blobs` read the table again, as they did.
    """
    from casstore.schema import MIGRATION_NAMES

    as_before_0020(connection)
    before = schema_through(MIGRATION_NAMES[MIGRATION_NAMES.index(BLOB_TIMES_IN_MILLISECONDS) - 1])
    rows = connection.execute(
        "SELECT id, digest, size, stored_size, stored_in, first_seen, last_seen FROM blobs ORDER BY id"
    ).fetchall()
    connection.execute("DROP VIEW blobs")  # and its triggers
    connection.execute("DROP TABLE blob_rows")  # and its triggers
    connection.execute(before["blobs"][1])
    connection.executemany(
        "INSERT INTO blobs (id, digest, size, stored_size, stored_in, first_seen, last_seen) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        rows,
    )
    for trigger in _BLOB_ID_TRIGGERS:
        connection.execute(before[trigger][1])
    connection.execute("DELETE FROM _sqlite_migrations WHERE name = ?", (BLOB_TIMES_IN_MILLISECONDS,))
    connection.execute(f"PRAGMA user_version = {MIGRATION_NAMES.index(BLOB_TIMES_IN_MILLISECONDS)}")


# What migration 0020 (an index of bases only) changed.
AN_INDEX_OF_BASES_ONLY = "0020_an_index_of_bases_only"


def as_before_0020(connection: sqlite3.Connection) -> None:
    """
    Turn a SQLite index back into what it was before migration 0020 (if it has 0020): the partial index of what every
    slot needs, as 0017 made it, in place of 0020's of the deltas' only; 0020 not recorded as applied.
    """
    from casstore.schema import MIGRATION_NAMES

    as_before_0021(connection)
    applied = connection.execute("SELECT 1 FROM _sqlite_migrations WHERE name = ?", (AN_INDEX_OF_BASES_ONLY,))
    if applied.fetchone() is None:
        return
    connection.execute("DROP INDEX frame_slots_by_base")
    (index,) = statements_of("0017_dependencies_in_slots", "CREATE INDEX frame_slots_by_needs")
    connection.execute(index)
    connection.execute("DELETE FROM _sqlite_migrations WHERE name = ?", (AN_INDEX_OF_BASES_ONLY,))
    connection.execute(f"PRAGMA user_version = {MIGRATION_NAMES.index(AN_INDEX_OF_BASES_ONLY)}")


# What migration 0021 (key stems) changed.
KEY_STEMS = "0021_key_stems"
# Migration 0022 added the table `store_settings` (where a shared store records its blob location).
STORE_SETTINGS = "0022_store_settings"


def as_before_0022(connection: sqlite3.Connection) -> None:
    """Turn a SQLite index back into what it was before migration 0022: no `store_settings`, 0022 not applied."""
    from casstore.schema import MIGRATION_NAMES

    connection.execute("DROP TABLE IF EXISTS store_settings")
    connection.execute("DELETE FROM _sqlite_migrations WHERE name = ?", (STORE_SETTINGS,))
    connection.execute(f"PRAGMA user_version = {MIGRATION_NAMES.index(STORE_SETTINGS)}")


def as_before_0021(connection: sqlite3.Connection) -> None:
    """
    Turn a SQLite index back into what it was before migration 0021 (if it has 0021), with the same rows: `write_log`
    with every key whole and without the stem columns, no `key_stems`, and the views `writes` and `repeated_results`
    (and the trigger on `writes`) as 0018 made them; 0021 not recorded as applied (opening the store applies it again).
    """
    from casstore.schema import MIGRATION_NAMES

    as_before_0022(connection)
    applied = connection.execute("SELECT 1 FROM _sqlite_migrations WHERE name = ?", (KEY_STEMS,))
    if applied.fetchone() is None:
        return
    before = schema_through(MIGRATION_NAMES[MIGRATION_NAMES.index(KEY_STEMS) - 1])
    rows = connection.execute(
        "SELECT w.id, w.reference_id, CASE WHEN w.key_stem_id IS NULL THEN w.key ELSE coalesce(w.key_step || '_', '') "
        "|| (SELECT s.stem FROM key_stems s WHERE s.id = w.key_stem_id) || w.key END, w.written_at "
        "FROM write_log w ORDER BY w.id"
    ).fetchall()
    for view in ("writes", "repeated_results"):
        connection.execute(f"DROP VIEW {view}")  # and its triggers
    connection.execute("DROP TABLE write_log")
    connection.execute("DROP TABLE key_stems")
    connection.execute(before["write_log"][1])
    connection.executemany("INSERT INTO write_log (id, reference_id, key, written_at) VALUES (?, ?, ?, ?)", rows)
    _make_missing(connection, before)
    connection.execute("DELETE FROM _sqlite_migrations WHERE name = ?", (KEY_STEMS,))
    connection.execute(f"PRAGMA user_version = {MIGRATION_NAMES.index(KEY_STEMS)}")
