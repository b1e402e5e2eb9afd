"""
The shared store's quick paths on real PostgreSQL and SeaweedFS: a duplicate write, alone or of several parts, costs no
object-store request and records every write. What both stores promise of the same paths (one blob per content, the
retry when gc took a blob, visibility per namespace) is in tests/stores/contract/ and
tests/maintenance/test_gc_without_grace_period.py.
"""

import os
from collections.abc import Callable, Iterator
from typing import Any

import obstore
import psycopg
import pytest

from casstore import SharedToolResultStore
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


def test_a_multi_part_write_records_every_part(shared: SharedToolResultStore, postgres_url: str) -> None:
    parts = [shared.prepare_write(key=f"part{number}.txt", content=f"part {number} " * 9_000) for number in range(3)]
    references = shared.write_prepared_many(parts)
    assert shared.write_prepared_many(parts) == references  # all duplicates: the multi-part transaction
    assert [shared.read(reference) for reference in references] == [f"part {n} " * 9_000 for n in range(3)]
    assert _count(postgres_url, "SELECT count(*) FROM writes") == 6
    assert _count(postgres_url, "SELECT count(*) FROM blobs") == 3
