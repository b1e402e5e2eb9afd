"""
`durable=True` fsyncs a blob file and its folder before the write returns; the default does not fsync the file.

`os.fsync` is wrapped to record, at the moment of each call, which path the descriptor is open on (through
`/proc/self/fd`) and its inode, so the fsynced temporary file can be matched with the blob file it was renamed to.
SQLite's `synchronous=FULL` is per connection, and no public API reports the store's connection settings, so it is not
checked here.
"""

import os
import random
from dataclasses import dataclass
from pathlib import Path

import pytest

from casstore import ContentAddressedToolResultStore
from tests.helpers import blake3_hex

pytestmark = pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc/self/fd to name descriptors")

CONTENT = random.Random(7).randbytes(100_000)  # incompressible: a file blob with inline_max=0 in any case


@dataclass(frozen=True)
class _Fsync:
    path: Path
    inode: int
    is_directory: bool


def _record_fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[_Fsync]:
    calls: list[_Fsync] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        status = os.fstat(fd)
        calls.append(
            _Fsync(
                path=Path(os.readlink(f"/proc/self/fd/{fd}")),
                inode=status.st_ino,
                is_directory=os.path.isdir(f"/proc/self/fd/{fd}"),
            )
        )
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return calls


def _blob_file(root: Path, content: bytes) -> Path:
    digest = blake3_hex(content)
    return root / "blobs" / digest[:2] / f"{digest[2:]}.zst"


def test_a_durable_write_fsyncs_the_blob_file_and_its_folder(store_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with ContentAddressedToolResultStore(store_root, inline_max=0, durable=True) as store:
        calls = _record_fsyncs(monkeypatch)
        reference = store.write(key="large.bin", content=CONTENT)
        monkeypatch.undo()
        assert store.read(reference) == CONTENT
    blob_file = _blob_file(store_root, CONTENT)
    fanout = blob_file.parent.resolve()
    file_inode = blob_file.stat().st_ino

    file_syncs = [n for n, call in enumerate(calls) if not call.is_directory and call.inode == file_inode]
    assert file_syncs, f"the blob file {blob_file.name} was never fsynced; fsyncs: {calls}"
    # The file was fsynced under its temporary name, before the rename made it the blob.
    assert all(calls[n].path.parent == fanout and calls[n].path.name.startswith(".tmp-") for n in file_syncs), calls
    folder_syncs = [n for n, call in enumerate(calls) if call.is_directory and call.path == fanout]
    assert folder_syncs, f"the fan-out folder {fanout} was never fsynced; fsyncs: {calls}"
    # The folder is synced after the file (so after the rename that put the file's name in it).
    assert max(folder_syncs) > min(file_syncs), calls


def test_a_default_write_does_not_fsync_the_blob_file(store_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with ContentAddressedToolResultStore(store_root, inline_max=0) as store:
        calls = _record_fsyncs(monkeypatch)
        reference = store.write(key="large.bin", content=CONTENT)
        monkeypatch.undo()
        assert store.read(reference) == CONTENT
    blob_file = _blob_file(store_root, CONTENT)
    assert blob_file.is_file()
    blobs = (store_root / "blobs").resolve()
    assert not [call for call in calls if call.path.is_relative_to(blobs) or call.inode == blob_file.stat().st_ino], (
        f"a non-durable write fsynced inside the blob folder: {calls}"
    )
