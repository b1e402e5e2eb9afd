"""
`casstore copy` carries the step archive along: its transcripts and its `archives` rows reach the shared store, times
kept, once however often the copy runs, and the note's reference reads the same transcript there.
"""

import re
from pathlib import Path

import psycopg

from casstore import ContentAddressedToolResultStore, SharedToolResultStore
from casstore.compactor import StepArchiveCompactor
from casstore.index.postgres import read_times_as_text
from casstore.maintenance.copying import copy_store
from tests.compactor_helpers import PayloadCounter, zoo_conversation
from tests.servers import S3Location

COUNTER = PayloadCounter()


def test_a_copy_brings_the_archives_and_their_transcripts(
    tmp_path: Path, postgres_url: str, s3_bucket_url: S3Location
) -> None:
    root = tmp_path / "local"
    with ContentAddressedToolResultStore(root, namespace="alice") as local:
        compacted = StepArchiveCompactor(store=local).compact(zoo_conversation(), 0, COUNTER)
        assert compacted is not None
        (reference,) = re.findall(r"'(blake3/[^']+)'", compacted[2].text or "")
        transcript = local.read(reference)
        rows = local.repository.copies.archive_rows()
    shared = SharedToolResultStore(
        index_url=postgres_url, blob_url=s3_bucket_url.url, blob_options=s3_bucket_url.options, namespace="alice"
    )
    with ContentAddressedToolResultStore(root) as source, shared:
        first = copy_store(source, shared)
        again = copy_store(source, shared)
        assert (first.archives_copied, again.archives_copied) == (1, 0)
        assert shared.read(reference) == transcript
        assert shared.repository.copies.archive_rows() == rows
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        read_times_as_text(connection)
        (row,) = connection.execute("SELECT namespace, messages, first_step, last_step FROM archives").fetchall()
    assert row == ("alice", 18, 1, 8)
