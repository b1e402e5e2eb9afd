"""
gc gives disk back: `index.db` shrinks to what an empty store takes once what it held is collected, an index made
before casstore set `auto_vacuum` keeps its pages until one `gc --vacuum` converts it, and a dry run estimates it all.
"""

import json
import os
import sqlite3
from contextlib import closing
from datetime import timedelta
from pathlib import Path

from click.testing import CliRunner, Result

from casstore import ContentAddressedToolResultStore, SharedToolResultStore
from casstore.disk import local_footprint
from casstore.maintenance.checks import collect_garbage
from tests.servers import S3Location
from tests.shared_helpers import AGED, query

RESULTS = 300  # a few hundred KiB of small results, every one kept inside index.db, several times an empty index


def _invoke(*arguments: str) -> Result:
    from casstore.cli import cli

    return CliRunner().invoke(cli, list(arguments), catch_exceptions=False)


def _gc_json(root: Path, *arguments: str) -> dict[str, object]:
    result = _invoke("gc", "--root", str(root), "--json", *arguments)
    assert result.exit_code == 0, result.output
    report: dict[str, object] = json.loads(result.output)
    return report


def _fill(root: Path, *, namespace: str, count: int = RESULTS, seed: str = "") -> list[str]:
    # Plain frames (learn=False): these tests count pages and blobs; what gc does with what learning adds (a trained
    # dictionary, deltas' bases) is tests/repository/test_learned_encodings.py's.
    with ContentAddressedToolResultStore(root, namespace=namespace, learn=False) as store:
        # Hex of random bytes: text that compresses only to about half, so the index really grows.
        return [store.write(key=f"{n}.txt", content=seed + os.urandom(1500).hex()) for n in range(count)]


def _age_blobs(root: Path) -> None:
    """As if every blob was last seen long ago: gc adds `last_seen`'s one-second resolution even to `--grace 0s`."""
    with closing(sqlite3.connect(root / "index.db")) as connection, connection:
        connection.execute("UPDATE blobs SET last_seen = '2020-01-01 00:00:00.000'")


def _index_file_bytes(root: Path) -> int:
    return (root / "index.db").stat().st_size


def _pragma(root: Path, name: str) -> int:
    with closing(sqlite3.connect(root / "index.db")) as connection:
        return int(connection.execute(f"PRAGMA {name}").fetchone()[0])


def _empty_store(tmp_path: Path) -> Path:
    """A store that holds one tiny result: what a store with nothing in it takes on disk."""
    root = tmp_path / "empty"
    with ContentAddressedToolResultStore(root, learn=False) as store:
        store.write(key="k", content="x")
    return root


def _make_pre_auto_vacuum(root: Path) -> None:
    """Turn an index into one as casstore made them before it set `auto_vacuum` (SQLite's default, NONE)."""
    with closing(sqlite3.connect(root / "index.db", isolation_level=None)) as connection:
        connection.execute("PRAGMA auto_vacuum = NONE")
        connection.execute("VACUUM")
    assert _pragma(root, "auto_vacuum") == 0


def test_a_new_index_can_give_freed_pages_back(store_root: Path) -> None:
    with ContentAddressedToolResultStore(store_root) as store:
        store.write(key="k", content="x")
    assert _pragma(store_root, "auto_vacuum") == 2  # INCREMENTAL, set before the first table


def test_forgetting_the_only_namespace_shrinks_the_index_to_an_empty_stores_size(tmp_path: Path) -> None:
    # The scenario: `gc --namespace big --grace 0s` on a store whose only namespace is `big`.
    root = tmp_path / "store"
    _fill(root, namespace="big")
    empty = _index_file_bytes(_empty_store(tmp_path))
    before = _index_file_bytes(root)
    assert before > 3 * empty  # the results really live inside index.db
    _age_blobs(root)
    report = _gc_json(root, "--namespace", "big", "--grace", "0s")
    # Content was deleted: the index is rebuilt, so no byte of it stays inside (docs/gc.md, deleted means deleted).
    assert (report["writes_forgotten"], report["blobs_deleted"], report["index_space"]) == (
        RESULTS,
        RESULTS,
        "rebuilt",
    )
    page = _pragma(root, "page_size")
    assert _index_file_bytes(root) <= empty + page  # the file itself, not only SQLite's count of pages
    assert not (root / "index.db-wal").exists() or (root / "index.db-wal").stat().st_size == 0
    # The report says so too (its figures count the open index's log and shared memory as well).
    assert int(report["index_bytes_before"]) >= before  # type: ignore[call-overload]
    assert int(report["index_bytes_before"]) > 3 * int(report["index_bytes_after"])  # type: ignore[call-overload]
    text = _invoke("gc", "--root", str(root), "--grace", "0s").output
    assert "goes back to the file system" in text and "on disk" in text


