"""
gc with no grace period (`--grace 0s`, `collect_garbage(grace=timedelta(0))`) on both backends: one run forgets what it
is asked to and deletes every blob nothing references any more, however recently written, and a writer that comes
after stores its content again.
"""

import json
import os
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from casstore import ContentAddressedToolResultStore
from casstore.cli import cli
from casstore.history.stats import stats
from casstore.maintenance.checks import collect_garbage, verify
from casstore.stores.local import RepositoryToolResultStore
from tests.store_backends import Backend, readable

NO_GRACE = timedelta(0)


def _write(store: RepositoryToolResultStore, count: int, *, seed: int = 0) -> tuple[list[str], list[bytes]]:
    """`count` incompressible results of different sizes, written one after the other just now."""
    contents = [os.urandom(2000 + 900 * ((seed + number) % 7)) for number in range(count)]
    return [store.write(key=f"r{number}.bin", content=content) for number, content in enumerate(contents)], contents


def test_a_namespace_forgotten_with_no_grace_period_goes_at_once_however_recently_written(backend: Backend) -> None:
    big = backend.open(namespace="big", inline_max=4096)  # blobs in the index, and larger ones outside it
    kept = backend.open(namespace="kept", inline_max=4096)
    references, _ = _write(big, 30)
    kept_references, _ = _write(kept, 3, seed=3)
    outside = set(backend.blob_names())
    report = collect_garbage(big, namespace="big", grace=NO_GRACE)
    assert (report.writes_forgotten, report.blobs_deleted, report.blobs_waiting) == (30, 30, 0)
    assert report.collectable_from is None and report.waiting_bytes == 0
    assert backend.count("blobs") == 3
    assert readable(big, references) == [False] * 30
    assert readable(kept, kept_references) == [True] * 3
    # The files or objects of the deleted blobs went in that same run: only the kept namespace's are left.
    kept_names = {backend.blob_name(digest) for (digest,) in backend.rows("SELECT digest FROM blobs")}
    assert set(backend.blob_names()) == kept_names & outside
    assert report.blob_bytes_after < report.blob_bytes_before
    assert verify(kept).ok


def test_a_write_right_after_a_no_grace_gc_took_its_blob_stores_it_again(backend: Backend) -> None:
    # The same store object writes the content again at once: whatever it remembers of the blob, its own write
    # transaction finds the blob row gone and stores it again.
    store = backend.open(namespace="agent", inline_max=4096)
    references, contents = _write(store, 4)
    assert collect_garbage(store, namespace="agent", grace=NO_GRACE).blobs_deleted == 4
    assert backend.count("blobs") == 0 and backend.blob_names() == []
    again = [store.write(key=f"again{number}.bin", content=content) for number, content in enumerate(contents)]
    assert again == references
    assert [store.read(reference) for reference in again] == contents
    assert backend.count("blobs") == 4
    assert verify(store).ok


def test_a_single_part_write_whose_blob_row_went_behind_its_back_stores_it_again(backend: Backend) -> None:
    # A reference still visible whose blob row is gone (a hand edit: gc never deletes a referenced blob) is not
    # trusted either: the next write of that content, by the process that wrote it a moment ago, notices.
    store = backend.open(namespace="agent")
    content = b"a tool result\n" * 200
    reference = store.write(key="a.bin", content=content)
    backend.execute("DELETE FROM blobs")
    assert store.write(key="b.bin", content=content) == reference
    assert store.read(reference) == content
    # The first write named the lost row by id: it stays damaged, reported by its key.
    assert verify(store).dangling_writes == [("agent", "a.bin")]


def test_max_size_with_no_grace_period_leaves_at_most_that_much_stored(backend: Backend) -> None:
    store = backend.open(namespace="agent", inline_max=4096)
    references, _ = _write(store, 12)
    needed = store.repository.retention.needed_bytes()
    max_size = needed // 3
    report = collect_garbage(store, max_size=max_size, grace=NO_GRACE)
    assert report.over_max_size == 0 and report.blobs_waiting == 0
    assert report.needed_bytes_after is not None and report.needed_bytes_after <= max_size
    assert stats(store).stored_bytes == report.needed_bytes_after
    kept = len(references) - report.writes_forgotten
    assert kept > 0
    assert readable(store, references) == [False] * report.writes_forgotten + [True] * kept  # the newest stay


@given(
    sizes=st.lists(st.integers(min_value=1, max_value=40), min_size=1, max_size=10),
    fraction=st.floats(min_value=0, max_value=1.1),
)
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_max_size_with_no_grace_period_fits_whatever_was_written(
    tmp_path_factory: pytest.TempPathFactory, sizes: list[int], fraction: float
) -> None:
    # Contents of any sizes (some repeated), written just now: one run leaves `stats`' stored bytes at most SIZE.
    root = tmp_path_factory.mktemp("no-grace")
    with ContentAddressedToolResultStore(root, namespace="agent", inline_max=8192) as store:
        for number, size in enumerate(sizes):
            store.write(key=f"{number}.bin", content=bytes([size]) * 17 + os.urandom(size * 300))
            if size % 3 == 0:
                store.write(key=f"{number}.again.bin", content=bytes([size]) * 17 + os.urandom(size * 300))
        max_size = int(store.repository.retention.needed_bytes() * fraction)
        report = collect_garbage(store, max_size=max_size, grace=NO_GRACE)
        stored = stats(store).stored_bytes
    assert stored <= max_size and report.over_max_size == 0 and report.blobs_waiting == 0


def test_gc_with_no_grace_on_the_command_line_deletes_what_was_just_written(tmp_path: Path) -> None:
    root = tmp_path / "store"
    with ContentAddressedToolResultStore(root, namespace="big") as store:
        _write(store, 100)
    result = CliRunner().invoke(cli, ["gc", "--root", str(root), "--namespace", "big", "--grace", "0s"])
    assert result.exit_code == 0, result.output
    assert "gc did forget 100 writes" in result.output
    assert "blobs deleted       100 (" in result.output
    assert "waiting" not in result.output
    figures = json.loads(CliRunner().invoke(cli, ["stats", "--root", str(root), "--json"]).output)
    assert (figures["blobs"], figures["stored_bytes"]) == (0, 0)
