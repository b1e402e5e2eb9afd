"""Shared fixtures: fresh stores on real folders."""

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from casstore import ContentAddressedToolResultStore

if TYPE_CHECKING:
    from tests.store_backends import Backend
from tests.helpers import create_store

# Real PostgreSQL and SeaweedFS (S3) servers for the shared-store tests; headless Chromium for the report's.
pytest_plugins = ["tests.servers", "tests.browser"]


@pytest.fixture
def store_root(tmp_path: Path) -> Path:
    """A folder for a store that does not exist yet."""
    return tmp_path / "store"


@pytest.fixture
def store(store_root: Path) -> Iterator[ContentAddressedToolResultStore]:
    """A fresh store in the default namespace, empty but on disk (so tests can look into `index.db`), closed after."""
    create_store(store_root)
    with ContentAddressedToolResultStore(store_root) as opened:
        yield opened


@pytest.fixture(params=["local", "shared"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator["Backend"]:
    """
    A fresh store of each kind, for the tests both stores must pass: `local` (a folder) and `shared` (a fresh
    PostgreSQL database and object prefix on the suite's servers), with raw access to what each keeps.
    """
    # Imported here: at the top, it would import `tests.servers` before pytest loads it as a plugin (and so could
    # not rewrite its asserts).
    from tests.store_backends import make_backend

    made = make_backend(request.param, request, tmp_path)
    try:
        yield made
    finally:
        made.close()


@pytest.fixture
def file_store(store_root: Path) -> Iterator[ContentAddressedToolResultStore]:
    """A fresh store that keeps every blob in a file (`inline_max=0`), empty but on disk."""
    create_store(store_root)
    with ContentAddressedToolResultStore(store_root, inline_max=0) as opened:
        yield opened


@pytest.fixture
def allow_casstore_deserialization(monkeypatch: pytest.MonkeyPatch) -> None:
    """The host application's opt-in that lets Haystack deserialize casstore and compactor classes."""
    monkeypatch.setenv("HAYSTACK_DESERIALIZATION_ALLOWLIST", "casstore")
