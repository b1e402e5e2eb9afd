"""
A local store on read-only media: read by every reading command and by the store and its read tool, written by none.

Two real kinds of read-only: files and folders made immutable (`chattr +i`, which root cannot write through either),
and a read-only bind mount in a mount namespace of its own (`unshare --mount`), where every write fails with EROFS as
on a mounted backup.
"""

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from casstore import ContentAddressedToolResultStore, OffloadRecord, ReadOnlyStoreError
from casstore.cli import cli
from casstore.compactor import make_read_tool
from casstore.maintenance import checks as maintenance
from tests.helpers import tree_fingerprint

SOURCE = Path(__file__).read_text()
TERM = "-".join(("quartz", "ledger"))  # joined here, so that this file (written as SOURCE) does not hold it
LARGE = f"{TERM} line of a large result\n" * 5_000  # compressed past `inline_max` below: a blob file
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256))


def _chattr(flag: str, root: Path) -> None:
    subprocess.run(["chattr", "-R", flag, str(root)], check=True, capture_output=True)


@pytest.fixture
def immutable() -> Iterator[list[Path]]:
    """Folders made immutable by the test, made mutable again afterwards (else no one could delete them)."""
    made: list[Path] = []
    yield made
    for root in made:
        _chattr("-i", root)


def _make_immutable(immutable: list[Path], root: Path) -> None:
    immutable.append(root)
    _chattr("+i", root)


def _build(root: Path) -> dict[str, str | bytes]:
    """A store with an inline blob, a blob file, a binary one, and offloads; closed. :returns: content by reference."""
    written: dict[str, str | bytes] = {}
    with ContentAddressedToolResultStore(root, namespace="alice", inline_max=1024, search_index=True) as store:
        for key, content in (("1_read_file_call_1.txt", SOURCE), ("2_grep_call_2.log", LARGE), ("p.png", PNG)):
            written[store.write(key=key, content=content)] = content
        store.record_offloads(
            compaction_id="c1", offloads=[OffloadRecord("read_file", "call_1", list(written)[:1], 900, 850)]
        )
    return written


def _invoke(*arguments: str) -> Result:
    return CliRunner().invoke(cli, list(arguments), catch_exceptions=False)


class TestAnImmutableStore:
    def test_the_store_and_its_read_tool_read_everything_written(self, tmp_path: Path, immutable: list[Path]) -> None:
        root = tmp_path / "store"
        written = _build(root)
        _make_immutable(immutable, root)
        with ContentAddressedToolResultStore(root, namespace="alice", search_index=True) as store:
            for reference, content in written.items():
                assert store.read(reference) == content
            source = next(reference for reference, content in written.items() if content == SOURCE)
            assert make_read_tool(store).invoke(reference=source) == SOURCE
            hits = store.search(terms=[TERM])
            assert [hit.reference for hit in hits.hits] == [r for r, c in written.items() if c == LARGE]

    def test_every_reading_command_works(self, tmp_path: Path, immutable: list[Path]) -> None:
        root = tmp_path / "store"
        written = _build(root)
        _make_immutable(immutable, root)
        stats = _invoke("stats", "--root", str(root), "--json")
        assert stats.exit_code == 0, stats.output
        assert json.loads(stats.stdout)["writes"] == len(written)
        log = _invoke("log", "--root", str(root), "--json")
        assert log.exit_code == 0, log.output
        assert [(entry["source"], entry["tool_name"], entry["tool_call_id"]) for entry in json.loads(log.stdout)] == [
            ("compactor", "read_file", "call_1"),
            ("hook", "grep", "call_2"),  # the writes under the offload hook's keys
            ("hook", "read_file", "call_1"),
        ]
        large = next(reference for reference, content in written.items() if content == LARGE)
        cat = _invoke("cat", large, "--root", str(root))
        assert (cat.exit_code, cat.stdout) == (0, LARGE)
        verify = _invoke("verify", "--root", str(root))
        assert verify.exit_code == 0, verify.output
        report = _invoke("report", "--root", str(root), "-o", str(tmp_path / "report.html"))
        assert report.exit_code == 0, report.output
        assert (tmp_path / "report.html").stat().st_size > 0

    def test_writes_gc_and_offloads_say_read_only_and_change_nothing(
        self, tmp_path: Path, immutable: list[Path]
    ) -> None:
        root = tmp_path / "store"
        _build(root)
        _make_immutable(immutable, root)
        before = tree_fingerprint(root)
        with ContentAddressedToolResultStore(root, namespace="alice") as store:
            with pytest.raises(ReadOnlyStoreError, match="read-only"):
                store.write(key="new.txt", content="new content " * 1000)
            with pytest.raises(ReadOnlyStoreError, match="read-only"):
                store.record_offloads(compaction_id="c2", offloads=[])
            for dry_run in (False, True):
                with pytest.raises(ReadOnlyStoreError, match="gc"):
                    maintenance.collect_garbage(store, dry_run=dry_run)
        for command in (["gc"], ["gc", "--dry-run"], ["search-index"]):
            result = _invoke(*command, "--root", str(root))
            assert result.exit_code == 1
            assert "is read-only" in result.stderr
        assert tree_fingerprint(root) == before

    def test_a_read_only_index_file_in_a_writable_folder_is_read_not_written(
        self, tmp_path: Path, immutable: list[Path]
    ) -> None:
        # SQLite opens such a file read-only by itself, and makes its log beside it: the store finds out up front.
        root = tmp_path / "store"
        written = _build(root)
        _make_immutable(immutable, root / "index.db")
        with ContentAddressedToolResultStore(root, namespace="alice") as store:
            assert {reference: store.read(reference) for reference in written} == written
            with pytest.raises(ReadOnlyStoreError, match="cannot be written"):
                store.write(key="new.txt", content="new")

    def test_a_read_only_folder_without_a_store_reads_as_empty_and_refuses_the_first_write(
        self, tmp_path: Path, immutable: list[Path]
    ) -> None:
        root = tmp_path / "store"
        root.mkdir()
        _make_immutable(immutable, root)
        with (
            ContentAddressedToolResultStore(root) as store,
            pytest.raises(ReadOnlyStoreError, match=r"create index\.db"),
        ):
            store.write(key="a.txt", content="a")
        assert list(root.iterdir()) == []

    @settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(contents=st.lists(st.one_of(st.text(max_size=3000), st.binary(max_size=3000)), min_size=1, max_size=5))
    def test_what_was_written_reads_back_exactly(
        self, tmp_path_factory: pytest.TempPathFactory, contents: list[str | bytes]
    ) -> None:
        root = tmp_path_factory.mktemp("store")
        with ContentAddressedToolResultStore(root, inline_max=512) as store:
            written = {store.write(key=f"{i}_tool_call_{i}.txt", content=c): c for i, c in enumerate(contents)}
        _chattr("+i", root)
        try:
            with ContentAddressedToolResultStore(root) as store:
                assert {reference: store.read(reference) for reference in written} == written
        finally:
            _chattr("-i", root)


