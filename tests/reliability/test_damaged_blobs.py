"""Damaged blobs never read back as wrong bytes: every kind of damage is a `CorruptBlobError` naming the digest."""

import contextlib
import os
import random
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from casstore import (
    ContentAddressedToolResultStore,
    CorruptBlobError,
    IndexDamagedError,
    ReferenceNotFoundError,
    SchemaError,
)
from casstore.maintenance.checks import verify
from tests.helpers import blake3_hex, blob_files, inline_frame, replace_inline_frame

CONTENT = "def handler(event):\n    return event['body']\n" * 500
OTHER = "a different result entirely\n" * 800


def _flip_byte(data: bytes, position: int) -> bytes:
    return data[:position] + bytes([data[position] ^ 0x01]) + data[position + 1 :]


def _damage_file(root: Path, damage: Callable[[bytes], bytes]) -> None:
    (path,) = [p for p in blob_files(root) if p.name.startswith(blake3_hex(CONTENT.encode())[2:])]
    path.write_bytes(damage(path.read_bytes()))


def _damage_inline(root: Path, damage: Callable[[bytes], bytes]) -> None:
    digest = blake3_hex(CONTENT.encode())
    replace_inline_frame(root, digest, damage(inline_frame(root, digest)))


DAMAGES: dict[str, Callable[[bytes], bytes]] = {
    "flip a byte in the header": lambda data: _flip_byte(data, 5),
    "flip a byte in the middle": lambda data: _flip_byte(data, len(data) // 2),
    "flip the last byte": lambda data: _flip_byte(data, len(data) - 1),
    "truncate": lambda data: data[: len(data) // 2],
    "truncate to nothing": lambda data: b"",
    "append garbage": lambda data: data + b"garbage",
    "random bytes": lambda data: os.urandom(len(data)),
}


@pytest.mark.parametrize("inline_max", [0, 1 << 20], ids=["file", "inline"])
@pytest.mark.parametrize("damage", DAMAGES.values(), ids=DAMAGES.keys())
def test_damaged_blobs_raise_corrupt_blob_error(
    store_root: Path, inline_max: int, damage: Callable[[bytes], bytes]
) -> None:
    with ContentAddressedToolResultStore(store_root, inline_max=inline_max) as store:
        reference = store.write(key="handler.py", content=CONTENT)
        healthy = store.write(key="other.txt", content=OTHER)
        (_damage_file if inline_max == 0 else _damage_inline)(store_root, damage)
        try:
            read_back = store.read(reference)
        except CorruptBlobError as error:
            assert blake3_hex(CONTENT.encode()) in str(error)
            assert isinstance(error, OSError)
        else:  # only damage that leaves the frame's content intact may read back, and then exactly
            assert read_back == CONTENT
            assert damage is DAMAGES["append garbage"]
        assert store.read(healthy) == OTHER


def test_a_deleted_blob_file_raises_corrupt_blob_error(file_store: ContentAddressedToolResultStore) -> None:
    reference = file_store.write(key="a.txt", content=CONTENT)
    for path in blob_files(file_store.root):
        path.unlink()
    with pytest.raises(CorruptBlobError, match="missing"):
        file_store.read(reference)


def test_a_blob_replaced_by_another_blobs_bytes_raises(file_store: ContentAddressedToolResultStore) -> None:
    reference = file_store.write(key="a.txt", content=CONTENT)
    file_store.write(key="b.txt", content=OTHER)
    target = next(p for p in blob_files(file_store.root) if p.name.startswith(blake3_hex(CONTENT.encode())[2:]))
    donor = next(p for p in blob_files(file_store.root) if p != target)
    target.write_bytes(donor.read_bytes())
    with pytest.raises(CorruptBlobError):
        file_store.read(reference)


def test_a_deleted_blob_row_leaves_its_reference_unreadable(store: ContentAddressedToolResultStore) -> None:
    reference = store.write(key="a.txt", content=CONTENT)
    with contextlib.closing(sqlite3.connect(store.root / "index.db")) as connection, connection:
        connection.execute("DELETE FROM blobs")  # and with it the digest its writes named (they name it by id)
    with pytest.raises(ReferenceNotFoundError):
        store.read(reference)


def test_verify_checks_what_read_reads_when_a_file_blob_has_a_leftover_frame(
    file_store: ContentAddressedToolResultStore,
) -> None:
    """
    A damaged index where a blob kept in a file also has a frame row: its row says where it is (`stored_in`), so
    `read` and `verify` both read the file, and a damaged file is damage to both.
    """
    reference = file_store.write(key="a.txt", content=CONTENT)
    with contextlib.closing(sqlite3.connect(file_store.root / "index.db")) as connection, connection:
        connection.execute(
            "INSERT INTO blob_frames (blob_id, frame) SELECT id, X'00112233' FROM blobs WHERE digest = ?",
            (blake3_hex(CONTENT.encode()),),
        )
    assert file_store.read(reference) == CONTENT
    assert verify(file_store).ok
    (path,) = blob_files(file_store.root)
    path.write_bytes(b"\x00\x11\x22\x33")
    with pytest.raises(CorruptBlobError, match="not a zstd frame"):
        file_store.read(reference)
    report = verify(file_store)
    assert [digest for digest, _ in report.corrupt] == [blake3_hex(CONTENT.encode())]
    assert not report.ok


def test_writing_lost_content_again_heals_its_blob(file_store: ContentAddressedToolResultStore) -> None:
    reference = file_store.write(key="a.txt", content=CONTENT)
    for path in blob_files(file_store.root):
        path.unlink()
    assert file_store.write(key="again.txt", content=CONTENT) == reference
    assert file_store.read(reference) == CONTENT


def _fill(root: Path, count: int) -> dict[str, str]:
    with ContentAddressedToolResultStore(root, inline_max=4096) as store:
        return {
            store.write(key=f"{n}.txt", content=f"result {n}\n" * (10 + 40 * (n % 13))): f"result {n}\n"
            * (10 + 40 * (n % 13))
            for n in range(count)
        }


def test_a_deleted_index_makes_every_reference_unknown(store_root: Path) -> None:
    written = _fill(store_root, 30)
    (store_root / "index.db").unlink()
    with ContentAddressedToolResultStore(store_root) as store:
        for reference in written:
            with pytest.raises(ReferenceNotFoundError):
                store.read(reference)


def test_an_index_with_a_damaged_header_is_refused_as_damaged_and_left_as_it_is(store_root: Path) -> None:
    _fill(store_root, 10)
    index = store_root / "index.db"
    data = bytearray(index.read_bytes())
    data[0:16] = b"garbage garbage!"
    index.write_bytes(bytes(data))
    with pytest.raises(IndexDamagedError, match="Recovery") as refused:
        ContentAddressedToolResultStore(store_root)
    assert isinstance(refused.value, CorruptBlobError) and isinstance(refused.value, SchemaError)
    assert index.read_bytes() == bytes(data)


@pytest.mark.parametrize("seed", range(12))
def test_a_damaged_index_never_returns_wrong_bytes(store_root: Path, seed: int) -> None:
    written = _fill(store_root, 150)
    index = store_root / "index.db"
    data = bytearray(index.read_bytes())
    chooser = random.Random(seed)
    page = 4096
    for _ in range(3):  # garble three random pages after the header page
        start = chooser.randrange(1, len(data) // page) * page
        data[start : start + page] = chooser.randbytes(page)
    index.write_bytes(bytes(data))
    try:
        store = ContentAddressedToolResultStore(store_root)
    except SchemaError:
        return  # refusing to open a damaged index is a correct answer
    with store:
        for reference, content in written.items():
            with contextlib.suppress(CorruptBlobError, ReferenceNotFoundError):  # an error is fine; wrong bytes are not
                assert store.read(reference) == content
