"""
A blob's row damaged by hand with a value of the wrong type is damage of that blob, never a crash nor other bytes.

SQLite stores whatever a column is given (`UPDATE blob_frames SET frame = 'garbage'` stores TEXT in a BLOB column, and
`PRAGMA ignore_check_constraints=ON` lets an unknown `encoding` in), so every value a read takes from the index may be
of any type: each such row must read as `CorruptBlobError` naming the blob, `casstore cat` must exit 1 with one line of
error, and `verify` must list the blob corrupt, like any other damaged blob.
"""

import random
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import psycopg
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from casstore import ContentAddressedToolResultStore, CorruptBlobError, ReferenceNotFoundError
from casstore.blobs import learning as learning_module
from casstore.cli import EXIT_FAILURE, cli
from casstore.maintenance.checks import collect_garbage, verify
from tests.helpers import blake3_hex

if TYPE_CHECKING:
    from tests.store_backends import Backend

CONTENT = "".join(f"line {number}: the result of a tool call\n" for number in range(60))
IGNORE_CHECKS = "PRAGMA ignore_check_constraints = ON"
OF_THE_BLOB = "WHERE id = (SELECT id FROM blobs WHERE digest = :digest)"
FRAME_OF_THE_BLOB = "WHERE blob_id = (SELECT id FROM blobs WHERE digest = :digest)"

# Each damage a hand can do to one column a read takes from the index, as SQL run on the blob's rows.
DAMAGES = {
    "frame TEXT": f"UPDATE blob_frames SET frame = 'garbage' {FRAME_OF_THE_BLOB}",
    "frame INTEGER": f"UPDATE blob_frames SET frame = 12 {FRAME_OF_THE_BLOB}",
    "frame REAL": f"UPDATE blob_frames SET frame = 1.5 {FRAME_OF_THE_BLOB}",
    "frame TEXT not UTF-8": f"UPDATE blob_frames SET frame = CAST(frame AS TEXT) {FRAME_OF_THE_BLOB}",
    "size TEXT": f"UPDATE blobs SET size = 'many' {OF_THE_BLOB}",
    "size BLOB": f"UPDATE blobs SET size = x'00' {OF_THE_BLOB}",
    "size REAL": f"UPDATE blobs SET size = 1.5 {OF_THE_BLOB}",
    "size negative": f"UPDATE blobs SET size = -1 {OF_THE_BLOB}",
    "encoding unknown": f"UPDATE blobs SET encoding = 'brotli' {OF_THE_BLOB}",
    "encoding INTEGER": f"UPDATE blobs SET encoding = 7 {OF_THE_BLOB}",
    "stored_in unknown": f"UPDATE blobs SET stored_in = 'tape' {OF_THE_BLOB}",
    "stored_in BLOB": f"UPDATE blobs SET stored_in = x'01' {OF_THE_BLOB}",
    "namespace BLOB": f"UPDATE blobs SET namespace = x'01' {OF_THE_BLOB}",
}


@contextmanager
def _index(root: Path) -> Iterator[sqlite3.Connection]:
    with closing(sqlite3.connect(root / "index.db")) as connection:
        connection.execute(IGNORE_CHECKS)
        with connection:
            yield connection


