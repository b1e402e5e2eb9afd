"""
A shared store knows where its blobs are: a mistyped blob URL fails at once naming both locations (never reads as lost
data), another index's location is refused, and blobs moved on purpose are recorded with `casstore relocate-blobs`
(real PostgreSQL and SeaweedFS on loopback).
"""

import os
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import obstore
import psycopg
import pytest

from casstore import BlobLocationError, SharedToolResultStore
from casstore.blobs.location import MARKER_NAME
from tests.servers import PostgresServer, S3Location
from tests.store_backends import open_bucket

LARGE = "".join(f"line {number}: {os.urandom(24).hex()}\n" for number in range(3000))  # kept as an object


def _casstore(*arguments: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "casstore", *arguments],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _names(s3: S3Location, prefix: str) -> list[str]:
    bucket, _ = open_bucket(s3)
    return sorted(meta["path"] for batch in obstore.list(bucket, prefix=prefix) for meta in batch)


def _settings(index_url: str) -> dict[str, str]:
    with psycopg.connect(index_url) as connection:
        return dict(connection.execute("SELECT name, value FROM store_settings").fetchall())


@pytest.mark.slow
def test_a_mistyped_blob_url_fails_at_once_naming_both_locations(
    postgres_url: str, s3_bucket_url: S3Location, tmp_path: Path
) -> None:
    with SharedToolResultStore(index_url=postgres_url, blob_url=s3_bucket_url.url) as store:
        reference = store.write(key="large.txt", content=LARGE)
    typo = s3_bucket_url.url.rsplit("/", 1)[0] + "/other"
    with pytest.raises(BlobLocationError) as raised:
        SharedToolResultStore(index_url=postgres_url, blob_url=typo)
    assert str(raised.value).startswith(f"No casstore blobs at {typo}; this index's blobs are at {s3_bucket_url.url}.")
    assert _names(s3_bucket_url, "other") == []  # nothing was written at the mistyped place

    for command in (["verify"], ["cat", reference]):
        completed = _casstore(*command, "--index", postgres_url, "--blobs", typo, cwd=tmp_path)
        assert completed.returncode == 1
        assert f"this index's blobs are at {s3_bucket_url.url}" in completed.stderr, completed.stderr
        assert "missing" not in completed.stdout + completed.stderr and "gone" not in completed.stderr
    with SharedToolResultStore(index_url=postgres_url, blob_url=s3_bucket_url.url + "/") as store:  # the same place
        assert store.read(reference) == LARGE


@pytest.mark.slow
def test_a_store_being_made_records_its_location_and_marks_it(postgres_url: str, s3_bucket_url: S3Location) -> None:
    with SharedToolResultStore(index_url=postgres_url, blob_url=s3_bucket_url.url) as store:
        store.write(key="small.txt", content="only inline blobs so far")
    settings = _settings(postgres_url)
    assert settings["blob_url"] == s3_bucket_url.url
    prefix = s3_bucket_url.url.removeprefix(f"s3://{s3_bucket_url.server.bucket}/")
    assert _names(s3_bucket_url, prefix) == [f"{prefix}/{MARKER_NAME}"]
    bucket, _ = open_bucket(s3_bucket_url)
    marker = obstore.get(bucket, f"{prefix}/{MARKER_NAME}").bytes().to_bytes()
    assert settings["store_id"].encode() in marker


@pytest.mark.slow
def test_stores_made_at_once_agree_on_one_location(postgres_url: str, s3_bucket_url: S3Location) -> None:
    outcomes: list[object] = []

    def make() -> None:
        try:
            SharedToolResultStore(index_url=postgres_url, blob_url=s3_bucket_url.url).close()
            outcomes.append("opened")
        except Exception as error:  # reported by the assertion below
            outcomes.append(error)

    threads = [threading.Thread(target=make) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert outcomes == ["opened"] * 4
    assert set(_settings(postgres_url)) == {"store_id", "blob_url"}


@pytest.mark.slow
def test_a_location_holding_another_stores_blobs_is_refused(
    postgres_server: PostgresServer, postgres_url: str, s3_bucket_url: S3Location
) -> None:
    with SharedToolResultStore(index_url=postgres_url, blob_url=s3_bucket_url.url) as store:
        store.write(key="large.txt", content=LARGE)
    name = f"test_{uuid.uuid4().hex}"
    with psycopg.connect(postgres_server.url(), autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        with pytest.raises(BlobLocationError, match="holds the blobs of another casstore store"):
            SharedToolResultStore(index_url=postgres_server.url(name), blob_url=s3_bucket_url.url)
        assert "blob_url" not in _settings(postgres_server.url(name))  # nothing recorded for the refused location
    finally:
        with psycopg.connect(postgres_server.url(), autocommit=True) as admin:
            admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


@pytest.mark.slow
def test_an_index_that_recorded_no_location_takes_only_the_one_its_blobs_are_at(
    postgres_url: str, s3_bucket_url: S3Location
) -> None:
    with SharedToolResultStore(index_url=postgres_url, blob_url=s3_bucket_url.url) as store:
        reference = store.write(key="large.txt", content=LARGE)
    # As an index made before the location was recorded: no settings, no marker.
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        connection.execute("DELETE FROM store_settings")
    bucket, prefix = open_bucket(s3_bucket_url)
    obstore.delete(bucket, f"{prefix}/{MARKER_NAME}")
    typo = s3_bucket_url.url + "-typo"
    with pytest.raises(BlobLocationError, match=f"No casstore blobs at {typo}: .*its first one is not there"):
        SharedToolResultStore(index_url=postgres_url, blob_url=typo)
    assert "blob_url" not in _settings(postgres_url)
    with SharedToolResultStore(index_url=postgres_url, blob_url=s3_bucket_url.url) as store:
        assert store.read(reference) == LARGE
    assert _settings(postgres_url)["blob_url"] == s3_bucket_url.url


@pytest.mark.slow
def test_blobs_moved_on_purpose_are_recorded_after_their_marker_is_checked(
    postgres_url: str, s3_bucket_url: S3Location, tmp_path: Path
) -> None:
    with SharedToolResultStore(index_url=postgres_url, blob_url=s3_bucket_url.url) as store:
        reference = store.write(key="large.txt", content=LARGE)
    old = s3_bucket_url.url
    new = old + "-moved"
    bucket, prefix = open_bucket(s3_bucket_url)

    not_copied = _casstore("relocate-blobs", "--index", postgres_url, "--blobs", new, cwd=tmp_path)
    assert not_copied.returncode == 1 and f"copy every object under {old}" in not_copied.stderr, not_copied.stderr
    assert _settings(postgres_url)["blob_url"] == old  # nothing changed

    names = [meta["path"] for batch in obstore.list(bucket, prefix=prefix + "/") for meta in batch]
    for name in names:  # as `aws s3 sync` would copy them
        obstore.put(bucket, f"{prefix}-moved/{name.removeprefix(prefix + '/')}", obstore.get(bucket, name).bytes())
    moved = _casstore("relocate-blobs", "--index", postgres_url, "--blobs", new, cwd=tmp_path)
    assert moved.returncode == 0, moved.stderr
    assert new in moved.stdout and old in moved.stdout
    with SharedToolResultStore(index_url=postgres_url, blob_url=new) as store:
        assert store.read(reference) == LARGE
    with pytest.raises(BlobLocationError, match=f"this index's blobs are at {new}"):
        SharedToolResultStore(index_url=postgres_url, blob_url=old)
