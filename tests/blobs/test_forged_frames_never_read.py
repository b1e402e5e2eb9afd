"""
Valid zstd frames of the wrong content never read back: only the BLAKE3 check on read can tell them apart.

Each forgery here keeps every other check happy: the frame is a well-formed zstd frame that declares (and decompresses
to) exactly as many bytes as the blob holds, with or without zstd's own checksum, which is correct for the forged
content. What is left to notice the swap is the comparison of the content's BLAKE3 digest with the one the blob is
keyed by, so every read must raise `CorruptBlobError` naming the digest, and `verify` must report it corrupt.
"""

import random
import sqlite3
import tempfile
from contextlib import closing
from pathlib import Path

import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from casstore import ContentAddressedToolResultStore, CorruptBlobError
from casstore.blobs import learning as learning_module
from casstore.maintenance.checks import verify
from tests.helpers import blake3_hex, replace_inline_frame

FORGERY_SETTINGS = settings(max_examples=40, deadline=None)


def _frame(data: bytes, *, checksum: bool) -> bytes:
    """A valid zstd frame of `data` that declares its content size, as casstore's own frames do."""
    frame: bytes = zstandard.ZstdCompressor(write_checksum=checksum, write_content_size=True).compress(data)
    assert zstandard.frame_content_size(frame) == len(data)
    assert zstandard.ZstdDecompressor().decompress(frame) == data
    return frame


def _blob_path(root: Path, digest: str) -> Path:
    return root / "blobs" / digest[:2] / f"{digest[2:]}.zst"


def _stored_in(root: Path, digest: str) -> str:
    with closing(sqlite3.connect(root / "index.db")) as connection:
        row = connection.execute("SELECT stored_in FROM blobs WHERE digest = ?", (digest,)).fetchone()
    assert row is not None, f"no blob row for {digest}"
    return str(row[0])


def _assert_never_read_back(store: ContentAddressedToolResultStore, reference: str, digest: str) -> None:
    """Every read raises `CorruptBlobError` naming `digest` (a second read too: nothing is cached), `verify` agrees."""
    for attempt in range(2):
        with pytest.raises(CorruptBlobError) as raised:
            store.read(reference)
        assert digest in str(raised.value), f"read {attempt}: the error does not name the blob: {raised.value}"
        assert raised.value.digest == digest
        assert not raised.value.missing, "a forged blob is damaged, not missing"
    report = verify(store)
    assert digest in [corrupt for corrupt, _ in report.corrupt], f"verify did not report {digest}: {report}"
    assert not report.ok


@st.composite
def _same_length_pairs(draw: st.DrawFn) -> tuple[bytes, bytes]:
    """Two different contents of one length: the original, and a forgery that passes every size check."""
    original = draw(st.binary(min_size=1, max_size=3000))
    forged = draw(
        st.one_of(
            st.binary(min_size=len(original), max_size=len(original)),  # anything of that length
            st.integers(0, len(original) - 1).map(  # one byte off
                lambda at: original[:at] + bytes([original[at] ^ 0x01]) + original[at + 1 :]
            ),
        ).filter(lambda candidate: candidate != original)
    )
    return original, forged


@pytest.mark.slow
@FORGERY_SETTINGS
@given(pair=_same_length_pairs(), checksum=st.booleans(), as_text=st.booleans())
def test_an_inline_frame_replaced_by_a_valid_frame_of_other_content_is_corrupt(
    pair: tuple[bytes, bytes], checksum: bool, as_text: bool
) -> None:
    original, forged = pair
    content: str | bytes = original.hex() if as_text else original  # text: ASCII, so the forgery is still UTF-8
    data = content.encode() if isinstance(content, str) else content
    forged_data = forged.hex().encode() if as_text else forged
    assert len(forged_data) == len(data) and forged_data != data
    digest = blake3_hex(data)
    with tempfile.TemporaryDirectory() as folder, ContentAddressedToolResultStore(folder, inline_max=1 << 20) as store:
        root = Path(folder)
        reference = store.write(key="result.txt", content=content)
        healthy = store.write(key="healthy.txt", content="another result, left alone")
        assert _stored_in(root, digest) == "index"
        replace_inline_frame(root, digest, _frame(forged_data, checksum=checksum))
        _assert_never_read_back(store, reference, digest)
        assert store.read(healthy) == "another result, left alone"


@pytest.mark.slow
@FORGERY_SETTINGS
@given(pair=_same_length_pairs(), checksum=st.booleans())
def test_a_blob_file_rewritten_as_a_valid_frame_of_other_content_is_corrupt(
    pair: tuple[bytes, bytes], checksum: bool
) -> None:
    original, forged = pair
    digest = blake3_hex(original)
    with tempfile.TemporaryDirectory() as folder, ContentAddressedToolResultStore(folder, inline_max=0) as store:
        root = Path(folder)
        reference = store.write(key="result.bin", content=original)
        assert _stored_in(root, digest) == "file"
        path = _blob_path(root, digest)
        assert path.is_file()
        path.write_bytes(_frame(forged, checksum=checksum))
        _assert_never_read_back(store, reference, digest)


