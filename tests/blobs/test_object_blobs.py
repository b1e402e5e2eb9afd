"""
What `ObjectBlobs` does beyond the blob backend contract (tests/blobs/test_backend_contract.py), against a real S3
server (SeaweedFS), a local folder and memory: whether a write created its object, listing and removal by object name,
objects it did not write, concurrent writers, outages and its options.
"""

import multiprocessing
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import obstore
import pytest
from obstore.exceptions import AlreadyExistsError

from casstore.blobs.objects import ObjectBlobs, ObjectSizeMismatchError, object_name
from casstore.errors import StorageError
from tests.helpers import blake3_hex
from tests.servers import S3Location

WRITERS = 16
OUTAGE_LIMIT = 30.0


@pytest.fixture(params=["s3", "file", "memory"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, dict[str, str]]:
    """:returns: A URL with nothing under it yet, and its options."""
    if request.param == "s3":
        s3: S3Location = request.getfixturevalue("s3_bucket_url")
        return s3.url, s3.options
    if request.param == "file":
        return f"file://{tmp_path}/objects", {}
    return "memory://", {}


@pytest.fixture
def blobs(location: tuple[str, dict[str, str]]) -> Iterator[ObjectBlobs]:
    opened = ObjectBlobs(location[0], options=location[1])
    yield opened
    opened.close()


def test_a_write_says_whether_it_created_the_object(blobs: ObjectBlobs) -> None:
    frame = b"a frame \x00\xff" * 1000
    digest = blake3_hex(frame)
    assert blobs.write(digest, frame) is True
    assert blobs.write(digest, frame) is False  # already there: left alone
    assert blobs.read(digest) == frame


def test_an_absent_blob_is_named_by_its_object(blobs: ObjectBlobs) -> None:
    digest = blake3_hex(b"never written")
    with pytest.raises(FileNotFoundError, match=object_name(digest)):
        blobs.read(digest)


def test_listing_names_blobs_and_foreign_objects(blobs: ObjectBlobs) -> None:
    began = time.time()
    frames = {blake3_hex(text): text for text in (b"one", b"two two", b"three three three")}
    for digest, frame in frames.items():
        blobs.write(digest, frame)
    store = blobs._opened  # what ObjectBlobs never writes, put there by hand
    obstore.put(store, "notes/readme.txt", b"foreign")
    obstore.put(store, "blake3/zz/" + "0" * 62, b"not hex")
    listed = {item.name: item for item in blobs.objects()}
    assert set(listed) == {object_name(digest) for digest in frames} | {"notes/readme.txt", "blake3/zz/" + "0" * 62}
    for digest, frame in frames.items():
        item = listed[object_name(digest)]
        assert (item.digest, item.size) == (digest, len(frame))
        assert began - 5 <= item.last_modified <= time.time() + 5
    assert listed["notes/readme.txt"].digest is None
    assert listed["blake3/zz/" + "0" * 62].digest is None


def test_removal(blobs: ObjectBlobs) -> None:
    kept, removed = blake3_hex(b"kept"), blake3_hex(b"removed")
    blobs.write(kept, b"kept")
    blobs.write(removed, b"removed")
    obstore.put(blobs._opened, "stray", b"x")
    blobs.remove(removed)
    blobs.remove_name("stray")
    blobs.remove_name("stray")  # gone already: not an error
    assert not blobs.exists(removed)
    assert [item.digest for item in blobs.objects()] == [kept]
    assert blobs.write(removed, b"removed") is True  # and it can be written again


def test_existing_object_of_another_size_is_not_trusted(blobs: ObjectBlobs) -> None:
    digest = blake3_hex(b"the real frame")
    obstore.put(blobs._opened, object_name(digest), b"truncated")
    with pytest.raises(ObjectSizeMismatchError, match="9 bytes where 14"):
        blobs.write(digest, b"the real frame")
    assert blobs.read(digest) == b"truncated"  # left as it was


def test_malformed_digest_is_refused(blobs: ObjectBlobs) -> None:
    for digest in ("", "ab", "A" * 64, "../" + "a" * 61, "g" * 64):
        with pytest.raises(ValueError, match="64 lowercase hex"):
            blobs.read(digest)


def _write_once(location: tuple[str, dict[str, str]], digest: str, frame: bytes, barrier: Any, results: Any) -> None:
    """One writer process: its own ObjectBlobs, then all writers write at once."""
    try:
        blobs = ObjectBlobs(location[0], options=location[1])
        barrier.wait(60)
        results.put(("created" if blobs.write(digest, frame) else "found", ""))
    except BaseException as error:
        results.put(("error", f"{type(error).__name__}: {error}"))


@pytest.mark.slow
@pytest.mark.parametrize("location", ["s3", "file"], indirect=True)
def test_concurrent_writers_of_one_digest_leave_one_object(location: tuple[str, dict[str, str]]) -> None:
    url, options = location
    frame = b"written by sixteen processes at once\n" * 4096
    digest = blake3_hex(frame)
    # Not fork: this process runs obstore's threads. A fork server imports casstore once, not once per writer.
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["casstore.blobs.objects", __name__])
    barrier = context.Barrier(WRITERS)
    results = context.Queue()
    writers = [
        context.Process(target=_write_once, args=(location, digest, frame, barrier, results)) for _ in range(WRITERS)
    ]
    for writer in writers:
        writer.start()
    outcomes = [results.get(timeout=120) for _ in writers]
    for writer in writers:
        writer.join(30)
    assert [outcome for outcome in outcomes if outcome[0] == "error"] == []
    assert sorted(kind for kind, _ in outcomes) == ["created"] + ["found"] * (WRITERS - 1)
    blobs = ObjectBlobs(url, options=options)
    assert [(item.digest, item.size) for item in blobs.objects()] == [(digest, len(frame))]
    assert blobs.read(digest) == frame


