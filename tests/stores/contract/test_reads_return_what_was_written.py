"""
What a store is given it gives back: the same bytes as the same type (text or binary), under a reference made
of the content's digest and the key's extension, to any store object on the same index.
"""

import os

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from casstore.stores.local import RepositoryToolResultStore
from tests.helpers import blake3_hex
from tests.store_backends import Backend, StoreFactory, blob_digests

PROPERTY_SETTINGS = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@PROPERTY_SETTINGS
@given(content=st.one_of(st.text(), st.binary()))
@example(content="")
@example(content=b"")
@example(content="\x00")
@example(content=b"\x00\xff")
@example(content="astral \U0001f600 \U00010348 and NUL \x00")
def test_read_returns_exactly_what_was_written(store: RepositoryToolResultStore, content: str | bytes) -> None:
    reference = store.write(key="result.txt", content=content)
    read_back = store.read(reference)
    assert read_back == content
    assert type(read_back) is type(content)


@PROPERTY_SETTINGS
@given(first=st.one_of(st.text(), st.binary()), second=st.one_of(st.text(), st.binary()))
def test_equal_content_shares_a_reference_and_a_blob(
    backend: Backend, store: RepositoryToolResultStore, first: str | bytes, second: str | bytes
) -> None:
    before = blob_digests(backend)  # hypothesis's examples share the store: it may hold these already
    reference_1 = store.write(key="a.txt", content=first)
    reference_2 = store.write(key="b.txt", content=second)
    reference_3 = store.write(key="c.txt", content=first)
    assert reference_1 == reference_3
    assert (reference_1 == reference_2) == (first == second)
    encoded = {x.encode() if isinstance(x, str) else x for x in (first, second)}
    assert blob_digests(backend) == sorted(set(before) | {blake3_hex(data) for data in encoded})


def test_the_store_takes_binary_content(store: RepositoryToolResultStore) -> None:
    assert store.supports_binary_content is True
    assert type(store).supports_binary_content is True


def test_reference_is_a_hash_path_with_the_full_digest_and_the_key_extension(store: RepositoryToolResultStore) -> None:
    digest = blake3_hex(b"hello")
    assert store.write(key="3_search_call_1.txt", content="hello") == f"blake3/{digest[:2]}/{digest[2:]}.txt"
    png = b"\x89PNG\r\n\x1a\n" + os.urandom(64)
    png_digest = blake3_hex(png)
    assert store.write(key="0_render_1.png", content=png) == f"blake3/bin/{png_digest[:2]}/{png_digest[2:]}.png"
    assert store.write(key="no_extension", content="x") == f"blake3/{blake3_hex(b'x')[:2]}/{blake3_hex(b'x')[2:]}"


def test_same_bytes_as_text_and_as_binary_read_back_as_written(
    backend: Backend, store: RepositoryToolResultStore
) -> None:
    as_text = store.write(key="a.txt", content="same bytes")
    as_bytes = store.write(key="b.txt", content=b"same bytes")
    assert as_text != as_bytes
    assert store.read(as_text) == "same bytes"
    assert store.read(as_bytes) == b"same bytes"
    assert backend.count("blobs") == 1


def test_large_content_round_trips(open_store: StoreFactory) -> None:
    content = "line of a large log file\n" * 200_000  # 5 MB
    store = open_store(inline_max=0)
    assert store.read(store.write(key="huge.log", content=content)) == content


def test_content_written_by_one_store_object_is_read_by_another(open_store: StoreFactory) -> None:
    first = open_store(namespace="team")
    small = first.write(key="a.txt", content="small")
    large_content = os.urandom(100_000)
    large = first.write(key="b.bin", content=large_content)
    first.close()
    second = open_store(namespace="team")
    assert (second.read(small), second.read(large)) == ("small", large_content)
