"""
`casstore report` shows every text from the store as text: control characters (NUL, ESC, BEL, C1) and bidi controls
in keys and tool names are written as visible escapes, never into the markup; and its Content-Security-Policy
forbids everything the page does not use.
"""

import contextlib
import re
import sqlite3
from pathlib import Path

import pytest

from casstore import CompactionRecord, ContentAddressedToolResultStore, OffloadRecord
from casstore.history.report import build_report
from tests.report_helpers import PAGE_ATTRIBUTES, PAGE_TAGS, PageStructure

pytestmark = pytest.mark.filterwarnings("ignore::haystack.utils.experimental.ExperimentalWarning")

# Characters a parser chokes on, drops or turns around; the page has none of them (its own line ends aside).
UNSHOWABLE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]")
TOOLS = ["esc\x1b]0;title\x07tool", "bell\x07\x08tool", "rtl\u202etxt.exe", "c1\x85\x9btool"]
KEY = "1_read\x1b[2J\u2066file_call_abc.txt"


def test_control_and_bidi_characters_in_names_are_shown_as_escapes(tmp_path: Path) -> None:
    root = tmp_path / "store"
    with ContentAddressedToolResultStore(root, namespace="n") as store:
        reference = store.write(key=KEY, content="hello\n")
        store.write(key=KEY, content="hello\n")  # twice: the key's result is in the rankings
        store.record_compaction(
            compaction_id="c",
            compaction=CompactionRecord(1_000, 500, 600, 2_000),
            offloads=[OffloadRecord(name, "call_1", [reference], 100, 90) for name in ["placeholder", *TOOLS]],
        )
    # An index written before tool names were checked may hold a NUL (SQLite keeps it).
    with contextlib.closing(sqlite3.connect(root / "index.db")) as connection, connection:
        connection.execute("UPDATE offloads SET tool_name = ? WHERE tool_name = 'placeholder'", ("nul\x00tool",))
    with ContentAddressedToolResultStore(root) as store:
        page, figures = build_report(store)
    assert "nul\x00tool" in {tool.tool_name for tool in figures.tools}
    assert not UNSHOWABLE.search(page), sorted(set(UNSHOWABLE.findall(page)))
    structure = PageStructure.of(page)
    assert structure.tags <= PAGE_TAGS and structure.attributes <= PAGE_ATTRIBUTES
    text = "".join(structure.text)
    for shown in [r"nul\x00tool", r"esc\x1b]0;title\x07tool", r"bell\x07\x08tool", r"rtl\u202etxt.exe"]:
        assert shown in text, shown
    assert r"c1\x85\x9btool" in text and r"read\x1b[2J\u2066file" in text


def test_the_content_security_policy_allows_only_inline_styles(tmp_path: Path) -> None:
    with ContentAddressedToolResultStore(tmp_path / "store") as store:
        store.write(key="x.txt", content="x")
        page, _ = build_report(store)
    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]*)"', page)
    assert policy is not None
    directives = dict(directive.strip().split(" ", 1) for directive in policy[1].split(";") if directive.strip())
    assert directives.pop("default-src") == "'none'"
    assert directives.pop("style-src") == "'unsafe-inline'"  # the page's one <style>
    # Nothing else is allowed: no images (the page has none), scripts, fonts or fetches, nor a base or a form target.
    assert set(directives.values()) == {"'none'"}, directives
    assert "<img" not in page and "data:" not in page
