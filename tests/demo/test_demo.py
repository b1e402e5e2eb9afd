"""The demo: a real agent run whose summary figures agree with the index it leaves behind."""

import json
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from casstore import ContentAddressedToolResultStore
from casstore.demo.session import CONTEXT_WINDOW, DemoArgumentError, run_demo
from casstore.history.figures import ratio
from casstore.history.stats import disk_usage
from casstore.maintenance.checks import verify
from tests.helpers import create_store


def test_the_demo_summary_matches_the_index(tmp_path: Path) -> None:
    root = tmp_path / "store"
    summary = run_demo(root=root, steps=40)
    assert summary.store_disk_bytes == disk_usage(root)
    with sqlite3.connect(root / "index.db") as connection:
        offloads, compactions, saved = connection.execute(
            "SELECT count(*), count(DISTINCT compaction_id), sum(saved_tokens) FROM offloads WHERE namespace = ?",
            (summary.namespace,),
        ).fetchone()
        writes, logical = connection.execute(
            "SELECT count(*), sum(size) FROM writes WHERE namespace = ?", (summary.namespace,)
        ).fetchone()
        unique = connection.execute(
            "SELECT sum(size) FROM blobs WHERE digest IN (SELECT digest FROM writes WHERE namespace = ?)",
            (summary.namespace,),
        ).fetchone()[0]
    assert summary.steps == 40
    assert summary.tool_results >= summary.steps  # every call the model made, archived or not
    assert (summary.results_offloaded, summary.compactions, summary.tokens_saved) == (offloads, compactions, saved)
    assert offloads > 10 and compactions >= 3 and saved > 0
    assert (summary.logical_bytes, summary.unique_bytes) == (logical, unique)
    assert summary.dedup_ratio is not None and summary.dedup_ratio > 1.2
    assert summary.compression_ratio is not None and summary.compression_ratio > 1.5
    assert summary.read_backs > 0
    # Offloading shrinks tool results and the step archive the rest: the window holds.
    assert 0 < summary.peak_context_tokens <= CONTEXT_WINDOW
    assert summary.filesystem_store_files == writes
    # Beyond the fixed cost of an empty index (its schema's pages), the run's results take under half of what
    # Haystack's store spends on the same writes.
    create_store(tmp_path / "empty")
    assert summary.filesystem_store_bytes > 2 * (summary.disk_bytes_added - disk_usage(tmp_path / "empty"))
    assert summary.filesystem_store_bytes > summary.disk_bytes_added
    with ContentAddressedToolResultStore(root, namespace=summary.namespace) as store:
        assert verify(store).ok


def test_a_second_run_deduplicates_against_the_first(tmp_path: Path) -> None:
    root = tmp_path / "store"
    first = run_demo(root=root, steps=30)
    second = run_demo(root=root, steps=30)
    assert first.namespace != second.namespace
    assert second.disk_bytes_added < first.disk_bytes_added / 2


