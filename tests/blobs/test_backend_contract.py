"""
The `BlobBackend` contract , one suite for every backend: the blob folder (`BlobDirectory`) and
object storage (`ObjectBlobs` on a real S3 server, on a `file://` folder and in memory).

Each fixture is typed as `BlobBackend`, so mypy checks that both classes satisfy the protocol; the tests check what
the blob layer relies on at run time.
"""

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import obstore
import pytest

from casstore.blobs.backend import BlobBackend
from casstore.blobs.files import BlobDirectory
from casstore.blobs.objects import ObjectBlobs, object_name
from casstore.errors import StorageError, StoreClosedError
from tests.helpers import blake3_hex
from tests.servers import S3Location


@dataclass
class Opened:
    """A backend, how to put a file or object beside its blobs by hand, and what it says of itself."""

    backend: BlobBackend
    put_foreign: Callable[[str, bytes], None]
    """Write a file or object at a path relative to the backend's folder or prefix, bypassing the backend."""
    stored_in: str
    rows_imply_presence: bool


@pytest.fixture(params=["directory", "s3", "file", "memory"])
def opened(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opened]:
    if request.param == "directory":
        folder = tmp_path / "blobs"
        directory = BlobDirectory(folder, durable=False)

        def put_file(name: str, data: bytes) -> None:
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_bytes(data)

        yield Opened(directory, put_file, "file", False)
        directory.close()
        return
    if request.param == "s3":
        s3: S3Location = request.getfixturevalue("s3_bucket_url")
        objects = ObjectBlobs(s3.url, options=s3.options)
    elif request.param == "file":
        objects = ObjectBlobs(f"file://{tmp_path}/objects")
    else:
        objects = ObjectBlobs("memory://")

    def put_object(name: str, data: bytes) -> None:
        obstore.put(objects._opened, name, data)

    yield Opened(objects, put_object, "object", True)
    objects.close()


def _frame(text: bytes) -> tuple[str, bytes]:
    return blake3_hex(text), b"frame of " + text


@pytest.mark.slow
def test_what_the_backend_says_of_itself(opened: Opened) -> None:
    assert opened.backend.stored_in == opened.stored_in
    assert opened.backend.rows_imply_presence is opened.rows_imply_presence
    assert type(opened.backend).stored_in == opened.stored_in  # a class attribute: the layer reads it once


def test_write_read_exists(opened: Opened) -> None:
    backend = opened.backend
    digest, frame = _frame(b"one")
    assert not backend.exists(digest)
    backend.write(digest, frame)
    assert backend.exists(digest)
    assert backend.read(digest) == frame
    backend.write(digest, frame)  # again: harmless, the same bytes stay
    assert backend.read(digest) == frame


def test_an_absent_blob_reads_as_file_not_found(opened: Opened) -> None:
    digest, _ = _frame(b"never written")
    with pytest.raises(FileNotFoundError) as raised:
        opened.backend.read(digest)
    assert not isinstance(raised.value, StorageError)  # an absence, not an outage
    assert not opened.backend.exists(digest)


def test_remove(opened: Opened) -> None:
    backend = opened.backend
    (kept, kept_frame), (removed, removed_frame) = _frame(b"kept"), _frame(b"removed")
    backend.write(kept, kept_frame)
    backend.write(removed, removed_frame)
    backend.remove(removed)
    backend.remove(removed)  # gone already: not an error
    backend.remove(blake3_hex(b"never written"))
    assert not backend.exists(removed)
    with pytest.raises(FileNotFoundError):
        backend.read(removed)
    assert [found.digest for found in backend.files()] == [kept]
    backend.write(removed, removed_frame)  # and it can be written again
    assert backend.read(removed) == removed_frame


def test_files_lists_every_blob_with_its_digest_and_size(opened: Opened) -> None:
    began = time.time()
    frames = dict(_frame(text) for text in (b"a", b"bb", b"ccc", b"dddd"))
    for digest, frame in frames.items():
        opened.backend.write(digest, frame)
    listed = list(opened.backend.files())
    assert sorted((found.digest or "", found.size) for found in listed) == sorted(
        (digest, len(frame)) for digest, frame in frames.items()
    )
    assert all(began - 5 <= found.mtime <= time.time() + 5 for found in listed)


def test_files_never_lists_what_lies_outside_the_blob_area(opened: Opened) -> None:
    digest, frame = _frame(b"a blob")
    opened.backend.write(digest, frame)
    name = object_name(digest)  # blake3/<2>/<62>
    outside = [
        "notes/readme.txt",
        "readme.txt",
        f"other/{name}",
        f"backup/{digest[:2]}/{digest[2:]}",
        f"backup/{digest[:2]}/{digest[2:]}.zst",
    ]
    for path in outside:
        opened.put_foreign(path, b"not casstore's")
    listed = list(opened.backend.files())
    assert [found.digest for found in listed] == [digest]
    # gc's removal of strays goes through `files`: what it never lists, it never removes.
    for found in listed:
        assert found.size == len(frame)


def test_a_misnamed_file_in_the_blob_area_is_listed_as_a_stray_and_removed(opened: Opened) -> None:
    digest, frame = _frame(b"a blob")
    opened.backend.write(digest, frame)
    stray = "blake3/zz/" + "0" * 62 if opened.stored_in == "object" else ".tmp-leftover"
    opened.put_foreign(stray if opened.stored_in == "object" else f"{digest[:2]}/{stray}", b"left over")
    listed = list(opened.backend.files())
    strays = [found for found in listed if found.digest is None]
    assert [found.size for found in strays] == [len(b"left over")]
    opened.backend.remove_stray(strays[0])
    opened.backend.remove_stray(strays[0])  # gone already: not an error
    assert [found.digest for found in opened.backend.files()] == [digest]
    # A blob listed by `files` is removed by `remove_stray` as well (a blob no row points at).
    (blob,) = opened.backend.files()
    opened.backend.remove_stray(blob)
    assert not opened.backend.exists(digest)
    assert list(opened.backend.files()) == []


def test_a_closed_backend_refuses_calls(opened: Opened) -> None:
    digest, frame = _frame(b"x")
    opened.backend.write(digest, frame)
    opened.backend.close()
    calls: dict[str, Callable[[], object]] = {
        "write": lambda: opened.backend.write(digest, frame),
        "read": lambda: opened.backend.read(digest),
        "exists": lambda: opened.backend.exists(digest),
        "remove": lambda: opened.backend.remove(digest),
        "files": lambda: list(opened.backend.files()),
    }
    for name, call in calls.items():
        with pytest.raises(StoreClosedError):
            call()
            pytest.fail(f"{name} ran on a closed backend")
    opened.backend.close()  # twice: harmless