def test_conflict_reported_as_exists_is_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    """S3 answers a conflicting concurrent conditional put with 409, which obstore reports as 'already exists'."""
    blobs = ObjectBlobs("memory://")
    real_put = obstore.put
    calls: list[str] = []

    def conflict_then_put(store: Any, path: str, data: bytes, **options: Any) -> Any:
        calls.append(path)
        if len(calls) == 1:
            raise AlreadyExistsError("409 ConditionalRequestConflict")
        return real_put(store, path, data, **options)

    monkeypatch.setattr(obstore, "put", conflict_then_put)
    digest = blake3_hex(b"frame")
    assert blobs.write(digest, b"frame") is True
    assert len(calls) == 2
    assert blobs.read(digest) == b"frame"


def test_exists_that_never_appears_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    blobs = ObjectBlobs("memory://")

    def always_conflict(store: Any, path: str, data: bytes, **options: Any) -> Any:
        raise AlreadyExistsError("409 ConditionalRequestConflict")

    monkeypatch.setattr(obstore, "put", always_conflict)
    with pytest.raises(StorageError, match="'already exists' 5 times"):
        blobs.write(blake3_hex(b"frame"), b"frame")


@pytest.mark.slow
def test_stopped_gateway_is_a_storage_error_then_recovers(s3_bucket_url: S3Location) -> None:
    blobs = ObjectBlobs(s3_bucket_url.url, options=s3_bucket_url.options)
    digest, other = blake3_hex(b"before"), blake3_hex(b"during")
    blobs.write(digest, b"before")
    calls: dict[str, Callable[[], object]] = {
        "write": lambda: blobs.write(other, b"during"),
        "read": lambda: blobs.read(digest),
        "look up": lambda: blobs.exists(digest),
        "list": lambda: list(blobs.objects()),
        "remove": lambda: blobs.remove(digest),
    }
    s3_bucket_url.server.stop_gateway()
    try:
        for operation, call in calls.items():
            began = time.monotonic()
            with pytest.raises(StorageError) as raised:
                call()
            assert time.monotonic() - began < OUTAGE_LIMIT, operation
            message = str(raised.value)
            assert message.startswith(f"The object store {s3_bucket_url.url} failed to {operation}"), message
            assert not isinstance(raised.value, FileNotFoundError)
    finally:
        s3_bucket_url.server.start_gateway()
    assert blobs.read(digest) == b"before"  # the same ObjectBlobs, no reconnecting by hand
    assert blobs.write(other, b"during") is True
    assert {item.digest for item in blobs.objects()} == {digest, other}


@pytest.mark.parametrize(
    "key",
    [
        "access_key_id",
        "secret_access_key",
        "session_token",
        "aws_access_key_id",
        "aws_secret_access_key",
        "AWS_SESSION_TOKEN",
        "token",
        "account_key",
        "azure_storage_account_key",
        "sas_token",
        "client_secret",
        "service_account_key",
        "google_application_credentials",
        "sse_customer_key_base64",
    ],
)
def test_credentials_in_options_are_refused(key: str) -> None:
    with pytest.raises(ValueError, match="come from the environment"):
        ObjectBlobs("s3://bucket/prefix", options={"endpoint": "http://127.0.0.1:1", key: "x"})


def test_timing_options_are_taken_and_checked(s3_bucket_url: S3Location) -> None:
    options = {**s3_bucket_url.options, "timeout": "5s", "connect_timeout": "1s", "max_retries": "1"}
    blobs = ObjectBlobs(s3_bucket_url.url, options={**options, "retry_timeout": "2.5"})
    blobs.write(blake3_hex(b"x"), b"x")
    assert blobs.read(blake3_hex(b"x")) == b"x"
    with pytest.raises(ValueError, match="numbers"):
        ObjectBlobs(s3_bucket_url.url, options={**options, "max_retries": "many"})


def test_unknown_option_is_a_storage_error() -> None:
    with pytest.raises(StorageError, match="Cannot open the object store s3://bucket/prefix"):
        ObjectBlobs("s3://bucket/prefix", options={"no_such_setting": "1"})


def test_local_stores_take_no_store_options(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="take no options such as endpoint"):
        ObjectBlobs(f"file://{tmp_path}", options={"endpoint": "http://127.0.0.1:1"})
    ObjectBlobs("memory://", options={"timeout": "1s"})