def _in_read_only_mount(folder: Path, script: str) -> subprocess.CompletedProcess[str]:
    """Run `script` (sh) where `folder` is a read-only bind mount of itself, in a mount namespace of its own."""
    unshare = ["unshare", "--mount"] if os.geteuid() == 0 else ["unshare", "--mount", "--map-root-user"]
    mount = f"mount --bind '{folder}' '{folder}' && mount -o remount,bind,ro '{folder}' && {script}"
    return subprocess.run([*unshare, "sh", "-c", mount], capture_output=True, text=True, timeout=120, check=False)


# Run inside the mount namespace: each command through click's runner, in one process; what each printed, as JSON.
_COMMANDS_SCRIPT = """
import json, sys
from click.testing import CliRunner
from casstore.cli import cli
results = {}
for name, arguments in json.loads(sys.argv[1]).items():
    result = CliRunner().invoke(cli, arguments)
    results[name] = [result.exit_code, result.stdout, result.stderr]
print(json.dumps(results))
"""


class TestAStoreOnAReadOnlyMount:
    def test_reading_commands_work_and_writing_ones_say_read_only(self, tmp_path: Path) -> None:
        media = tmp_path / "media"
        root = media / "store"
        written = _build(root)
        large = next(reference for reference, content in written.items() if content == LARGE)
        before = tree_fingerprint(root)
        at = ["--root", str(root)]
        commands = {
            "stats": ["stats", "--json", *at],
            "log": ["log", "--json", *at],
            "cat": ["cat", large, *at],
            "verify": ["verify", *at],
            "report": ["report", "-o", str(tmp_path / "report.html"), *at],
            "gc": ["gc", *at],
            "dry-run": ["gc", "--dry-run", *at],
        }
        # A write by hand first: the mount must really be read-only.
        run = (
            f"! touch '{root}/probe' 2>/dev/null && '{sys.executable}' -c '{_COMMANDS_SCRIPT}' '{json.dumps(commands)}'"
        )
        done = _in_read_only_mount(media, run)
        assert done.returncode == 0, done.stderr
        results = json.loads(done.stdout)
        stats, log, cat, verify, report = (results[name] for name in ("stats", "log", "cat", "verify", "report"))
        assert stats[0] == 0 and json.loads(stats[1])["writes"] == len(written), stats
        assert log[0] == 0, log
        assert [entry["tool_name"] for entry in json.loads(log[1])] == ["read_file", "grep", "read_file"], log
        assert cat[:2] == [0, LARGE], cat[2]
        assert verify[0] == 0, verify
        assert report[0] == 0 and (tmp_path / "report.html").stat().st_size > 0, report
        for name in ("gc", "dry-run"):
            assert results[name][0] == 1 and "is read-only" in results[name][2], results[name]
        assert tree_fingerprint(root) == before

    def test_a_store_copied_while_open_is_read_with_its_write_ahead_log(self, tmp_path: Path) -> None:
        # A backup taken while a writer had the store open holds `index.db-wal` and `index.db-shm`: the latest
        # writes are in the log, and reading it must see them.
        live, media = tmp_path / "live", tmp_path / "media"
        with ContentAddressedToolResultStore(live) as store:
            reference = store.write(key="1_tool_call_1.txt", content="in the log only")
            shutil.copytree(live, media / "store")
        assert (media / "store" / "index.db-wal").stat().st_size > 0
        read = (
            f"from casstore import ContentAddressedToolResultStore as S; print(S('{media}/store').read('{reference}'))"
        )
        done = _in_read_only_mount(media, f"'{sys.executable}' -c \"{read}\"")
        assert (done.returncode, done.stdout) == (0, "in the log only\n"), done.stderr
