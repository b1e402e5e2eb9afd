"""
How a delta frame is decoded: as the second frame of a zstd content-dictionary chain whose first
frame holds the base's content in raw blocks, on a context the thread keeps (a backend whose chains do not load
content binds a context to the base instead). Either way the frame decodes to its content or raises
`CorruptBlobError`, never other bytes, whatever the base holds: also a base that starts with zstd's dictionary magic,
which zstd would take for a trained dictionary were it not loaded as raw content.
"""

import contextlib
import random
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from casstore import ContentAddressedToolResultStore, CorruptBlobError
from casstore.blobs import frames as frames_module
from casstore.blobs.frames import FrameCodec, FrameDictionary
from casstore.maintenance.checks import verify
from casstore.references import content_digest

DICTIONARY_MAGIC = b"\x37\xa4\x30\xec"
RAW_BLOCK = 128 * 1024
# Sizes around the raw blocks' limit, where the first frame of a chain has one block, one full one, or several.
BLOCK_EDGES = (0, 1, 1023, RAW_BLOCK - 1, RAW_BLOCK, RAW_BLOCK + 1, 2 * RAW_BLOCK + 17)


def _text(size: int, seed: int) -> bytes:
    rng = random.Random(seed)
    words = [bytes(rng.choices(b"abcdefghijklmnopqrstuvwxyz_/.", k=rng.randint(2, 9))) for _ in range(400)]
    out = bytearray()
    while len(out) < size:
        out += rng.choice(words) + (b"\n" if rng.random() < 0.1 else b" ")
    return bytes(out[:size])


def _edited(base: bytes, seed: int) -> bytes:
    """A near-copy of `base`: a line changed in the middle, one added at the end."""
    middle = len(base) // 2
    return base[:middle] + f"[edit {seed}]".encode() + base[middle + 3 :] + b"\nsummary: 1 failed\n"


@pytest.mark.parametrize("size", BLOCK_EDGES)
def test_the_raw_frame_that_heads_a_chain_is_a_zstd_frame_of_exactly_its_content(size: int) -> None:
    content = _text(size, seed=size)
    frame = frames_module._raw_frame(content)
    assert zstandard.frame_content_size(frame) == size
    assert zstandard.ZstdDecompressor().decompress(frame) == content


@pytest.mark.parametrize("size", BLOCK_EDGES)
def test_a_base_in_memory_is_kept_once_as_the_frame_its_deltas_decode_first(size: int) -> None:
    content = _text(size, seed=size)
    base = FrameDictionary.base(content_digest(content), content)
    assert bytes(base.content) == content
    if size <= RAW_BLOCK and frames_module._CHAINS_LOAD_CONTENT:
        # The content is a view of the frame, not a second copy, and the frame is what a chain decodes first.
        assert isinstance(base.content, memoryview) and base.content.obj is base.framed
        assert base.framed is not None and zstandard.ZstdDecompressor().decompress(base.framed) == content
    else:
        assert base.framed is None and base.content is content
    # Content something else holds too (a write's, which the learner may keep as a sample) is kept as it is.
    shared = FrameDictionary.base(content_digest(content), content, frame=False)
    assert shared.framed is None and shared.content is content


def test_a_delta_against_a_base_in_memory_decodes_without_framing_it_again(monkeypatch: pytest.MonkeyPatch) -> None:
    base = _text(20_000, seed=5)
    data = _edited(base, 5)
    codec = FrameCodec(compression_level=3)
    dictionary = FrameDictionary.base(content_digest(base), base)
    frame = codec.encode(data, dictionary=dictionary)

    def framed_again(content: bytes) -> bytes:
        raise AssertionError("the base was framed again")

    monkeypatch.setattr(frames_module, "_raw_frame", framed_again)
    assert codec.decode(content_digest(data), len(data), frame, dictionary=dictionary) == data