def _assert_corrupt_everywhere(store: ContentAddressedToolResultStore, reference: str, digest: str) -> None:
    """A read raises `CorruptBlobError` naming `digest`, `casstore cat` says so in one line, `verify` lists it."""
    with pytest.raises(CorruptBlobError) as raised:
        store.read(reference)
    assert raised.value.digest == digest and digest in str(raised.value)
    assert not raised.value.missing, "a damaged row is damage, not a missing blob"
    catted = CliRunner().invoke(cli, ["cat", reference, "--root", str(store.root)], catch_exceptions=False)
    assert catted.exit_code == EXIT_FAILURE, catted.output + catted.stderr
    assert "Traceback" not in catted.output + catted.stderr
    (line,) = catted.stderr.strip().splitlines()
    assert line.startswith("casstore: error: ") and digest in line, catted.stderr
    assert CONTENT not in catted.stdout
    report = verify(store)
    assert digest in [corrupt for corrupt, _ in report.corrupt], f"verify did not report {digest}: {report}"
    assert not report.ok
    verified = CliRunner().invoke(cli, ["verify", "--root", str(store.root)], catch_exceptions=False)
    assert verified.exit_code == EXIT_FAILURE, verified.output + verified.stderr
    assert "Traceback" not in verified.output + verified.stderr and digest in verified.output


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_a_column_damaged_with_the_wrong_type_reads_as_a_corrupt_blob(store_root: Path, damage: str) -> None:
    with ContentAddressedToolResultStore(store_root, namespace="alice", inline_max=1 << 20) as store:
        reference = store.write(key="result.txt", content=CONTENT)
        healthy = store.write(key="other.txt", content="another result, left alone")
        digest = blake3_hex(CONTENT.encode())
        with _index(store_root) as connection:
            assert connection.execute(DAMAGES[damage], {"digest": digest}).rowcount == 1
        _assert_corrupt_everywhere(store, reference, digest)
        assert store.read(healthy) == "another result, left alone"


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=st.one_of(st.text(), st.integers(min_value=-(2**63), max_value=2**63 - 1), st.floats(allow_nan=False)))
def test_a_frame_replaced_by_any_value_that_is_not_bytes_reads_as_a_corrupt_blob(
    tmp_path_factory: pytest.TempPathFactory, value: str | int | float
) -> None:
    root = tmp_path_factory.mktemp("store")
    with ContentAddressedToolResultStore(root, namespace="alice", inline_max=1 << 20) as store:
        reference = store.write(key="result.txt", content=CONTENT)
        digest = blake3_hex(CONTENT.encode())
        with _index(root) as connection:
            connection.execute(
                f"UPDATE blob_frames SET frame = :value {FRAME_OF_THE_BLOB}", {"value": value, "digest": digest}
            )
            (kind,) = connection.execute("SELECT typeof(frame) FROM blob_frames").fetchone()
        assert kind in {"text", "integer", "real"}, "SQLite stored bytes: not the damage under test"
        _assert_corrupt_everywhere(store, reference, digest)


