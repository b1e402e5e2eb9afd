"""Damaged or missing blobs read as `CorruptBlobError`, never as other bytes, and `verify` reports them."""

import os

import pytest
import zstandard

from casstore import CorruptBlobError
from casstore.maintenance.checks import verify
from tests.helpers import blake3_hex
from tests.store_backends import Backend, StoreFactory, where_blobs_are


def _frame(data: bytes) -> bytes:
    """A valid zstd frame of `data` that declares its size and carries a checksum, as casstore's frames do."""
    frame: bytes = zstandard.ZstdCompressor(write_checksum=True, write_content_size=True).compress(data)
    return frame


@pytest.mark.parametrize("where", ["index", "elsewhere"])
@pytest.mark.parametrize("as_text", [True, False])
def test_a_forged_frame_of_other_same_length_content_reads_as_corrupt(
    backend: Backend, open_store: StoreFactory, where: str, as_text: bool
) -> None:
    original = os.urandom(3000).hex().encode()
    forged = original[:1000] + bytes([original[1000] ^ 0x01]) + original[1001:]  # one byte off
    store = open_store(inline_max=65536 if where == "index" else 0)
    reference = store.write(key="r.txt", content=original.decode() if as_text else original)
    digest = blake3_hex(original)
    if where == "index":
        assert where_blobs_are(backend) == {digest: "index"}
        backend.execute(
            "UPDATE blob_frames SET frame = ? WHERE blob_id = (SELECT id FROM blobs WHERE digest = ?)",
            (_frame(forged), digest),
        )
    else:
        assert where_blobs_are(backend) == {digest: backend.stored_elsewhere}
        backend.put_raw(backend.blob_name(digest), _frame(forged))
    for reader in (store, open_store()):  # the writer, and a store that never saw the content
        for _attempt in range(2):  # nothing is cached
            with pytest.raises(CorruptBlobError) as raised:
                reader.read(reference)
            assert raised.value.digest == digest and digest in str(raised.value)
            assert not raised.value.missing
    report = verify(store)
    assert [corrupt for corrupt, _ in report.corrupt] == [digest]
    assert not report.ok


def test_a_blob_removed_behind_the_stores_back_reads_as_missing(backend: Backend, open_store: StoreFactory) -> None:
    store = open_store(inline_max=0)
    content = os.urandom(10_000)
    reference = store.write(key="r.bin", content=content)
    digest = blake3_hex(content)
    backend.remove_raw(backend.blob_name(digest))
    with pytest.raises(CorruptBlobError) as raised:
        open_store().read(reference)
    assert raised.value.missing and raised.value.digest == digest
    report = verify(store)
    assert (report.missing, report.ok) == ([digest], False)
