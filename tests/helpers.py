"""Small helpers the tests share: looking into a store's folder and index the way a person would."""

import hashlib
import sqlite3
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


def count_rows(root: Path, table: str) -> int:
    with sqlite3.connect(root / "index.db") as connection:
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
    with sqlite3.connect(root / "index.db") as connection:
        row = connection.execute(
            "SELECT frame FROM blob_frames JOIN blobs ON blobs.id = blob_frames.blob_id WHERE digest = ?", (digest,)
        ).fetchone()
    return bytes(row[0])


def replace_inline_frame(root: Path, digest: str, frame: bytes) -> None:
    with sqlite3.connect(root / "index.db") as connection:
        connection.execute(
            "UPDATE blob_frames SET frame = ? WHERE blob_id = (SELECT id FROM blobs WHERE digest = ?)", (frame, digest)
        )


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
    with the slots' dependencies, and the views and triggers that read and write it as 0008 and 0013 made them.
    """
    from casstore.schema import MIGRATION_NAMES

    rows = connection.execute("SELECT blob_id, needs_id, encoding FROM blob_dependencies").fetchall()
    for trigger in ("blob_dependencies_insert", "blob_dependencies_update", "blob_dependencies_delete"):
        connection.execute(f"DROP TRIGGER {trigger}")
    for trigger in ("blob_frames_insert", "blob_frames_update"):
        connection.execute(f"DROP TRIGGER {trigger}")
    for view in ("blob_dependencies", "readable_blobs", "blob_locations", "blob_encodings"):
        connection.execute(f"DROP VIEW {view}")
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
        "CREATE VIEW readable_blobs",
        "CREATE VIEW blob_locations",
    ):
        connection.execute(statement)
    connection.executemany("INSERT INTO blob_dependencies (blob_id, needs_id, encoding) VALUES (?, ?, ?)", rows)
    connection.execute("DELETE FROM _sqlite_migrations WHERE name = '0017_dependencies_in_slots'")
    connection.execute(f"PRAGMA user_version = {MIGRATION_NAMES.index('0017_dependencies_in_slots')}")
