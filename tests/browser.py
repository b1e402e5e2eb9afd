"""
Headless Chromium for the report's tests: Debian's `chromium`, driven by Playwright (its own browser download does not
work here, so `executable_path` names the system's).

`python3 dev.py test` installs Chromium where it can (as root, with apt-get). Where it is missing, a browser test
skips with a one-line reason saying how to install it, except in CI (`CI=true`), where it fails: a CI run that
could not open the page has not tested it.

One browser per test module (the fixture `browser`); each page opens in a fresh context, and `open_page` records what
a person would notice and what must never happen: console messages, page errors, and every request the page made.
"""

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path(os.environ.get("CASSTORE_CHROMIUM", "/usr/bin/chromium"))
# The flags seen to work here for a headless Chromium run as root on a machine without a network.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
INSTALL_HINT = "install it with `sudo apt-get install -y chromium` (python3 dev.py test does so when run as root)"
# Where screenshots are kept for people to look at (git-ignored), beside the pytest temporary folder's copies.
ARTIFACTS = Path(__file__).resolve().parent.parent / ".artifacts"


def _unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
        pytest.fail(f"{reason}; CI runs every browser test: {INSTALL_HINT}.", pytrace=False)
    pytest.skip(f"{reason}: {INSTALL_HINT}.")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """:returns: A headless Chromium for the test module, closed after it."""
    if not CHROMIUM.exists():
        _unavailable(f"no headless Chromium at {CHROMIUM}")
    from playwright.sync_api import Error, sync_playwright

    with sync_playwright() as playwright:
        try:
            launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        except Error as error:
            _unavailable(f"Chromium at {CHROMIUM} did not start ({str(error).splitlines()[0]})")
        try:
            yield launched
        finally:
            launched.close()


@dataclass
class LoadedPage:
    """A page as Chromium loaded it, with everything it said and asked for."""

    page: Any
    url: str
    console: list[tuple[str, str]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)

    @property
    def console_errors(self) -> list[str]:
        return [text for kind, text in self.console if kind in {"error", "warning"}]

    @property
    def other_requests(self) -> list[str]:
        """:returns: Every request but the page's own document."""
        return [url for url in self.requests if url != self.url]

    def count(self, selector: str) -> int:
        return int(self.page.locator(selector).count())

    def texts(self, selector: str) -> list[str]:
        return [str(text).strip() for text in self.page.locator(selector).all_text_contents()]

    def attributes(self, selector: str, name: str) -> list[str]:
        return [
            str(value)
            for value in self.page.eval_on_selector_all(selector, f"els => els.map(e => e.getAttribute('{name}'))")
        ]


def open_page(browser: Any, path: Path, *, width: int = 1500, height: int = 1200) -> LoadedPage:
    """Open `path` in a fresh context (scripts enabled, so anything injected would run) and wait until it loaded."""
    context = browser.new_context(viewport={"width": width, "height": height}, java_script_enabled=True)
    page = context.new_page()
    loaded = LoadedPage(page=page, url=path.resolve().as_uri())
    page.on("console", lambda message: loaded.console.append((message.type, message.text)))
    page.on("pageerror", lambda error: loaded.errors.append(str(error)))
    page.on("request", lambda request: loaded.requests.append(request.url))
    page.goto(loaded.url, wait_until="load")
    page.wait_for_load_state("networkidle")
    return loaded


def keep_screenshot(loaded: LoadedPage, folder: Path, name: str) -> Path:
    """Save a full-page screenshot under `folder` and in `.artifacts/`. :returns: The copy in `folder`."""
    shot = folder / name
    loaded.page.screenshot(path=str(shot), full_page=True)
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / name).write_bytes(shot.read_bytes())
    return shot
