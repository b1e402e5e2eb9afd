"""
The demo on a store it cannot write: refused in one line before anything is created; and when writes fail during the
run (a full disk), the summary says so and why, prints no commands that cannot work, and the demo exits 1.
"""

import json
import os
import resource
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from casstore.cli import cli
from casstore.demo.session import DemoArgumentError, run_demo
from tests.helpers import create_store, tree_fingerprint

Protect = Callable[[Path], None]


@pytest.fixture
def make_read_only() -> Iterator[Protect]:
    """
    Makes a file or folder (and what it holds) read-only for this process, and writable again afterwards: immutable
    (`chattr +i`) for root, whom permissions do not stop; without write permission for anyone else.
    """
    made: list[Path] = []

    def protect(path: Path) -> None:
        made.append(path)
        if os.geteuid() == 0:
            subprocess.run(["chattr", "-R", "+i", str(path)], check=True, capture_output=True)
        else:
            for item in [path, *path.rglob("*")] if path.is_dir() else [path]:
                item.chmod(item.stat().st_mode & ~0o222)

    yield protect
    for path in reversed(made):
        if os.geteuid() == 0:
            subprocess.run(["chattr", "-R", "-i", str(path)], check=True, capture_output=True)
        else:
            for item in [path, *path.rglob("*")] if path.is_dir() else [path]:
                item.chmod(item.stat().st_mode | 0o200)


def _existing_store(root: Path) -> Path:
    create_store(root)
    return root


def _read_only_store(root: Path, protect: Protect) -> Path:
    protect(_existing_store(root))
    return root


def _store_with_read_only_index(root: Path, protect: Protect) -> Path:
    # Its folder is writable: only opening the index finds that it cannot be written.
    protect(_existing_store(root) / "index.db")
    return root


def _in_read_only_folder(root: Path, protect: Protect) -> Path:
    root.parent.mkdir()
    protect(root.parent)
    return root


def _under_a_file(root: Path, protect: Protect) -> Path:
    root.parent.write_text("a file, not a folder\n")
    return root


def _dangling_link(root: Path, protect: Protect) -> Path:
    root.parent.mkdir()
    root.symlink_to(root.parent / "gone")
    return root


def _under_a_dangling_link(root: Path, protect: Protect) -> Path:
    root.parent.symlink_to(root.parent.parent / "gone")  # `place` itself is the link
    return root


def _in_a_loop_of_links(root: Path, protect: Protect) -> Path:
    root.parent.mkdir()
    (root.parent / "other").symlink_to(root)
    root.symlink_to(root.parent / "other")
    return root / "store"


@pytest.mark.parametrize(
    "make_root, complaint",
    [
        (_read_only_store, "read-only"),
        (_store_with_read_only_index, "read-only"),
        (_in_read_only_folder, "read-only"),
        (_under_a_file, "is a file"),
        (_dangling_link, "does not exist"),
        (_under_a_dangling_link, "does not exist"),
        (_in_a_loop_of_links, "symbolic links"),
    ],
    ids=lambda value: value.__name__[1:] if callable(value) else value.replace(" ", "-"),
)
def test_a_store_the_demo_cannot_write_is_refused_in_one_line_before_anything_is_created(
    tmp_path: Path, make_read_only: Protect, make_root: Callable[[Path, Protect], Path], complaint: str
) -> None:
    root = make_root(tmp_path / "place" / "store", make_read_only)
    before = tree_fingerprint(tmp_path)
    with pytest.raises(DemoArgumentError, match=complaint):
        run_demo(root=root, steps=30)
    result = CliRunner().invoke(
        cli, ["demo", "--steps", "30", "--root", str(root), "--report", str(tmp_path / "report.html")]
    )
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and complaint in result.stderr, result.stderr
    assert "--root" in result.stderr  # it says what to do
    assert tree_fingerprint(tmp_path) == before  # no report, no index, no blob file


def _limit_file_size(limit: int) -> Callable[[], None]:
    def limited() -> None:
        # Any file growing past `limit` fails its write (EFBIG): the store's index then fails as on a full disk.
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))

    return limited


def _demo_short_of_space(tmp_path: Path, *options: str) -> subprocess.CompletedProcess[str]:
    """Run the demo with room for an empty store and a little more, not for the run: its writes fail partway."""
    create_store(tmp_path / "empty")
    limit = 2 * tree_size(tmp_path / "empty")
    return subprocess.run(
        [sys.executable, "-m", "casstore", "demo", "--steps", "40", "--root", str(tmp_path / "store"), *options],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
        preexec_fn=_limit_file_size(limit),
    )


def test_writes_failing_during_the_run_are_reported_with_their_error_and_exit_1(tmp_path: Path) -> None:
    completed = _demo_short_of_space(tmp_path, "--json")
    assert completed.returncode == 1, completed.stderr
    error = completed.stderr.splitlines()[-1]
    assert error.startswith("casstore: error: the store failed ") and "first error: StorageError" in error
    summary = json.loads(completed.stdout)
    assert summary["failed_write_attempts"] > 0 and summary["first_failure"].startswith("StorageError")
    assert summary["first_failure"].rstrip(".") in error
    assert summary["report"] is None and not (tmp_path / "casstore-report.html").exists()


def test_the_summary_of_a_run_whose_writes_failed_blames_them_and_offers_no_commands(tmp_path: Path) -> None:
    completed = _demo_short_of_space(tmp_path)
    assert completed.returncode == 1, completed.stderr
    assert "Offloading failed: the store at" in completed.stdout
    assert "The first error: StorageError" in completed.stdout
    assert "newest step alone outgrew the window" not in completed.stdout  # the window is not what failed
    assert "stats --root" not in completed.stdout and "log --root" not in completed.stdout
    assert "sqlite3" not in completed.stdout and "The run's report" not in completed.stdout


def tree_size(root: Path) -> int:
    return sum(path.stat().st_size for path in root.rglob("*") if path.is_file())
