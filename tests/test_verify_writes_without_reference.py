"""
`verify` reports a `write_log` row whose reference row is gone (a hand edit, a damaged index): the view `writes` joins
such a row away, so before this check nothing showed that a write's reference had become unreadable.
"""

import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest
from click.testing import CliRunner

from casstore import ContentAddressedToolResultStore, ReferenceNotFoundError
from casstore.cli import cli
from casstore.maintenance import verify
from tests.store_backends import Backend, make_backend


@pytest.fixture(params=["local", "shared"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    made = make_backend(request.param, request, tmp_path)
    yield made
    made.close()


def _write_ids(backend: Backend, key: str) -> list[int]:
    return [row[0] for row in backend.rows("SELECT id FROM write_log WHERE key = ? ORDER BY id", (key,))]


def test_a_healthy_store_has_no_write_without_its_reference(backend: Backend) -> None:
    store = backend.open(namespace="alice")
    store.write(key="a.txt", content="one result\n" * 20)
    store.write(key="b.txt", content="one result\n" * 20)  # a repeat: two writes, one reference
    report = verify(store)
    assert report.writes_without_reference == [] and report.ok


def test_a_write_whose_reference_row_is_gone_is_damage_named_by_its_id_and_key(backend: Backend) -> None:
    store = backend.open(namespace="alice")
    kept = store.write(key="kept.txt", content="still referenced\n" * 20)
    lost = store.write(key="lost.txt", content="its reference row goes\n" * 20)
    store.write(key="lost-again.txt", content="its reference row goes\n" * 20)
    (reference_id,) = {
        row[0] for row in backend.rows("SELECT reference_id FROM write_log WHERE key IN ('lost.txt', 'lost-again.txt')")
    }
    backend.execute("DELETE FROM namespace_references WHERE id = ?", (reference_id,))  # damage, by hand

    report = verify(store)
    expected = [(write_id, "lost.txt") for write_id in _write_ids(backend, "lost.txt")]
    expected += [(write_id, "lost-again.txt") for write_id in _write_ids(backend, "lost-again.txt")]
    assert sorted(report.writes_without_reference) == sorted(expected) and len(expected) == 2
    assert not report.ok
    # What the report says is so: the write is gone from `writes` and its reference cannot be read; the rest is.
    assert backend.rows("SELECT key FROM writes ORDER BY id") == [("kept.txt",)]
    with pytest.raises(ReferenceNotFoundError):
        backend.open(namespace="alice").read(lost)
    assert backend.open(namespace="alice").read(kept) == "still referenced\n" * 20


def test_the_writes_of_a_namespace_whose_row_is_gone_are_reported(backend: Backend) -> None:
    backend.open(namespace="alice").write(key="a.txt", content="alice's\n" * 20)
    bob = backend.open(namespace="bob")
    bob.write(key="b1.txt", content="bob's first\n" * 20)
    bob.write(key="b2.txt", content="bob's second\n" * 20)
    backend.execute("DELETE FROM namespaces WHERE namespace = 'bob'")  # damage, by hand
    report = verify(bob)
    assert [key for _, key in report.writes_without_reference] == ["b1.txt", "b2.txt"] and not report.ok


def test_the_command_prints_each_write_without_its_reference_and_fails(tmp_path: Path) -> None:
    root = tmp_path / "store"
    with ContentAddressedToolResultStore(root, namespace="alice") as store:
        store.write(key="lost.txt", content="its reference row goes\n" * 20)
    with closing(sqlite3.connect(root / "index.db")) as connection, connection:
        connection.execute("DELETE FROM namespace_references")
        (write_id,) = connection.execute("SELECT id FROM write_log").fetchone()
    result = CliRunner().invoke(cli, ["verify", "--root", str(root)])
    assert result.exit_code == 1, result.output
    assert f"no reference  write {write_id}, key 'lost.txt': its namespace_references row is gone" in result.output
    assert "damaged" in result.output
