"""
The report in a real browser (headless Chromium, tests/browser.py): a demo run's page loads with no console error and
no request, each chart has the marks its data implies, hostile names stay text and run nothing, and every page of
nothing is a clear page. One browser for the module; the screenshots are kept in `.artifacts/`.
"""

import contextlib
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from casstore import CompactionRecord, ContentAddressedToolResultStore
from casstore.demo.session import CONTEXT_WINDOW, run_demo
from casstore.history.report import write_report
from tests.browser import LoadedPage, keep_screenshot, open_page
from tests.report_helpers import HOSTILE, HOSTILE_NAMESPACE, PAGE_TAGS, plant_hostile_store

pytestmark = pytest.mark.filterwarnings("ignore::haystack.utils.experimental.ExperimentalWarning")

# What a page's own markup never holds, found anywhere in the DOM: an element or attribute that was injected.
_INJECTED = """() => {
    const ours = new Set(OUR_TAGS);
    const strange = [];
    for (const element of document.querySelectorAll("*")) {
        const tag = element.tagName.toLowerCase();
        if (!ours.has(tag)) strange.push(tag);
        for (const attribute of element.attributes) {
            if (attribute.name.toLowerCase().startsWith("on") || /javascript:/i.test(attribute.value)) {
                strange.push(tag + "[" + attribute.name + "]");
            }
        }
    }
    return strange;
}""".replace("OUR_TAGS", json.dumps(sorted(PAGE_TAGS)))


def _rows(root: Path, sql: str) -> list[tuple[Any, ...]]:
    with contextlib.closing(sqlite3.connect(root / "index.db")) as connection:
        return [tuple(row) for row in connection.execute(sql)]


def _assert_quiet(loaded: LoadedPage) -> None:
    """No console error or warning, no script error, and no request but the page itself."""
    assert loaded.console_errors == [], loaded.console_errors
    assert loaded.errors == [], loaded.errors
    assert loaded.other_requests == [], loaded.other_requests


