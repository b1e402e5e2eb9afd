"""
A store that cannot write (a read-only folder, a closed store, PostgreSQL down) costs the step archive nothing but its
archive: a warning that names the cause, None (the conversation as it was, the run goes on), and never a note naming
an archive that is not there.
"""

import logging
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from casstore import ContentAddressedToolResultStore, SharedToolResultStore
from casstore.compactor import CompactorChain, DedupOffloadCompactor, StepArchiveCompactor
from tests.compactor_helpers import PayloadCounter, zoo_conversation
from tests.helpers import tree_fingerprint
from tests.servers import PostgresServer, S3Location

COUNTER = PayloadCounter()


def _refuses(compactor: StepArchiveCompactor, caplog: pytest.LogCaptureFixture, *causes: str) -> None:
    messages = zoo_conversation()
    with caplog.at_level(logging.WARNING):
        assert compactor.compact(messages, 0, COUNTER) is None
    assert "Could not archive 18 messages to" in caplog.text and "no note names an archive" in caplog.text
    for cause in causes:
        assert cause in caplog.text, caplog.text


def test_a_closed_store(store_root: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = ContentAddressedToolResultStore(store_root)
    store.close()
    _refuses(StepArchiveCompactor(store=store), caplog, "ContentAddressedToolResultStore", "closed")


@pytest.fixture
def read_only_root(tmp_path: Path) -> Iterator[Path]:
    """A store's folder with one write in it, made immutable (`chattr +i`, which root cannot write through)."""
    root = tmp_path / "store"
    with ContentAddressedToolResultStore(root) as store:
        store.write(key="first.txt", content="written before the folder became read-only")
    subprocess.run(["chattr", "-R", "+i", str(root)], check=True, capture_output=True)
    yield root
    subprocess.run(["chattr", "-R", "-i", str(root)], check=True, capture_output=True)


def test_a_read_only_folder(read_only_root: Path, caplog: pytest.LogCaptureFixture) -> None:
    before = tree_fingerprint(read_only_root)
    with ContentAddressedToolResultStore(read_only_root) as store:
        _refuses(StepArchiveCompactor(store=store), caplog, "read-only")
        # In a chain, the offloads fail the same way: the conversation stays as it was, and the run goes on.
        chain = CompactorChain(compactors=[DedupOffloadCompactor(store=store), StepArchiveCompactor(store=store)])
        assert chain.compact(zoo_conversation(), 0, COUNTER) is None
    assert tree_fingerprint(read_only_root) == before


@pytest.mark.slow  # the pool's connection attempts take their timeout before the store gives up
def test_postgresql_down(
    postgres_url: str, s3_bucket_url: S3Location, postgres_server: PostgresServer, caplog: pytest.LogCaptureFixture
) -> None:
    store = SharedToolResultStore(
        index_url=postgres_url, blob_url=s3_bucket_url.url, blob_options=s3_bucket_url.options
    )
    with store:
        store.write(key="first.txt", content="written while PostgreSQL was up")
        postgres_server.stop()
        try:
            _refuses(StepArchiveCompactor(store=store), caplog, "SharedToolResultStore", "PostgreSQL")
        finally:
            postgres_server.start()
        # Once it is back, the next compaction archives.
        compacted = StepArchiveCompactor(store=store).compact(zoo_conversation(), 0, COUNTER)
        assert compacted is not None and "archived to 'blake3/" in (compacted[2].text or "")