def test_where_deltas_are_not_decoded_as_chains_a_base_is_kept_as_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    # python-zstandard's cffi backend (PyPy) takes a dictionary's data as bytes only: a base must not reach it as a
    # view, neither to compress a delta nor to decode one.
    real = zstandard.ZstdCompressionDict

    def bytes_only(data: object, *args: Any, **kwargs: Any) -> zstandard.ZstdCompressionDict:
        assert isinstance(data, bytes), f"a dictionary's data as {type(data).__name__}"
        return real(data, *args, **kwargs)

    monkeypatch.setattr(frames_module, "_CHAINS_LOAD_CONTENT", False)
    monkeypatch.setattr(zstandard, "ZstdCompressionDict", bytes_only)
    base = _text(20_000, seed=6)
    data = _edited(base, 6)
    codec = FrameCodec(compression_level=3)
    dictionary = FrameDictionary.base(content_digest(base), base)
    frame = codec.encode(data, dictionary=dictionary)
    assert codec.decode(content_digest(data), len(data), frame, dictionary=dictionary) == data


@settings(max_examples=40, deadline=None)
@given(
    size=st.one_of(st.sampled_from(BLOCK_EDGES[2:]), st.integers(min_value=1024, max_value=40_000)),
    seed=st.integers(min_value=0, max_value=10**6),
    magic=st.booleans(),
    chains=st.booleans(),
)
def test_a_delta_decodes_to_its_content_with_its_base_and_to_no_other_bytes_with_another(
    size: int, seed: int, magic: bool, chains: bool
) -> None:
    base = (DICTIONARY_MAGIC if magic else b"") + _text(size, seed)
    data = _edited(base, seed)
    other = _edited(_text(size, seed + 1), seed)
    codec = FrameCodec(compression_level=3)
    digest = content_digest(data)
    frame = codec.encode(data, dictionary=FrameDictionary.base(content_digest(base), base))
    with pytest.MonkeyPatch.context() as patch:
        # The chain (C backend) and the context bound to the base (other backends, or a base with the magic).
        patch.setattr(frames_module, "_CHAINS_LOAD_CONTENT", chains)
        assert codec.decode(digest, len(data), frame, dictionary=FrameDictionary.base(content_digest(base), base)) == (
            data
        )
        for wrong in (FrameDictionary.base(content_digest(other), other), FrameDictionary.base("0" * 64, base[:-1])):
            with pytest.raises(CorruptBlobError):
                codec.decode(digest, len(data), frame, dictionary=wrong)


def test_a_forged_delta_frame_raises_corrupt_blob_error_through_the_chain() -> None:
    base = _text(20_000, seed=3)
    data = _edited(base, 3)
    codec = FrameCodec(compression_level=3)
    dictionary = FrameDictionary.base(content_digest(base), base)
    frame = bytearray(codec.encode(data, dictionary=dictionary))
    frame[len(frame) // 2] ^= 0xFF
    with pytest.raises(CorruptBlobError):
        codec.decode(content_digest(data), len(data), bytes(frame), dictionary=dictionary)


def test_a_base_that_starts_with_zstds_dictionary_magic_is_stored_as_one_and_read_back(tmp_path: Path) -> None:
    # A tool result that is itself a zstd dictionary file, then a version of it with one more line: the second is a
    # delta against the first, and both read back exactly, from a store that has neither in memory.
    root = tmp_path / "store"
    base = DICTIONARY_MAGIC + _text(30_000, seed=7)
    versions = [base, _edited(base, 1), _edited(base, 2)]
    with ContentAddressedToolResultStore(root) as store:
        references = [store.write(key=f"{n}_read_file_call_{n}.bin", content=data) for n, data in enumerate(versions)]
    with contextlib.closing(sqlite3.connect(root / "index.db")) as connection:
        encodings = dict(connection.execute("SELECT digest, encoding FROM blobs").fetchall())
    assert [encodings[content_digest(data)] for data in versions] == ["plain", "delta", "delta"]
    with ContentAddressedToolResultStore(root) as store:
        assert [store.read(reference) for reference in reversed(references)] == list(reversed(versions))
        assert verify(store.repository).ok
