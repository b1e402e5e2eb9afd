"""
The shared store's quick paths on real PostgreSQL and SeaweedFS: a duplicate write in one statement, a read in one,
and the protocol's rules kept by both (nothing recorded without its blob, the retry when gc took a blob, visibility
per namespace, no object-store request for a duplicate).
"""

import os
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import obstore
import psycopg
import pytest

from casstore import SharedToolResultStore
from casstore.errors import ReferenceNotFoundError
from casstore.maintenance.checks import collect_garbage, verify
from tests.servers import S3Location


@pytest.fixture
def shared(postgres_url: str, s3_bucket_url: S3Location) -> Iterator[SharedToolResultStore]:
    with SharedToolResultStore(
        index_url=postgres_url, blob_url=s3_bucket_url.url, blob_options=s3_bucket_url.options, namespace="alice"
    ) as store:
        yield store


def _count(url: str, sql: str) -> int:
    with psycopg.connect(url, autocommit=True) as connection:
        row = connection.execute(sql).fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.parametrize("size", [100, 200_000], ids=["inline", "object"])
def test_duplicate_writes_record_each_write_and_one_blob(
    shared: SharedToolResultStore, postgres_url: str, size: int
) -> None:
    content = os.urandom(size)
    first = shared.write(key="a.bin", content=content)
    assert shared.write(key="b.bin", content=content) == first
    assert shared.read(first) == content
    assert _count(postgres_url, "SELECT count(*) FROM writes") == 2
    assert _count(postgres_url, "SELECT count(*) FROM blobs") == 1
    assert _count(postgres_url, "SELECT count(DISTINCT (namespace, reference)) FROM writes") == 1


def test_a_duplicate_write_sends_no_object_store_request(
    shared: SharedToolResultStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    content = os.urandom(300_000)  # incompressible: an object, not a frame in the index
    reference = shared.write(key="big.bin", content=content)
    requests: list[str] = []
    for name in ("put", "get", "head", "delete", "list"):
        monkeypatch.setattr(obstore, name, _counted(name, getattr(obstore, name), requests))
    for number in range(5):
        assert shared.write(key=f"again{number}.bin", content=content) == reference
    assert requests == []
    assert shared.read(reference) == content
    assert requests == ["get"]  # the counting works: a read of an object is one request


def _counted(name: str, request: Callable[..., Any], requests: list[str]) -> Callable[..., Any]:
    def counted(*args: Any, **kwargs: Any) -> Any:
        requests.append(name)
        return request(*args, **kwargs)

    return counted


def test_a_blob_collected_meanwhile_is_stored_again(
    shared: SharedToolResultStore, postgres_url: str, s3_bucket_url: S3Location
) -> None:
    content = "collected " * 20_000
    reference = shared.write(key="a.txt", content=content)
    collect_garbage(shared, namespace="alice", grace=timedelta(0))
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        connection.execute("UPDATE blobs SET last_seen = '2020-01-01 00:00:00.000'")
    collect_garbage(shared, grace=timedelta(0))
    assert _count(postgres_url, "SELECT count(*) FROM blobs") == 0
    # This process remembers the blob as stored; the one-statement write finds its row gone and stores it again.
    assert shared.write(key="b.txt", content=content) == reference
    assert shared.read(reference) == content
    report = verify(shared)
    assert report.ok, report


def test_reads_answer_only_in_the_writing_namespace(
    shared: SharedToolResultStore, postgres_url: str, s3_bucket_url: S3Location
) -> None:
    reference = shared.write(key="a.txt", content="alice's")
    with SharedToolResultStore(
        index_url=postgres_url, blob_url=s3_bucket_url.url, blob_options=s3_bucket_url.options, namespace="bob"
    ) as bob:
        with pytest.raises(ReferenceNotFoundError):
            bob.read(reference)
        assert bob.write(key="b.txt", content="alice's") == reference
        assert bob.read(reference) == "alice's"
    assert shared.read(reference) == "alice's"
    assert _count(postgres_url, "SELECT count(DISTINCT (namespace, reference)) FROM writes") == 2


def test_a_multi_part_write_records_every_part(shared: SharedToolResultStore, postgres_url: str) -> None:
    parts = [shared.prepare_write(key=f"part{number}.txt", content=f"part {number} " * 9_000) for number in range(3)]
    references = shared.write_prepared_many(parts)
    assert shared.write_prepared_many(parts) == references  # all duplicates: the multi-part transaction
    assert [shared.read(reference) for reference in references] == [f"part {n} " * 9_000 for n in range(3)]
    assert _count(postgres_url, "SELECT count(*) FROM writes") == 6
    assert _count(postgres_url, "SELECT count(*) FROM blobs") == 3
