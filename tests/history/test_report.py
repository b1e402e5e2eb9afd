"""
`casstore report`: its figures against the index, its page's structure and escaping, its time buckets, the command,
and the shared store on real servers. What Chromium makes of the page is tests/history/test_report_in_browser.py.
"""

import contextlib
import math
import os
import re
import shlex
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from casstore import CasStoreError, CompactionRecord, ContentAddressedToolResultStore, SharedToolResultStore
from casstore.cli import cli
from casstore.demo.session import run_demo
from casstore.history import charts
from casstore.history.report import DEFAULT_REPORT_NAME, SERIES_LIMIT, build_report, write_report
from casstore.index.report_scope import bucket_prefix
from casstore.maintenance.checks import verify
from casstore.printable import visible
from tests.helpers import create_store, inline_frame, replace_inline_frame
from tests.report_helpers import (
    HOSTILE,
    HOSTILE_NAMESPACE,
    PAGE_ATTRIBUTES,
    PAGE_TAGS,
    PageStructure,
    plant_hostile_store,
)
from tests.servers import S3Location

pytestmark = pytest.mark.filterwarnings("ignore::haystack.utils.experimental.ExperimentalWarning")


@pytest.fixture(scope="module")
def demo_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store filled by two real agent runs (the demo), in two namespaces."""
    root = tmp_path_factory.mktemp("report") / "store"
    run_demo(root=root, steps=40, namespace="first")
    run_demo(root=root, steps=25, namespace="second")
    return root


def _one(root: Path, sql: str, parameters: tuple[Any, ...] = ()) -> tuple[Any, ...]:
    with contextlib.closing(sqlite3.connect(root / "index.db")) as connection:
        return tuple(connection.execute(sql, parameters).fetchone())


def _marks(page: str, chart: str, kind: str) -> list[str]:
    """The `mark` elements of kind `kind` inside the chart `chart`, as markup."""
    (svg,) = re.findall(rf'<svg [^>]*data-chart="{chart}".*?</svg>', page, flags=re.DOTALL)
    return re.findall(rf'<[^>]+class="mark" data-kind="{kind}"[^>]*>', svg)


def _section(page: str, name: str) -> str:
    (section,) = re.findall(rf'<section id="{name}">.*?</section>', page, flags=re.DOTALL)
    return str(section)


def test_the_figures_are_the_indexs(demo_root: Path) -> None:
    with ContentAddressedToolResultStore(demo_root) as store:
        everything = store.repository.history.report_figures()
        first = store.repository.history.report_figures(namespace="first")
    writes, logical, unique, stored = _one(
        demo_root,
        "SELECT (SELECT count(*) FROM writes), (SELECT sum(size) FROM writes), sum(size), sum(stored_size) FROM blobs",
    )
    last = everything.bytes_over_time[-1]
    assert (last.writes, last.logical_bytes, last.unique_bytes, last.stored_bytes) == (writes, logical, unique, stored)
    assert last.file_system_bytes == _one(demo_root, "SELECT sum((size + 4095) / 4096 * 4096) FROM writes")[0]
    assert everything.compactions == _one(demo_root, "SELECT count(*) FROM compactions")[0]
    assert [mark.compaction_id for mark in everything.timeline] == [
        row[0] for row in _rows(demo_root, "SELECT compaction_id FROM compactions ORDER BY compacted_at, id")
    ]
    tools = _rows(demo_root, "SELECT tool_name, sum(offloads), sum(saved_tokens) FROM offload_summary GROUP BY 1")
    assert sorted((tool.tool_name, tool.offloads, tool.saved_tokens) for tool in everything.tools) == sorted(tools)
    assert [(mark.compaction_id, mark.saved_tokens) for mark in everything.savings] == _rows(
        demo_root,
        "SELECT compaction_id, sum(saved_tokens) FROM offloads GROUP BY compaction_id ORDER BY min(offloaded_at), 1",
    )
    repeated = _rows(
        demo_root,
        "SELECT digest, times_written, bytes_deduplicated FROM repeated_results "
        "ORDER BY bytes_deduplicated DESC, times_written DESC, digest LIMIT 20",
    )
    assert [(row.digest, row.times_written, row.bytes_saved) for row in everything.repeated[:20]] == repeated
    assert [row.size for row in everything.largest] == sorted((row.size for row in everything.largest), reverse=True)
    assert {row.namespace: row.writes for row in everything.namespaces} == dict(
        _rows(demo_root, "SELECT namespace, count(*) FROM writes GROUP BY 1")
    )
    # A namespace's report counts that namespace's history alone; unique bytes count its own first writes.
    assert (
        first.bytes_over_time[-1].writes == _one(demo_root, "SELECT count(*) FROM writes WHERE namespace = 'first'")[0]
    )
    assert (
        first.bytes_over_time[-1].unique_bytes
        == _one(
            demo_root,
            "SELECT sum(size) FROM blobs WHERE digest IN (SELECT digest FROM writes WHERE namespace = 'first')",
        )[0]
    )
    assert {mark.namespace for mark in first.timeline} == {"first"}


def _rows(root: Path, sql: str) -> list[tuple[Any, ...]]:
    with contextlib.closing(sqlite3.connect(root / "index.db")) as connection:
        return [tuple(row) for row in connection.execute(sql)]


def test_the_page_has_a_mark_per_datum_and_tables_with_the_same_numbers(demo_root: Path) -> None:
    with ContentAddressedToolResultStore(demo_root) as store:
        page, figures = build_report(store)
    assert len(_marks(page, "timeline", "compaction")) == figures.compactions == len(figures.timeline)
    saving_marks = _marks(page, "columns", "saving")
    assert len(saving_marks) == len(figures.savings)
    # Each bar's value is the table's: the savings table's last column, row by row (the total row last).
    values = [re.search(r'data-value="(\d+)"', mark)[1] for mark in saving_marks]  # type: ignore[index]
    cells = re.findall(r"<tr>(?:<td[^>]*>[^<]*</td>){5}<td class=\"num\">([\d,]+)</td></tr>", _section(page, "savings"))
    assert [cell.replace(",", "") for cell in cells] == values
    assert len(_marks(page, "lines", "series")) == 4
    assert len(re.findall(r"<tr>", _section(page, "bytes"))) == len(figures.bytes_over_time) + 1
    # One bar per archive the demo's step archive wrote, newest first in the table beside it.
    archives = _section(page, "archives")
    assert len(re.findall(r'data-kind="archive"', archives)) == len(figures.archives) == figures.archives_total > 0
    assert all(row.reference in archives for row in figures.archives)
    assert (
        page.count("<svg ") == 8
        and "<script" not in page
        and "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    )
    assert "Content-Security-Policy" in page and "default-src 'none'" in page


def test_hostile_names_and_previews_are_text_in_the_page(tmp_path: Path) -> None:
    root = tmp_path / "store"
    plant_hostile_store(root)
    with ContentAddressedToolResultStore(root) as store:
        page, figures = build_report(store)
    structure = PageStructure.of(page)
    assert structure.tags <= PAGE_TAGS, structure.tags - PAGE_TAGS
    assert structure.attributes <= PAGE_ATTRIBUTES, structure.attributes - PAGE_ATTRIBUTES
    text = "".join(structure.text)
    for name in [*HOSTILE, HOSTILE_NAMESPACE]:
        assert charts.short(name) in text  # shown, as text (whole in tables and hovers, cut in chart labels)
    assert len(figures.tools) == len(HOSTILE) and len(figures.repeated) == len(HOSTILE)


@settings(max_examples=150, deadline=None)
@given(labels=st.lists(st.text(min_size=1, max_size=60), min_size=1, max_size=5))
def test_any_text_in_any_chart_or_table_stays_text(labels: list[str]) -> None:
    from casstore.history.report_markup import tabulate as _table

    bars = [charts.Bar(label=label, value=index + 1, tooltip=label) for index, label in enumerate(labels)]
    series = [charts.Series(label, [(datetime(2026, 1, 1), 1.0), (datetime(2026, 1, 2), 2.0)]) for label in labels]
    markup = "".join(
        [
            charts.bar_chart(bars, title=labels[0], value_label=labels[-1]),
            charts.column_chart(bars, title=labels[0], value_label=labels[0], category_label=labels[-1]),
            charts.line_chart(series, title=labels[0], value_label=labels[0]),
            _table(labels, [labels], numeric_from=1),
        ]
    )
    structure = PageStructure.of(markup)
    assert structure.tags <= PAGE_TAGS and structure.attributes <= PAGE_ATTRIBUTES
    text = "".join(structure.text)
    for label in labels:
        # Each label comes back whole from the page's text, its control and bidi characters as visible escapes.
        assert visible(label) in text


@settings(max_examples=300, deadline=None)
@given(
    first=st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1)),
    span=st.floats(min_value=0, max_value=3e9),
    fractions=st.lists(st.floats(min_value=0, max_value=1), max_size=200),
    limit=st.integers(min_value=2, max_value=1000),
)
def test_time_buckets_never_outnumber_the_limit(
    first: datetime, span: float, fractions: list[float], limit: int
) -> None:
    last = first + timedelta(seconds=span)

    def stamp(moment: datetime) -> str:
        return moment.strftime("%Y-%m-%d %H:%M:%S.%f")[:23]

    length = bucket_prefix(stamp(first), stamp(last), limit)
    moments = [stamp(first), stamp(last)] + [stamp(first + (last - first) * fraction) for fraction in fractions]
    if math.ceil(span / (365 * 86_400)) + 1 <= limit:
        assert len({moment[:length] for moment in moments}) <= limit
    else:  # more years than the limit: a year is the coarsest bucket there is
        assert length == 4


def _spread_compactions(root: Path, count: int, *, hours: float) -> None:
    create_store(root)  # compactions that offloaded nothing are recorded only in a store that exists
    with ContentAddressedToolResultStore(root, namespace="many") as store:
        for number in range(count):
            store.record_compaction(
                compaction_id=f"c{number}", compaction=CompactionRecord(10_000 + number, 3_000 + number, 4_000, 16_000)
            )
    with contextlib.closing(sqlite3.connect(root / "index.db")) as connection, connection:
        connection.execute(
            "UPDATE compactions SET compacted_at = strftime('%Y-%m-%d %H:%M:%f', '2026-01-01', "
            f"'+' || (id * {hours * 3600 / count}) || ' seconds')"
        )


def test_past_the_limit_the_timeline_shows_time_buckets_that_hold_every_compaction(tmp_path: Path) -> None:
    root = tmp_path / "store"
    count = SERIES_LIMIT + 700
    _spread_compactions(root, count, hours=6)  # 360 minutes: one bucket a minute
    with ContentAddressedToolResultStore(root) as store:
        figures = store.repository.history.report_figures()
        page, _ = build_report(store)
        exact = store.repository.history.report_figures(series_limit=count)
    assert figures.compaction_bucket == "minute" and len(figures.timeline) <= SERIES_LIMIT
    assert sum(mark.count for mark in figures.timeline) == count == figures.compactions
    assert max(mark.max_tokens_before for mark in figures.timeline) == 10_000 + count - 1
    assert len(_marks(page, "timeline", "bucket")) == len(figures.timeline)
    assert not _marks(page, "timeline", "compaction")
    assert len(exact.timeline) == count and exact.compaction_bucket is None  # one mark each within the limit


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.chdir(tmp_path)
    yield tmp_path


def test_the_command_writes_the_default_file_and_says_where(demo_root: Path, in_tmp: Path) -> None:
    result = CliRunner().invoke(cli, ["report", "--root", str(demo_root)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"wrote {DEFAULT_REPORT_NAME} (") and "open it in a browser" in result.stdout
    page = (in_tmp / DEFAULT_REPORT_NAME).read_text(encoding="utf-8")
    assert "all namespaces" in page and "all history" in page
    result = CliRunner().invoke(
        cli, ["report", "--root", str(demo_root), "--namespace", "second", "--since", "7d", "-o", "second.html"]
    )
    assert result.exit_code == 0, result.output
    second = (in_tmp / "second.html").read_text(encoding="utf-8")
    assert "namespace <code>second</code>" in second and "the last 7d" in second
    assert "<code>first</code>" not in _section(second, "namespaces")
    assert "<code>second</code>" in _section(second, "namespaces")


@pytest.mark.parametrize(
    ("arguments", "status", "complaint"),
    [
        (["--since", "a week"], 2, "is not a duration"),  # a usage error, as a bad size is
        (["-o", "missing-folder/report.html"], 1, "no folder missing-folder"),
        (["-o", "."], 2, "is a directory"),  # a usage error, caught by click
        (["-o", "reports/"], 2, "names a folder"),  # not a file named `reports`
    ],
)
def test_bad_arguments_are_one_line_and_write_nothing(
    demo_root: Path, in_tmp: Path, arguments: list[str], status: int, complaint: str
) -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "casstore", "report", "--root", str(demo_root), *arguments],
        capture_output=True,
        text=True,
        check=False,
    )
    assert completed.returncode == status
    assert completed.stderr.count("\n") == 1 and complaint in completed.stderr, completed.stderr
    assert sorted(path.name for path in in_tmp.iterdir()) == []


def test_a_report_that_cannot_be_written_is_a_clear_error_and_leaves_nothing(demo_root: Path, tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("not a folder")
    with ContentAddressedToolResultStore(demo_root) as store, pytest.raises(CasStoreError, match="Choose another"):
        write_report(store, path=tmp_path / "a-file" / "report.html")
    assert [path.name for path in tmp_path.iterdir()] == ["a-file"]


def test_a_report_replaces_the_old_file_whole(demo_root: Path, tmp_path: Path) -> None:
    target = tmp_path / "report.html"
    target.write_text("an older report")
    with ContentAddressedToolResultStore(demo_root) as store:
        written = write_report(store, path=target, namespace="second")
    assert target.read_bytes().decode("utf-8").startswith("<!DOCTYPE html>")
    assert written.size == target.stat().st_size
    assert [path.name for path in tmp_path.iterdir()] == ["report.html"]  # no temporary file left


def test_a_report_through_a_link_replaces_the_file_it_names_and_keeps_the_link(demo_root: Path, tmp_path: Path) -> None:
    (tmp_path / "reports").mkdir()
    target = tmp_path / "reports" / "latest.html"
    target.write_text("an older report")
    link = tmp_path / "report.html"
    link.symlink_to(target)
    with ContentAddressedToolResultStore(demo_root) as store:
        write_report(store, path=link)
    assert link.is_symlink() and link.resolve() == target
    assert target.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert sorted(path.name for path in (tmp_path / "reports").iterdir()) == ["latest.html"]


def test_a_report_into_a_pipe_is_written_into_it_and_the_pipe_stays(demo_root: Path, tmp_path: Path) -> None:
    # A rename would put a regular file where the pipe was (as root, where /dev/null was): the reader got nothing.
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    reader = subprocess.Popen(["cat", str(pipe)], stdout=subprocess.PIPE)
    try:
        result = CliRunner().invoke(cli, ["report", "--root", str(demo_root), "-o", str(pipe)])
        received, _ = reader.communicate(timeout=60)
    finally:
        reader.kill()
    assert result.exit_code == 0, result.output
    assert received.decode("utf-8").startswith("<!DOCTYPE html>") and received.rstrip().endswith(b"</html>")
    assert stat.S_ISFIFO(pipe.lstat().st_mode)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["pipe"]


@pytest.mark.parametrize("named", ["the index", "a link to it", "a hard link to it", "a new file in the store"])
def test_a_report_is_never_written_over_the_stores_own_files(tmp_path: Path, named: str) -> None:
    root = tmp_path / "store"
    with ContentAddressedToolResultStore(root) as store:
        reference = store.write(key="a.txt", content="kept whole")
    output = {
        "the index": root / "index.db",
        "a link to it": tmp_path / "link.html",
        "a hard link to it": tmp_path / "hard.html",
        "a new file in the store": root / "report.html",
    }[named]
    if named == "a link to it":
        output.symlink_to(root / "index.db")
    if named == "a hard link to it":
        os.link(root / "index.db", output)
    result = CliRunner().invoke(cli, ["report", "--root", str(root), "-o", str(output)])
    assert result.exit_code == 1 and "inside the store" in result.stderr, result.output
    demo = CliRunner().invoke(cli, ["demo", "--steps", "30", "--root", str(root), "--report", str(output)])
    assert demo.exit_code == 1 and "inside the store" in demo.stderr, demo.output
    with ContentAddressedToolResultStore(root) as store:
        assert store.read(reference) == "kept whole" and verify(store).clean


def test_a_file_swapped_for_a_link_to_a_device_while_written_is_never_replaced(demo_root: Path, tmp_path: Path) -> None:
    # The writer decides on what it opened, never on the name again: a name that now leads to a pipe is written into.
    output, pipe = tmp_path / "report.html", tmp_path / "pipe"
    output.write_text("old")
    os.mkfifo(pipe)
    reader = subprocess.Popen(["cat", str(pipe)], stdout=subprocess.PIPE)
    opened = os.open

    def swapped_after_opening(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        descriptor = opened(path, flags, *args, **kwargs)
        if Path(path) == output:
            output.unlink()
            output.symlink_to(pipe)
        return descriptor

    try:
        with pytest.MonkeyPatch.context() as patch, ContentAddressedToolResultStore(demo_root) as store:
            patch.setattr(os, "open", swapped_after_opening)
            write_report(store, path=output)
    finally:
        reader.kill()
        reader.wait(timeout=60)
    assert output.is_symlink() and stat.S_ISFIFO(pipe.lstat().st_mode)


@pytest.mark.parametrize("output", ["/dev/fd/3", "//proc/self/fd/3"])
def test_a_report_to_a_descriptor_the_store_opened_is_refused(tmp_path: Path, output: str) -> None:
    # Descriptor 3 is not open when the command starts; once the store is open, it is SQLite's, on index.db.
    root = tmp_path / "store"
    with ContentAddressedToolResultStore(root) as store:
        reference = store.write(key="a.txt", content="kept whole")
    for command in (["report", "--root", str(root)], ["cat", reference, "--root", str(root)]):
        completed = subprocess.run(
            [sys.executable, "-m", "casstore", *command, "-o", output],
            check=False,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert completed.returncode == 1 and "store" in completed.stderr, completed.stderr
    with ContentAddressedToolResultStore(root) as store:
        assert store.read(reference) == "kept whole" and verify(store).clean


def test_cat_is_never_written_over_the_stores_index(tmp_path: Path) -> None:
    root = tmp_path / "store"
    with ContentAddressedToolResultStore(root) as store:
        reference = store.write(key="a.txt", content="kept whole")
    (tmp_path / "link").symlink_to(root / "index.db")
    for output in (root / "index.db", tmp_path / "link"):
        result = CliRunner().invoke(cli, ["cat", reference, "--root", str(root), "-o", str(output)])
        assert result.exit_code == 1 and "inside the store" in result.stderr, result.output
    with ContentAddressedToolResultStore(root) as store:
        assert store.read(reference) == "kept whole" and verify(store).clean


def _report_in_shell(demo_root: Path, output: str, redirection: str) -> subprocess.CompletedProcess[str]:
    """:returns: `casstore report -o OUTPUT` run by bash with `redirection` (`3>>app.log`, say)."""
    command = f"{shlex.quote(sys.executable)} -m casstore report --root {shlex.quote(str(demo_root))}"
    return subprocess.run(
        ["bash", "-c", f"{command} -o {shlex.quote(output)} {redirection}"],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("output", "descriptor"),
    [("/dev/fd/3", 3), ("//dev/fd/3", 3), ("/proc/thread-self/fd/3", 3), ("a link to /dev/stdout", 1)],
)
def test_a_report_to_a_log_the_shell_appends_to_keeps_the_log(
    demo_root: Path, tmp_path: Path, output: str, descriptor: int
) -> None:
    # Opened again by name, the log would be written from its start: the writer uses the descriptor it has.
    log = tmp_path / "app.log"
    log.write_text("an earlier line\n")
    if output.startswith("a link"):
        output = str(tmp_path / "out-link")
        Path(output).symlink_to("/dev/stdout")
    completed = _report_in_shell(demo_root, output, f"{descriptor}>>{shlex.quote(str(log))}")
    assert completed.returncode == 0, completed.stderr
    assert log.read_text(encoding="utf-8").startswith("an earlier line\n<!DOCTYPE html>")


def test_a_report_to_a_closed_standard_output_is_a_one_line_error(demo_root: Path) -> None:
    closed = _report_in_shell(demo_root, "/dev/stdout", ">&-")
    assert closed.returncode == 1 and "Traceback" not in closed.stderr, closed.stderr
    assert "Could not write the report to /dev/stdout" in closed.stderr


def test_a_report_through_a_dangling_link_makes_the_file_it_names(demo_root: Path, tmp_path: Path) -> None:
    link = tmp_path / "report.html"
    link.symlink_to(tmp_path / "made-by-the-report.html")
    with ContentAddressedToolResultStore(demo_root) as store:
        write_report(store, path=link)
    assert link.is_symlink() and (tmp_path / "made-by-the-report.html").read_text().startswith("<!DOCTYPE html>")


def test_a_report_keeps_the_files_permissions_and_its_other_names(demo_root: Path, tmp_path: Path) -> None:
    private, linked = tmp_path / "private.html", tmp_path / "linked.html"
    private.write_text("old")
    private.chmod(0o600)
    linked.write_text("old")
    os.link(linked, tmp_path / "other-name.html")
    with ContentAddressedToolResultStore(demo_root) as store:
        write_report(store, path=private)
        write_report(store, path=linked)
    assert stat.S_IMODE(private.stat().st_mode) == 0o600  # previews of tool results stay private
    assert (tmp_path / "other-name.html").read_bytes() == linked.read_bytes() != b"old"


def test_a_link_planted_where_the_report_writes_first_is_never_followed(demo_root: Path, tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("not the report's to change")
    for name in (f".report.html.tmp-{os.getpid()}", ".report.html.tmp"):  # names a temporary file could be given
        (tmp_path / name).symlink_to(victim)
    with ContentAddressedToolResultStore(demo_root) as store:
        write_report(store, path=tmp_path / "report.html")
    assert victim.read_text() == "not the report's to change"
    assert (tmp_path / "report.html").read_text().startswith("<!DOCTYPE html>")


def test_a_report_into_a_pipe_no_one_reads_is_an_error_at_once(demo_root: Path, tmp_path: Path) -> None:
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    completed = subprocess.run(
        [sys.executable, "-m", "casstore", "report", "--root", str(demo_root), "-o", str(pipe)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert completed.returncode == 1 and "no process reads from it" in completed.stderr, completed.stderr
    assert stat.S_ISFIFO(pipe.lstat().st_mode)


def test_a_report_to_the_commands_own_output_is_added_to_what_it_goes_to(demo_root: Path, tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    log.write_text("an earlier line\n")
    with open(log, "a") as appended:
        completed = subprocess.run(
            [sys.executable, "-m", "casstore", "report", "--root", str(demo_root), "-o", "/dev/stdout"],
            stdout=appended,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            check=False,
        )
    assert completed.returncode == 0, completed.stderr
    written = log.read_text(encoding="utf-8")
    assert written.startswith("an earlier line\n<!DOCTYPE html>") and written.rstrip().endswith("</html>")
    assert "wrote /dev/stdout" in completed.stderr


@pytest.mark.parametrize(
    ("setup", "arguments", "message"),
    [
        ("empty", [], "This store is empty"),
        ("no compactions", [], "No compactions recorded here"),
        ("old", ["--since", "1d"], "Nothing was written, offloaded or compacted in the last 1d"),
        ("old", ["--namespace", "nobody"], "This store has no history in namespace <code>nobody</code>"),
    ],
)
def test_nothing_to_show_is_a_clear_page(tmp_path: Path, setup: str, arguments: list[str], message: str) -> None:
    root = tmp_path / "store"
    if setup == "empty":
        create_store(root)  # a store that exists on disk with nothing in it (a store is made by its first write)
    with ContentAddressedToolResultStore(root, namespace="someone") as store:
        if setup != "empty":
            store.write(key="a.txt", content="a result")
            store.write(key="b.txt", content="a result")
        if setup == "old":
            store.record_compaction(compaction_id="c", compaction=CompactionRecord(9, 3, 4))
    if setup == "old":
        with contextlib.closing(sqlite3.connect(root / "index.db")) as connection, connection:
            for table, column in (("write_rows", "written_at"), ("compactions", "compacted_at")):
                connection.execute(f"UPDATE {table} SET {column} = '2020-01-01 00:00:00.000'")
    output = tmp_path / "report.html"
    result = CliRunner().invoke(cli, ["report", "--root", str(root), "-o", str(output), *arguments])
    assert result.exit_code == 0, result.output
    page = output.read_text(encoding="utf-8")
    assert message in page
    if setup != "no compactions":
        assert "nothing matches" in result.stderr and '<section id="nothing"' in page


@pytest.mark.slow
def test_a_shared_store_reports_as_a_local_one(tmp_path: Path, postgres_url: str, s3_bucket_url: S3Location) -> None:
    """The same scripted agent run, into a local store and into a shared one on real servers, reports the same."""
    run_demo(shared=(postgres_url, s3_bucket_url.url), steps=25, namespace="run")
    run_demo(root=tmp_path / "local", steps=25, namespace="run")
    output = tmp_path / "shared.html"
    completed = subprocess.run(
        [sys.executable, "-m", "casstore", "report", "--index", postgres_url, "--blobs", s3_bucket_url.url,
         "-o", str(output)],
        capture_output=True, text=True, check=False, env={**os.environ, **s3_bucket_url.env}, timeout=120,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr
    page = output.read_text(encoding="utf-8")
    with psycopg.connect(postgres_url) as connection:
        (compactions,) = connection.execute("SELECT count(*) FROM compactions").fetchone()  # type: ignore[misc]
    assert compactions > 0 and len(_marks(page, "timeline", "compaction")) == compactions
    parts = urlsplit(postgres_url)
    assert f"{parts.hostname}:{parts.port}{parts.path} and {s3_bucket_url.url}" in page  # the store, by where it is
    assert parts.password and parts.password not in page
    with (
        SharedToolResultStore(index_url=postgres_url, blob_url=s3_bucket_url.url) as shared,
        ContentAddressedToolResultStore(tmp_path / "local") as local,
    ):
        shared_figures = shared.repository.history.report_figures()
        local_figures = local.repository.history.report_figures()
    same = ("tools", "repeated", "largest")
    assert [getattr(shared_figures, name) for name in same] == [getattr(local_figures, name) for name in same]
    assert [(m.tokens_before, m.tokens_after, m.target_tokens, m.context_window) for m in shared_figures.timeline] == [
        (m.tokens_before, m.tokens_after, m.target_tokens, m.context_window) for m in local_figures.timeline
    ]
    shared_last, local_last = shared_figures.bytes_over_time[-1], local_figures.bytes_over_time[-1]
    assert (shared_last.writes, shared_last.logical_bytes, shared_last.unique_bytes) == (
        local_last.writes,
        local_last.logical_bytes,
        local_last.unique_bytes,
    )


@pytest.mark.slow
def test_the_report_pages_commands_run_as_written(tmp_path: Path) -> None:
    """The commands of docs/report.md, run as written in an empty folder."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "report.md").read_text(encoding="utf-8")
    (commands,) = re.findall(r"```sh\n(.*?)```", page, flags=re.DOTALL)
    environment = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    completed = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", commands],
        cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr
    assert "The run's report, charts and tables: casstore-report.html" in completed.stdout
    assert "wrote last-week.html" in completed.stdout
    assert "namespace <code>demo</code>" in (tmp_path / "last-week.html").read_text(encoding="utf-8")
    assert "all namespaces" in (tmp_path / "casstore-report.html").read_text(encoding="utf-8")