@pytest.mark.parametrize("data", ["'garbage'", "12", "CAST(data AS TEXT)"], ids=["TEXT", "INTEGER", "TEXT not UTF-8"])
def test_a_dictionary_damaged_with_the_wrong_type_makes_its_blobs_corrupt(
    store_root: Path, data: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(learning_module, "TRAIN_AFTER", 24)
    rng = random.Random(3)
    with ContentAddressedToolResultStore(store_root, namespace="alice") as store:
        for number in range(80):
            record = f'{{"path": "/src/pkg_{rng.randrange(40)}/mod_{number}.py", "size": {rng.randrange(99999)}}}'
            store.write(key=f"{number}_stat_call_{number}.json", content=record)
        with _index(store_root) as connection:
            blob, reference, dictionary = connection.execute(
                "SELECT b.digest, w.reference, d.digest FROM blobs b JOIN writes w ON w.digest = b.digest "
                "JOIN dictionaries d ON d.id = b.dictionary_id ORDER BY b.id DESC LIMIT 1"
            ).fetchone()
            connection.execute(f"UPDATE dictionaries SET data = {data} WHERE digest = ?", (dictionary,))
    # A new store object: the one that wrote keeps the dictionary it trained in memory, verified.
    with ContentAddressedToolResultStore(store_root, namespace="alice") as store:
        with pytest.raises(CorruptBlobError) as raised:
            store.read(reference)
        assert raised.value.digest == blob
        catted = CliRunner().invoke(cli, ["cat", reference, "--root", str(store_root)], catch_exceptions=False)
        assert catted.exit_code == EXIT_FAILURE and "Traceback" not in catted.output + catted.stderr
        lines = catted.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("casstore: error: ") and blob in lines[0], catted.stderr
        report = verify(store)
        corrupt = [digest for digest, _ in report.corrupt]
        assert blob in corrupt and dictionary in corrupt, report


# On PostgreSQL a value of another type cannot be written into a BYTEA column (the UPDATE fails): only changing the
# column's type can put one there (`blobs.size` cannot even be changed: the views depend on it). On SQLite the UPDATE
# itself does it.
FRAMES_MADE_TEXT = {
    "local": "UPDATE blob_frames SET frame = hex(frame)",
    "shared": "ALTER TABLE blob_frames ALTER COLUMN frame TYPE TEXT USING encode(frame, 'hex')",
}


def test_frames_made_text_read_as_corrupt_blobs_on_either_engine(backend: "Backend") -> None:
    store = backend.open(namespace="alice", inline_max=1 << 20)
    reference = store.write(key="result.txt", content=CONTENT)
    digest = blake3_hex(CONTENT.encode())
    assert backend.count("blob_frames") == 1, "the frame is kept in the index"
    if backend.kind == "shared":
        with pytest.raises(psycopg.errors.DatatypeMismatch):
            backend.execute("UPDATE blob_frames SET frame = 12")
    backend.execute(FRAMES_MADE_TEXT[backend.kind])
    reopened = backend.open(namespace="alice", inline_max=1 << 20)  # nothing of the blob in memory
    with pytest.raises(CorruptBlobError) as raised:
        reopened.read(reference)
    assert raised.value.digest == digest and not raised.value.missing
    assert digest in [corrupt for corrupt, _ in verify(reopened).corrupt]


@pytest.mark.parametrize("digest", ["NUL", "outside", "short"])
def test_a_file_blobs_digest_damaged_by_hand_is_never_a_path(tmp_path: Path, digest: str) -> None:
    # A blob file's path is made from its digest: a digest changed by hand in the index must not reach outside the
    # blob folder (`..` and an absolute path), nor crash a check (a NUL in a path).
    sentinel = tmp_path / "sentinel.zst"
    sentinel.write_bytes(b"not casstore's to read or delete")
    damaged = {"NUL": "ab\x00cd", "outside": ".." + str(sentinel.with_suffix("")), "short": "ab"}[digest]
    root = tmp_path / "store"
    with ContentAddressedToolResultStore(root, namespace="alice", inline_max=0) as store:
        store.write(key="result.txt", content=CONTENT)
        with _index(root) as connection:
            connection.execute("UPDATE blobs SET digest = ?", (damaged,))
        report = verify(store)
        assert not report.ok and damaged in [digest for digest, _ in report.corrupt], report
        collect_garbage(store, namespace="alice", grace=timedelta(0))
    assert sentinel.read_bytes() == b"not casstore's to read or delete"


@pytest.mark.parametrize("damaged", ["upper", "dotdot", "short"])
def test_a_digest_damaged_by_hand_is_a_corrupt_blob_on_every_backend(backend: "Backend", damaged: str) -> None:
    store = backend.open(namespace="alice", inline_max=0)  # a blob file, or an object
    reference = store.write(key="result.txt", content=CONTENT)
    digest = blake3_hex(CONTENT.encode())
    value = {"upper": digest.upper(), "dotdot": "../" + digest[3:], "short": digest[:2]}[damaged]
    backend.execute("UPDATE blobs SET digest = ?", (value,))
    report = verify(store)
    assert not report.ok and value in [found for found, _ in report.corrupt], report
    with pytest.raises((CorruptBlobError, ReferenceNotFoundError)):  # its write names the blob by id, not digest
        store.read(reference)
    collect_garbage(store, namespace="alice", grace=timedelta(0))  # forgets it, and raises nothing