@pytest.fixture(scope="module")
def demo_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A store filled by a real agent run (the demo), and its report."""
    folder = tmp_path_factory.mktemp("browser")
    root = folder / "store"
    summary = run_demo(root=root, steps=60, namespace="demo-run")
    assert summary.compactions > 0
    with ContentAddressedToolResultStore(root) as store:
        write_report(store, path=folder / "report.html", namespace="demo-run")
    return root, folder / "report.html"


@pytest.mark.slow
def test_a_demo_report_loads_quietly_with_a_mark_for_each_datum(
    browser: Any, demo_report: tuple[Path, Path], tmp_path: Path
) -> None:
    root, report = demo_report
    loaded = open_page(browser, report)
    _assert_quiet(loaded)
    assert loaded.page.title() == "casstore report: demo-run"
    compactions = _rows(root, "SELECT tokens_before, tokens_after FROM compactions ORDER BY compacted_at, id")
    marks = '[data-chart="timeline"] .mark[data-kind="compaction"]'
    assert loaded.count(marks) == len(compactions) > 0  # one mark per compaction
    drawn = zip(loaded.attributes(marks, "data-before"), loaded.attributes(marks, "data-after"), strict=True)
    assert [(int(before), int(after)) for before, after in drawn] == compactions
    assert loaded.count('[data-chart="timeline"] .window-line') == 1  # the demo tells the compactor its window
    assert f"{CONTEXT_WINDOW:,}" in loaded.texts("#timeline td")
    # Tokens saved per compaction: one bar each, with the table's numbers.
    savings = _rows(
        root, "SELECT sum(saved_tokens) FROM offloads GROUP BY compaction_id ORDER BY min(offloaded_at), compaction_id"
    )
    bars = loaded.attributes('[data-chart="columns"] .mark', "data-value")
    assert [int(value) for value in bars] == [row[0] for row in savings]
    table = [cell.replace(",", "") for cell in loaded.texts("#savings tbody tr td:last-child")]
    assert table == [*bars, str(sum(row[0] for row in savings))]  # and the total
    tools = _rows(root, "SELECT tool_name, sum(saved_tokens) FROM offloads GROUP BY 1 ORDER BY 2 DESC, 1")
    assert loaded.count("#tools .mark") == len(tools)
    assert loaded.texts("#tools tbody td:first-child")[:-1] == [row[0] for row in tools]
    assert loaded.attributes("#bytes .mark", "data-series") == [
        "logical",
        "unique",
        "stored",
        "FileSystemToolResultStore (estimate)",
    ]
    (logical,) = _rows(root, "SELECT sum(size) FROM writes")[0]
    assert loaded.attributes('#bytes .mark[data-series="logical"]', "data-value") == [str(logical)]
    repeated = _rows(root, "SELECT count(*) FROM repeated_results")[0][0]
    assert loaded.count("#repeated .mark") == min(repeated, 20) > 0
    assert loaded.count("#namespaces .mark") == 1
    # One bar per archive of the step archive, and its transcript's reference in the table beside it.
    archives = _rows(root, "SELECT refs FROM archives")
    assert loaded.count("#archives .mark") == len(archives) > 0
    assert {json.loads(refs)[0] for (refs,) in archives} == set(loaded.texts("#archives tbody td:last-child"))
    # Every chart has a title and labelled axes, and is drawn (it has a size on the screen).
    for chart in loaded.page.locator("svg.chart").all():
        assert chart.locator("title").first.text_content()
        assert chart.bounding_box()["width"] > 300
    assert loaded.count("svg.chart") == 8
    assert loaded.count("svg.chart .axis-label") >= 7
    shot = keep_screenshot(loaded, tmp_path, "report-demo.png")
    assert shot.stat().st_size > 50_000  # a page with charts, not a blank one


@pytest.mark.slow
def test_hostile_names_and_previews_show_as_text_and_run_nothing(browser: Any, tmp_path: Path) -> None:
    root = tmp_path / "store"
    plant_hostile_store(root)
    with ContentAddressedToolResultStore(root) as store:
        write_report(store, path=tmp_path / "report.html")
    loaded = open_page(browser, tmp_path / "report.html")
    _assert_quiet(loaded)  # an image or script that got through would ask for x, or break the CSP, and say so
    assert loaded.page.evaluate("() => window.__pwned") is None  # nothing injected ran
    assert loaded.page.evaluate(_INJECTED) == []  # and the DOM holds no element or handler of theirs
    text = loaded.page.locator("body").inner_text()
    for name in HOSTILE:
        assert name.strip() in text  # shown as text, whole, in the tables
    assert HOSTILE_NAMESPACE in text
    previews = loaded.texts("#repeated td:last-child")
    assert any("<script>window.__pwned=2</script>" in preview for preview in previews)
    assert loaded.count("#timeline .mark") == len(HOSTILE)
    keep_screenshot(loaded, tmp_path, "report-hostile.png")


def _old_store(root: Path) -> None:
    with ContentAddressedToolResultStore(root, namespace="someone") as store:
        store.write(key="a.txt", content="a result")
        store.record_compaction(compaction_id="c", compaction=CompactionRecord(9, 3, 4))
    with contextlib.closing(sqlite3.connect(root / "index.db")) as connection, connection:
        connection.execute("UPDATE write_rows SET written_at = '2020-01-01 00:00:00.000'")
        connection.execute("UPDATE compactions SET compacted_at = '2020-01-01 00:00:00.000'")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("case", "options", "message"),
    [
        ("empty store", {}, "This store is empty"),
        ("no compactions", {}, "No compactions recorded here"),
        ("namespace filter", {"namespace": "someone"}, "Compactions: the conversation before and after"),
        ("unknown namespace", {"namespace": "nobody"}, "This store has no history in namespace nobody"),
        ("since matches nothing", {"since": "1d"}, "Nothing was written, offloaded or compacted in the last 1d"),
    ],
)
def test_every_page_of_little_or_nothing_is_clear(
    browser: Any, tmp_path: Path, case: str, options: dict[str, str], message: str
) -> None:
    from casstore.cli import parse_duration

    root = tmp_path / "store"
    if case == "empty store":
        ContentAddressedToolResultStore(root).close()
    elif case == "no compactions":
        with ContentAddressedToolResultStore(root) as store:
            store.write(key="a.txt", content="the same result")
            store.write(key="b.txt", content="the same result")
    else:
        _old_store(root)
    since = parse_duration(options["since"]) if "since" in options else None
    with ContentAddressedToolResultStore(root) as store:
        write_report(store, path=tmp_path / "report.html", namespace=options.get("namespace"), since=since)
    loaded = open_page(browser, tmp_path / "report.html", height=900)
    _assert_quiet(loaded)
    text = loaded.page.locator("body").inner_text()
    assert message in text
    assert loaded.page.locator("h1").inner_text().startswith("casstore report")
    if case == "no compactions":
        assert loaded.count("#repeated .mark") == 1 and loaded.count("#timeline .mark") == 0
    if case == "namespace filter":
        assert loaded.count("#timeline .mark") == 1