@pytest.mark.slow
def test_the_demo_command_prints_a_summary_and_sqlite_commands(tmp_path: Path) -> None:
    root = tmp_path / "store"
    corpus = Path(__file__).resolve().parents[1]
    completed = subprocess.run(
        [sys.executable, "-m", "casstore", "demo", "--steps", "25", "--root", str(root), "--corpus", str(corpus)],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    )
    assert "casstore demo: 25 agent steps" in completed.stdout
    # It ends with the run's report, written where `casstore report` writes it, and says where to open it.
    assert completed.stdout.splitlines()[-1] == (
        "The run's report, charts and tables: casstore-report.html (open it in a browser)"
    )
    report = (tmp_path / "casstore-report.html").read_text(encoding="utf-8")
    assert report.startswith("<!DOCTYPE html>") and 'data-kind="compaction"' in report
    assert "FileSystemToolResultStore would have used" in completed.stdout
    assert completed.stdout.count(f"sqlite3 {root / 'index.db'}") == 3
    assert "step 20/25" in completed.stderr
    as_json = subprocess.run(
        [sys.executable, "-m", "casstore", "demo", "--steps", "30", "--root", str(root), "--json",
         "--report", str(tmp_path / "second.html")],
        capture_output=True, text=True, check=True, cwd=tmp_path,
    )  # fmt: skip
    summary = json.loads(as_json.stdout)
    assert summary["report"] == str(tmp_path / "second.html")
    assert f"namespace <code>{summary['namespace']}</code>" in (tmp_path / "second.html").read_text(encoding="utf-8")
    assert summary["steps"] == 30 and summary["scope"] == "run"
    assert summary["dedup_ratio"] == ratio(summary["logical_bytes"], summary["unique_bytes"])
    assert summary["compression_ratio"] == ratio(summary["unique_bytes"], summary["stored_bytes"])
    assert summary["total_ratio"] == ratio(summary["logical_bytes"], summary["stored_bytes"])

    def stats(*arguments: str) -> dict[str, Any]:
        completed = subprocess.run(
            [sys.executable, "-m", "casstore", "stats", "--root", str(root), "--json", *arguments],
            capture_output=True,
            text=True,
            check=True,
        )
        return dict(json.loads(completed.stdout))

    whole = stats()
    assert whole["scope"] == "store" and len(whole["namespaces"]) == 2
    # The run was its namespace's only one: the namespace's figures are the run's, the same quotients.
    run = stats("--namespace", summary["namespace"])
    assert run["scope"] == "namespace"
    figures = ("logical_bytes", "unique_bytes", "stored_bytes", "dedup_ratio", "compression_ratio", "total_ratio")
    assert {name: run[name] for name in figures} == {name: summary[name] for name in figures}
    assert whole["writes"] > run["writes"]  # two runs in the store: its ratios count both, and say so (scope)


def test_run_demo_refuses_bad_arguments_before_creating_anything(tmp_path: Path) -> None:
    root = tmp_path / "store"
    (tmp_path / "empty").mkdir()
    with pytest.raises(DemoArgumentError, match="holds no text files"):
        run_demo(root=root, steps=5, corpus=tmp_path / "empty")
    with pytest.raises(DemoArgumentError, match="printable characters"):
        run_demo(root=root, steps=5, namespace="line\nbreak")
    assert not root.exists()


@pytest.mark.slow
def test_the_demo_refuses_bad_arguments_in_one_line_and_creates_nothing(tmp_path: Path) -> None:
    empty_corpus = tmp_path / "corpus"
    (empty_corpus / "images").mkdir(parents=True)
    (empty_corpus / "images" / "plot.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    root = tmp_path / "store"
    for arguments, complaint, status in [
        (["--corpus", str(empty_corpus)], "holds no text files", 1),
        (["--namespace", ""], "namespace", 1),
        (["--report", str(tmp_path / "no-folder" / "report.html")], "no folder", 1),  # said before the run
        (["--report", f"{tmp_path / 'reports'}/"], "names a folder", 2),
    ]:
        completed = subprocess.run(
            [sys.executable, "-m", "casstore", "demo", "--steps", "5", "--root", str(root), *arguments],
            capture_output=True,
            text=True,
            check=False,
        )
        assert completed.returncode == status
        assert completed.stderr.count("\n") == 1 and complaint in completed.stderr, completed.stderr
        assert not root.exists()


def test_the_demo_runs_in_the_namespace_it_is_given_and_summarizes_each_run_alone(tmp_path: Path) -> None:
    root = tmp_path / "store"
    first = run_demo(root=root, steps=30, namespace="team-a")
    second = run_demo(root=root, steps=30, namespace="team-a")
    assert first.namespace == second.namespace == "team-a"
    with closing(sqlite3.connect(root / "index.db")) as connection:
        namespaces = {row[0] for row in connection.execute("SELECT namespace FROM writes")}
        writes, offloads = connection.execute(
            "SELECT (SELECT count(*) FROM writes), (SELECT count(*) FROM offloads)"
        ).fetchone()
    assert namespaces == {"team-a"}
    # The agent is scripted and seeded, so both runs did the same; each summary counts its own run only.
    assert first.results_offloaded > 0 and first.logical_bytes > 0
    same = (
        "results_offloaded",
        "compactions",
        "tokens_saved",
        "logical_bytes",
        "unique_bytes",
        "filesystem_store_files",
    )
    assert [getattr(second, name) for name in same] == [getattr(first, name) for name in same]
    assert offloads == first.results_offloaded + second.results_offloaded
    assert writes == first.filesystem_store_files + second.filesystem_store_files