def test_a_damaged_blob_is_said_in_its_preview_and_the_report_goes_on(tmp_path: Path) -> None:
    root = tmp_path / "store"
    with ContentAddressedToolResultStore(root) as store:
        for key in ("a.txt", "b.txt"):
            store.write(key=key, content="a result that came back " * 20)
    (digest,) = [row[0] for row in _rows(root, "SELECT digest FROM blobs")]
    frame = inline_frame(root, digest)
    replace_inline_frame(root, digest, frame[:-4] + bytes(4))  # its checksum no longer matches
    with ContentAddressedToolResultStore(root) as store:
        page, figures = build_report(store)
    assert figures.repeated[0].digest == digest
    assert "(could not be read: " in page and digest in page  # said, never shown as if it were the content
    assert "a result that came back" not in page


def test_the_file_system_store_estimate_is_what_that_store_takes(tmp_path: Path) -> None:
    """The report's estimate for FileSystemToolResultStore against the demo's measurement of it (files written)."""
    summary = run_demo(root=tmp_path / "store", steps=40, namespace="measured")
    with ContentAddressedToolResultStore(tmp_path / "store") as store:
        estimate = store.repository.history.report_figures(namespace="measured").bytes_over_time[-1].file_system_bytes
    # The measurement also counts the folder the files are in: a few blocks.
    assert 0 <= summary.filesystem_store_bytes - estimate <= 4 * 4096, (summary.filesystem_store_bytes, estimate)
