"""
The command page's examples (docs/cli.md) run as written, in the order the page gives them, in a shell.

They run in an empty folder with a home of their own holding `~/src/myproject` (a copy of casstore's sources), and
the one path the page writes outside the folder, `/tmp/demo-store`, is moved inside it; nothing else is changed.
"""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import casstore

PAGE = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def _examples() -> dict[str, str]:
    """Each shell block of the page, by the subcommand it shows: the last one it runs (`cat`'s first asks `log`)."""
    blocks = re.findall(r"```sh\n(.*?)```", PAGE.read_text(encoding="utf-8"), flags=re.DOTALL)
    examples = {}
    for block in blocks:
        subcommand = re.findall(r"\bcasstore (\w+)", block)[-1]
        assert subcommand not in examples, f"two examples of casstore {subcommand}"
        examples[subcommand] = block
    return examples


@pytest.mark.slow
def test_every_example_on_the_command_page_runs_as_written(tmp_path: Path) -> None:
    examples = _examples()
    assert set(examples) == {"demo", "report", "datasette", "stats", "log", "cat", "verify", "gc"}
    home = tmp_path / "home"
    shutil.copytree(Path(casstore.__file__).parent, home / "src" / "myproject", ignore=shutil.ignore_patterns("*.pyc"))
    folder = tmp_path / "work"
    folder.mkdir()
    env = {
        **{key: value for key, value in os.environ.items() if not key.startswith("CASSTORE_")},
        "HOME": str(home),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",  # casstore, python3
    }

    def run(subcommand: str) -> str:
        script = examples[subcommand].replace("/tmp/demo-store", str(tmp_path / "demo-store"))
        completed = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script],
            cwd=folder,
            env=env,
            capture_output=True,
            text=True,
            timeout=240,
            check=False,
        )
        assert completed.returncode == 0, f"{script}\n{completed.stdout}\n{completed.stderr}"
        return completed.stdout

    demo = run("demo")
    assert demo.count("casstore demo:") == 2, demo
    assert (folder / ".casstore" / "index.db").is_file() and (tmp_path / "demo-store" / "index.db").is_file()
    assert "myproject" in demo

    report = run("report").splitlines()
    assert report == [line for line in report if line.startswith("wrote ")] and len(report) == 2, report
    assert (folder / "casstore-report.html").is_file() and (folder / "last-week.html").is_file()

    run("datasette")
    assert json.loads((folder / "metadata.json").read_text())["databases"]["index"]["queries"]

    stats = run("stats").splitlines()
    # The last line is the ratio the --json example printed.
    assert stats[0] == "store .casstore: the whole store" and float(stats[-1]) > 1, stats

    log = run("log").splitlines()
    latest, by_tool = log[:5], log[5:]
    assert len(latest) == 5 and by_tool and all("  read_file  " in line for line in by_tool), log

    window = run("cat").splitlines()
    assert 0 < len(window) <= 10, window

    assert run("verify").splitlines()[-1] == "every blob verified"

    gc = run("gc")
    assert gc.startswith("dry run: ") and "\ngc " in gc, gc


def _exit_statuses() -> list[tuple[int, str]]:
    """(status, command) for every example in the page's table of exit statuses."""
    page = PAGE.read_text(encoding="utf-8")
    table = page.split("| status | when | for example |", 1)[1].split("\n\n", 1)[0]
    examples = []
    for line in table.splitlines()[2:]:
        status, _when, commands = (cell.strip() for cell in line.strip("|").split("|"))
        examples += [(int(status), command) for command in re.findall(r"`(casstore [^`]*)`", commands)]
    return examples


def test_the_table_of_exit_statuses_has_an_example_for_each_failing_status() -> None:
    assert {status for status, _command in _exit_statuses()} == {0, 1, 2}  # 3 needs orphans: tests/cli/test_cli.py


@pytest.mark.parametrize(("status", "command"), _exit_statuses(), ids=str)
def test_each_example_exits_with_its_documented_status(tmp_path: Path, status: int, command: str) -> None:
    with casstore.ContentAddressedToolResultStore(tmp_path / ".casstore", namespace="alice") as store:
        store.write(key="a.txt", content="a result")
    env = {key: value for key, value in os.environ.items() if not key.startswith("CASSTORE_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    completed = subprocess.run(
        ["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert completed.returncode == status, completed.stderr
    if status:
        assert completed.stderr.startswith("casstore: error: ") and completed.stderr.count("\n") == 1, completed.stderr
