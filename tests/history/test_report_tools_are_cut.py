"""
`casstore report` stays within its size however many tools a store has seen: the compactor's and the hook's tools are
each cut to the busiest `TOOL_ROWS`, with one row summing the others, and a tool's name is shown to `NAME_CHARS`.
"""

import contextlib
import re
import sqlite3
from pathlib import Path

import pytest

from casstore import ContentAddressedToolResultStore, OffloadRecord
from casstore.history.report import TOOL_ROWS, build_report
from casstore.history.report_compactions import NAME_CHARS

pytestmark = pytest.mark.filterwarnings("ignore::haystack.utils.experimental.ExperimentalWarning")

EXTRA = 40


def _section(page: str, name: str) -> str:
    return page.split(f'<section id="{name}">', 1)[1].split("</section>", 1)[0]


def _plant_tools(root: Path, *, tools: int, name_chars: int, hook_tools: int) -> None:
    with ContentAddressedToolResultStore(root, namespace="t") as store:
        reference = store.write(key="x.txt", content="hello")
        offloads = [
            OffloadRecord(f"tool{number:06d}".ljust(name_chars, "x"), "call_1", [reference], 10 + number, 5 + number)
            for number in range(tools)
        ]
        store.record_offloads(compaction_id="c1", offloads=offloads)
        for number in range(hook_tools):
            for part in range(1 + number % 3):  # the busiest hook tools have the most results
                store.write(key=f"{part}_hooktool{number:06d}_call_abc{number}x{part}.txt", content="same")


def test_the_busiest_tools_are_drawn_and_the_rest_summed_in_one_row(tmp_path: Path) -> None:
    root = tmp_path / "store"
    _plant_tools(root, tools=TOOL_ROWS + EXTRA, name_chars=12, hook_tools=TOOL_ROWS + EXTRA)
    with ContentAddressedToolResultStore(root) as store:
        page, figures = build_report(store)
    with contextlib.closing(sqlite3.connect(root / "index.db")) as connection:
        offloads, original, saved = connection.execute(
            "SELECT count(*), sum(original_tokens), sum(saved_tokens) FROM offloads"
        ).fetchone()
        busiest = [row[0] for row in connection.execute("SELECT tool_name FROM offloads ORDER BY saved_tokens DESC")]
    assert [tool.tool_name for tool in figures.tools] == busiest[:TOOL_ROWS]
    assert figures.other_tools is not None and figures.other_tools.tools == EXTRA
    tools = _section(page, "tools")
    assert len(re.findall(r'data-kind="tool"', tools)) == TOOL_ROWS
    assert len(re.findall(r'data-kind="other-tools"', tools)) == 1
    assert f"{EXTRA} other tools" in tools and len(re.findall(r"<tr", tools)) == 1 + TOOL_ROWS + 2
    assert f'<td>total</td><td class="num">{offloads:,}</td><td class="num"></td>' in tools
    assert f"{original:,}" in tools and f"{saved:,}" in tools
    assert f"<dd>{offloads:,}</dd>" in page  # the summary counts every tool, cut or not
    hook = _section(page, "hook")
    assert len(re.findall(r'data-kind="tool"', hook)) == TOOL_ROWS
    assert f"{EXTRA} other tools" in hook and len(re.findall(r"<tr", hook)) == 1 + TOOL_ROWS + 2
    hook_results = sum(1 + number % 3 for number in range(TOOL_ROWS + EXTRA))
    assert f"<dd>{hook_results:,}</dd>" in page


def test_thousands_of_long_tool_names_make_a_page_within_its_bound(tmp_path: Path) -> None:
    root = tmp_path / "store"
    _plant_tools(root, tools=3_000, name_chars=5_000, hook_tools=200)
    with ContentAddressedToolResultStore(root) as store:
        reference = store.write(key="y.txt", content="world")
        store.record_offloads(
            compaction_id="c2", offloads=[OffloadRecord("A" * 200_000, None, [reference], 9**9, 9**9)]
        )
        page, _ = build_report(store)
    assert len(page.encode()) < 2_000_000 / 4
    assert "A" * (NAME_CHARS + 1) not in page and "A" * (NAME_CHARS - 1) + "\u2026" in page
    heights = [int(height) for height in re.findall(r'<svg [^>]*height="(\d+)"', page)]
    assert max(heights) < 22 * (TOOL_ROWS + 2) + 200