def test_the_report_says_what_is_on_disk_after_the_space_is_returned(tmp_path: Path) -> None:
    root = tmp_path / "store"
    _fill(root, namespace="big")
    _age_blobs(root)
    with ContentAddressedToolResultStore(root) as store:
        before = local_footprint(root)
        report = collect_garbage(store, namespace="big", grace=timedelta(0))
        # Measured while the store is open: index.db, its (emptied) log and its shared memory; the blob folder.
        assert (report.index_bytes_before, report.blob_bytes_before) == before
        assert (report.index_bytes_after, report.blob_bytes_after) == local_footprint(root)
        assert report.disk_bytes_after == sum(local_footprint(root)) < report.disk_bytes_before // 3


def test_a_dry_run_estimates_the_sizes_after(tmp_path: Path) -> None:
    root = tmp_path / "store"
    _fill(root, namespace="big")
    with ContentAddressedToolResultStore(root, namespace="files", inline_max=0) as files:
        for n in range(5):
            files.write(key=f"{n}.bin", content=os.urandom(20_000))
    _age_blobs(root)
    dry = _gc_json(root, "--grace", "0s", "--namespace", "big", "--dry-run")
    real = _gc_json(root, "--grace", "0s", "--namespace", "big")
    assert (dry["writes_forgotten"], dry["blobs_deleted"]) == (real["writes_forgotten"], real["blobs_deleted"])
    assert dry["index_bytes_before"] == real["index_bytes_before"]
    page = _pragma(root, "page_size")
    assert abs(int(dry["index_bytes_after"]) - int(real["index_bytes_after"])) <= 2 * page  # type: ignore[call-overload]
    assert dry["blob_bytes_after"] == dry["blob_bytes_before"] == real["blob_bytes_after"]  # no file was deleted
    # The files' namespace: the estimate counts the frames' bytes, the disk whole blocks of them.
    dry = _gc_json(root, "--grace", "0s", "--namespace", "files", "--dry-run")
    real = _gc_json(root, "--grace", "0s", "--namespace", "files")
    assert real["blob_bytes_after"] == 0 and real["blob_bytes_before"] > 100_000  # type: ignore[operator]
    assert 0 <= int(dry["blob_bytes_after"]) <= 5 * 4096  # type: ignore[call-overload]


def test_an_index_from_before_auto_vacuum_keeps_its_pages_until_a_rebuild(tmp_path: Path) -> None:
    root = tmp_path / "store"
    _fill(root, namespace="old")
    _make_pre_auto_vacuum(root)
    empty = _index_file_bytes(_empty_store(tmp_path))
    before = _index_file_bytes(root)
    # Forgetting writes whose blobs the grace period keeps deletes no content, so no rebuild: the freed pages stay.
    result = _invoke("gc", "--root", str(root), "--namespace", "old")
    assert result.exit_code == 0
    assert "casstore gc --vacuum" in result.output  # says what to do, once
    assert _index_file_bytes(root) >= before  # SQLite kept the pages for later writes
    assert _pragma(root, "freelist_count") > 0
    dry = _gc_json(root, "--vacuum", "--dry-run", "--grace", "0s")
    assert dry["index_space"] == "rebuilt" and int(dry["index_bytes_after"]) <= empty + 40_000  # type: ignore[call-overload]
    assert _pragma(root, "auto_vacuum") == 0  # the dry run converted nothing
    report = _gc_json(root, "--grace", "0s")  # deletes the blobs, so rebuilds (and converts) without --vacuum
    assert (report["blobs_deleted"], report["index_space"]) == (RESULTS, "rebuilt")
    assert _pragma(root, "auto_vacuum") == 2
    assert _index_file_bytes(root) <= empty + _pragma(root, "page_size")
    # Converted once, it gives space back on every later gc, without --vacuum.
    _fill(root, namespace="new")
    assert _index_file_bytes(root) > 4 * empty
    again = _gc_json(root, "--namespace", "new")  # forgets the writes; the grace period keeps their blobs
    assert again["index_space"] == "returned"
    again = _gc_json(root, "--grace", "0s")
    assert again["index_space"] == "rebuilt"
    assert _index_file_bytes(root) <= empty + _pragma(root, "page_size")