@pytest.mark.parametrize("inline_max", [0, 1 << 20], ids=["file", "inline"])
@pytest.mark.parametrize("checksum", [True, False], ids=["checksum", "no-checksum"])
def test_a_realistic_forgery_of_a_text_result_is_corrupt(store_root: Path, inline_max: int, checksum: bool) -> None:
    """A tool result swapped for a plausible one of the same length: 'ok' lines where one said 'FAILED'."""
    honest = "".join(f"test_case_{n} ... {'FAILED' if n == 7 else 'ok    '}\n" for n in range(200))
    forged = honest.replace("FAILED", "ok    ")
    assert len(forged) == len(honest) and forged != honest
    digest = blake3_hex(honest.encode())
    with ContentAddressedToolResultStore(store_root, inline_max=inline_max) as store:
        reference = store.write(key="tests.log", content=honest)
        frame = _frame(forged.encode(), checksum=checksum)
        if inline_max:
            replace_inline_frame(store_root, digest, frame)
        else:
            _blob_path(store_root, digest).write_bytes(frame)
        _assert_never_read_back(store, reference, digest)


def test_two_blob_files_of_the_same_size_swapped_are_both_corrupt(file_store: ContentAddressedToolResultStore) -> None:
    root = file_store.root
    # Incompressible contents of one length: the two files are the same size too, so only the digest tells them apart.
    first, second = random.Random(1).randbytes(4096), random.Random(2).randbytes(4096)
    references = {
        file_store.write(key="one.bin", content=first): first,
        file_store.write(key="two.bin", content=second): second,
    }
    digests = [blake3_hex(first), blake3_hex(second)]
    paths = [_blob_path(root, digest) for digest in digests]
    frames = [path.read_bytes() for path in paths]
    assert frames[0] != frames[1] and len(frames[0]) == len(frames[1])
    paths[0].write_bytes(frames[1])
    paths[1].write_bytes(frames[0])
    for reference, digest in zip(references, digests, strict=True):
        with pytest.raises(CorruptBlobError) as raised:
            file_store.read(reference)
        assert raised.value.digest == digest and digest in str(raised.value)
    report = verify(file_store)
    assert sorted(corrupt for corrupt, _ in report.corrupt) == sorted(digests)
    assert not report.ok
    # Swapped back, both read back exactly: the store kept nothing of the forgery.
    paths[0].write_bytes(frames[0])
    paths[1].write_bytes(frames[1])
    assert {reference: file_store.read(reference) for reference in references} == references
    assert verify(file_store).ok


@pytest.mark.parametrize("encoding", ["plain", "dictionary", "delta"])
def test_bytes_appended_after_a_frame_make_it_corrupt(
    store_root: Path, encoding: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The frame alone still decodes to the right content, so the read would be right; but the stored bytes are not
    # what casstore wrote, and `verify` must say so (a second frame appended, or any trailing garbage).
    monkeypatch.setattr(learning_module, "TRAIN_AFTER", 24)
    rng = random.Random(7)
    with ContentAddressedToolResultStore(store_root) as store:
        records = [
            f'{{"path": "/src/pkg_{rng.randrange(40)}/mod_{n}.py", "size": {rng.randrange(99999)}, "mode": "rw"}}'
            for n in range(80)
        ]
        for number, record in enumerate(records):
            store.write(key=f"{number}_stat_call_{number}.json", content=record)
        listing = "\n".join(f"{rng.randrange(10**6):06d} src/module_{n}.py passed" for n in range(200))
        store.write(key="1_pytest_call_1.txt", content=listing)
        store.write(key="2_pytest_call_2.txt", content=listing + "\none more line")
        with closing(sqlite3.connect(store_root / "index.db")) as connection:
            digest, frame, reference = connection.execute(
                "SELECT b.digest, f.frame, w.reference FROM blobs b JOIN blob_frames f ON f.blob_id = b.id "
                "JOIN writes w ON w.digest = b.digest WHERE b.encoding = ? ORDER BY b.id DESC LIMIT 1",
                (encoding,),
            ).fetchone()
        appended = frame + _frame(b"more", checksum=False)
        replace_inline_frame(store_root, digest, appended)
        _assert_never_read_back(store, reference, digest)
        replace_inline_frame(store_root, digest, frame + b"\x00" * 7)
        _assert_never_read_back(store, reference, digest)
        replace_inline_frame(store_root, digest, frame)
        assert store.read(reference)  # the frame itself was fine all along
