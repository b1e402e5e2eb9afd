"""
The documentation holds together: every link between the README and the pages under docs/ lands on a file and a
heading that exist, the README lists every page, and what the store page states about the API is the API.
"""

import inspect
import re
from pathlib import Path

import pytest

import casstore
from casstore import ContentAddressedToolResultStore

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# [text](target) outside code; a target of another site is not followed.
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _prose(page: Path) -> str:
    """The page without its fenced code blocks, where brackets are code, not links."""
    return re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.DOTALL)


def _anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but `-` and `_` dropped, spaces as `-`."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    headings = re.findall(r"^#+ (.+)$", _prose(page), flags=re.MULTILINE)
    return {_anchor(heading) for heading in headings}


def test_the_anchor_rule_matches_githubs() -> None:
    assert _anchor("Serialization and Haystack's deserialization allowlist") == (
        "serialization-and-haystacks-deserialization-allowlist"
    )
    assert _anchor("With Haystack's `ToolResultOffloadHook`: `keep_in_context`") == (
        "with-haystacks-toolresultoffloadhook-keep_in_context"
    )


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_link_lands_on_a_file_and_heading_that_exist(page: Path) -> None:
    broken = []
    for target in _LINK.findall(_prose(page)):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists() or (anchor and anchor not in _anchors(linked)):
            broken.append(target)
    assert not broken, f"{page.name}: {broken}"


def test_the_readme_links_every_page() -> None:
    linked = {target.partition("#")[0] for target in _LINK.findall(_prose(ROOT / "README.md"))}
    assert {f"docs/{page.name}" for page in PAGES[1:]} <= linked


def test_the_store_page_shows_the_constructors_signature() -> None:
    page = (ROOT / "docs" / "store.md").read_text(encoding="utf-8")
    (documented,) = re.findall(r"```python\n(ContentAddressedToolResultStore\(.*?\))\n```", page)
    shown = []
    for parameter in inspect.signature(ContentAddressedToolResultStore).parameters.values():
        if parameter.kind is inspect.Parameter.KEYWORD_ONLY and "*" not in shown:
            shown.append("*")
        default = parameter.default
        shown.append(
            parameter.name
            if default is inspect.Parameter.empty
            else f"{parameter.name}={repr(default).replace(chr(39), chr(34))}"
        )
    assert documented == f"ContentAddressedToolResultStore({', '.join(shown)})"


def test_the_store_pages_error_table_is_every_error_with_its_bases() -> None:
    page = (ROOT / "docs" / "store.md").read_text(encoding="utf-8")
    table = page.split("| situation | error |", 1)[1].split("\n\n", 1)[0]
    documented = {
        name: tuple(base.strip() for base in bases.split(","))
        for name, bases in re.findall(r"`(\w+Error)\(([\w, ]+)\)`", table)
    }
    errors = [getattr(casstore, name) for name in casstore.__all__ if name.endswith("Error")]
    assert documented == {
        error.__name__: tuple(base.__name__ for base in error.__bases__)
        for error in errors
        if error is not casstore.CasStoreError  # the page says every error derives from it
    }


# Each page of docs/ is short enough to read, and says what the system is, not how it came to be: no migration's
# number or name (the baseline's aside), no "since"/"before"/"until" a migration, no fix, no measurement of a named
# commit. History belongs in CHANGELOG.md.
MAX_PAGE_BYTES = 15_000
_HISTORY = re.compile(
    r"\bmigrations? 0\d{3}\b"
    r"|\b(?:since|before|until|after) (?:migration )?0\d{3}\b"
    r"|\b0(?!001_baseline)\d{3}_[a-z]"
    r"|\bthis fix\b"
    r"|\bcommit `[0-9a-f]{7,40}`"
    r"|\((?:main at )?`[0-9a-f]{7,40}`[,)]",
    flags=re.IGNORECASE,
)


def test_the_history_wording_rule_catches_history_and_spares_the_present() -> None:
    for history in [
        "a view since migration 0013",
        "since 0019 the times are milliseconds",
        "migrations 0016 and 0017",
        "`0011_leaner_history`",
        "(commit `b4d137b`)",
        "measured at commit `861c761`",
        "before the layers (`1165241`)",
        "This fix took 0.2 MB off",
    ]:
        assert _HISTORY.search(history), history
    for present in [
        "`migrations/0001_baseline.sql`",
        "the first migration is `0001_baseline`",
        "up to 1,536 samples, 0.0890x of the baseline",
        "digest `9b1c4e...`",
    ]:
        assert not _HISTORY.search(present), present


@pytest.mark.parametrize("page", PAGES[1:], ids=lambda page: page.name)
def test_each_page_is_under_15_kb_and_tells_no_history(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    assert len(text.encode("utf-8")) < MAX_PAGE_BYTES, f"{page.name}: {len(text.encode('utf-8'))} bytes"
    history = [line for line in text.splitlines() if _HISTORY.search(line)]
    assert not history, f"{page.name}: history belongs in CHANGELOG.md: {history}"