def test_a_reader_holding_old_pages_delays_the_shrink_and_loses_nothing(tmp_path: Path) -> None:
    root = tmp_path / "store"
    _fill(root, namespace="gone")
    kept = _fill(root, namespace="kept", count=3, seed="kept ")
    empty = _index_file_bytes(_empty_store(tmp_path))
    _age_blobs(root)
    with closing(sqlite3.connect(root / "index.db", isolation_level=None)) as reader:
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM writes").fetchone()  # a read transaction on the pages before gc
        result = _invoke("gc", "--root", str(root), "--json", "--namespace", "gone", "--grace", "0s")
        # gc did its part, and says that the reader keeps the older pages, deleted content included (status 1).
        assert result.exit_code == 1 and "still reading an older state" in result.stderr
        report = json.loads(result.stdout)
        assert (report["blobs_deleted"], report["old_pages_held"]) == (RESULTS, True)
        # The report says what is on disk, which the reader still holds: the log cannot be emptied under it.
        assert (report["index_bytes_after"], report["blob_bytes_after"]) == local_footprint(root)
        assert reader.execute("SELECT count(*) FROM writes").fetchone()[0] == RESULTS + 3  # its snapshot is intact
        reader.execute("COMMIT")
    with ContentAddressedToolResultStore(root, namespace="kept") as store:
        assert all(str(store.read(reference)).startswith("kept ") for reference in kept)
    _gc_json(root, "--grace", "0s")  # nothing left to delete: the next gc finishes the shrink
    assert _index_file_bytes(root) <= empty + 2 * _pragma(root, "page_size")


# --- The shared store: PostgreSQL keeps its tables' size; gc says so -------------------------------------------------


def test_the_shared_stores_report_says_what_happens_to_the_space(postgres_url: str, s3_bucket_url: S3Location) -> None:
    with SharedToolResultStore(index_url=postgres_url, blob_url=s3_bucket_url.url, namespace="big") as store:
        for number in range(60):
            store.write(key=f"{number}.txt", content=f"{number} " + os.urandom(1500).hex())
        query(postgres_url, "UPDATE blobs SET last_seen = %s", (AGED,))
        report = collect_garbage(store, namespace="big", grace=timedelta(0))
        assert (report.blobs_deleted, report.index_space) == (60, "reused-after-autovacuum")
        # Measured right after, as PostgreSQL counts them: the deleted rows' space is still the tables'.
        assert report.index_bytes_after == store.repository.history.footprint()[0]
        text = _invoke("gc", "--index", postgres_url, "--blobs", s3_bucket_url.url, "--grace", "0s")
        assert "autovacuum makes the deleted rows' space reusable; it is not given back" in text.output
        dry = collect_garbage(store, grace=timedelta(0), vacuum=True, dry_run=True)
        assert (dry.index_space, dry.index_bytes_after) == ("vacuumed", dry.index_bytes_before)  # no estimate: kept
        vacuumed = collect_garbage(store, grace=timedelta(0), vacuum=True)
        assert vacuumed.index_space == "vacuumed"
        # VACUUM gives the empty pages at the tables' ends back: the frames' pages, all deleted, go.
        assert vacuumed.index_bytes_after < report.index_bytes_after
        store.write(key="after.txt", content="still writable")


def test_a_dry_run_estimates_the_index_after_with_the_search_index_too(tmp_path: Path) -> None:
    root = tmp_path / "store"
    for namespace in ("a", "b"):
        with ContentAddressedToolResultStore(root, namespace=namespace, learn=False, search_index=True) as store:
            for n in range(100):
                store.write(key=f"{n}_tool_x.txt", content=f"{namespace} line {n} " + os.urandom(300).hex())
    _age_blobs(root)
    dry = _gc_json(root, "--grace", "0s", "--namespace", "a", "--dry-run")
    real = _gc_json(root, "--grace", "0s", "--namespace", "a")
    assert (dry["writes_forgotten"], dry["blobs_deleted"]) == (real["writes_forgotten"], real["blobs_deleted"])
    # The search index's text of the deleted results leaves it in the dry run too (it counted them as staying:
    # 487,424 bytes against 344,064). What is left above: the rebuild packs pages tighter than they lie.
    estimate, after = int(dry["index_bytes_after"]), int(real["index_bytes_after"])  # type: ignore[call-overload]
    assert after <= estimate <= after * 1.3
