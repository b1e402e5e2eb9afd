"""The store's contract: round trips, dedup, references, errors, namespaces, serialization."""

import os
import pickle
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import casstore
from casstore import (
    CasStoreError,
    ContentAddressedToolResultStore,
    InvalidContentError,
    InvalidKeyError,
    InvalidReferenceError,
    ReferenceNotFoundError,
    StoreClosedError,
)
from casstore.index.work import NOW_SQL
from tests.helpers import blake3_hex, blob_files, count_rows, snapshot
from tests.reliability import forget_hints

PROPERTY_SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def _digest_in(reference: str) -> str:
    *_, fanout, name = reference.split("/")
    return fanout + name.split(".")[0]


@PROPERTY_SETTINGS
@given(content=st.one_of(st.text(), st.binary()))
def test_read_returns_exactly_what_was_written(store: ContentAddressedToolResultStore, content: str | bytes) -> None:
    reference = store.write(key="result.txt", content=content)
    read_back = store.read(reference)
    assert read_back == content
    assert type(read_back) is type(content)


@PROPERTY_SETTINGS
@given(first=st.one_of(st.text(), st.binary()), second=st.one_of(st.text(), st.binary()))
def test_equal_content_shares_a_reference_and_a_blob(
    store: ContentAddressedToolResultStore, first: str | bytes, second: str | bytes
) -> None:
    def stored_digests() -> list[str]:
        connection = sqlite3.connect(store.root / "index.db")
        try:
            return [row[0] for row in connection.execute("SELECT digest FROM blobs ORDER BY digest")]
        finally:
            connection.close()

    blobs_before = stored_digests()  # the store is shared by hypothesis's examples: it may hold these already
    reference_1 = store.write(key="a.txt", content=first)
    reference_2 = store.write(key="b.txt", content=second)
    reference_3 = store.write(key="c.txt", content=first)
    assert reference_1 == reference_3
    assert (reference_1 == reference_2) == (first == second)
    encoded = {x.encode() if isinstance(x, str) else x for x in (first, second)}
    # Exactly one blob per distinct content: each is stored, none twice (digest is unique, so a list shows either).
    assert stored_digests() == sorted(set(blobs_before) | {blake3_hex(data) for data in encoded})


def test_reference_is_a_hash_path_with_the_full_digest_and_the_key_extension(
    store: ContentAddressedToolResultStore,
) -> None:
    text_reference = store.write(key="3_search_call_1.txt", content="hello")
    assert text_reference == f"blake3/{blake3_hex(b'hello')[:2]}/{blake3_hex(b'hello')[2:]}.txt"
    png = b"\x89PNG\r\n\x1a\n" + os.urandom(64)
    binary_reference = store.write(key="0_render_1.png", content=png)
    assert binary_reference.endswith(".png")
    assert _digest_in(binary_reference) == blake3_hex(png)
    assert store.write(key="no_extension", content="x").endswith(blake3_hex(b"x")[2:])


def test_same_bytes_as_text_and_as_binary_read_back_as_written(store: ContentAddressedToolResultStore) -> None:
    as_text = store.write(key="a.txt", content="same bytes")
    as_bytes = store.write(key="b.txt", content=b"same bytes")
    assert as_text != as_bytes
    assert store.read(as_text) == "same bytes"
    assert store.read(as_bytes) == b"same bytes"
    assert count_rows(store.root, "blobs") == 1


def test_a_duplicate_write_records_history_but_no_blob(file_store: ContentAddressedToolResultStore) -> None:
    content = "the same file, read again\n" * 2000
    for attempt in range(40):
        file_store.write(key=f"{attempt}_read_file_{attempt}.txt", content=content)
    assert count_rows(file_store.root, "writes") == 40
    assert count_rows(file_store.root, "blobs") == 1
    assert len(blob_files(file_store.root)) == 1


def test_a_repeated_write_keeps_last_seen_within_its_resolution(store: ContentAddressedToolResultStore) -> None:
    def index_now() -> str:
        with closing(sqlite3.connect(store.root / "index.db")) as connection:
            return str(connection.execute(f"SELECT {NOW_SQL}").fetchone()[0])

    def last_seen() -> str:
        with closing(sqlite3.connect(store.root / "index.db")) as connection:
            return str(connection.execute("SELECT last_seen FROM blobs").fetchone()[0])

    store.write(key="a.txt", content="read again")
    with closing(sqlite3.connect(store.root / "index.db")) as connection, connection:
        connection.execute("UPDATE blobs SET last_seen = '2020-01-01 00:00:00.000'")
    forget_hints(store)  # so this process's memory of the blob does not spare the look-up either
    before = index_now()
    store.write(key="b.txt", content="read again")
    assert before <= last_seen() <= index_now()


def test_small_blobs_live_in_the_index_and_large_ones_in_files(store_root: Path) -> None:
    with ContentAddressedToolResultStore(store_root, inline_max=1024) as store:
        small = store.write(key="small.txt", content="short result")
        large_content = os.urandom(50_000)
        large = store.write(key="large.bin", content=large_content)
        assert store.read(small) == "short result"
        assert store.read(large) == large_content
    files = blob_files(store_root)
    assert [path.name for path in files] == [blake3_hex(large_content)[2:] + ".zst"]
    assert files[0].parent.name == blake3_hex(large_content)[:2]
    with sqlite3.connect(store_root / "index.db") as connection:
        stored_in = dict(connection.execute("SELECT size, stored_in FROM blobs").fetchall())
    assert stored_in == {len("short result"): "index", 50_000: "file"}


def test_incompressible_content_costs_only_a_few_bytes_more(file_store: ContentAddressedToolResultStore) -> None:
    content = os.urandom(1_000_000)
    file_store.write(key="photo.jpg", content=content)
    (blob,) = blob_files(file_store.root)
    assert blob.stat().st_size - len(content) <= 64


def test_text_is_compressed(file_store: ContentAddressedToolResultStore) -> None:
    content = Path(__file__).read_text() * 5
    file_store.write(key="source.txt", content=content)
    (blob,) = blob_files(file_store.root)
    assert blob.stat().st_size < len(content.encode()) / 3


@pytest.mark.parametrize("content", [None, 42, 3.5, ["a"], {"a": 1}, bytearray(b"x"), memoryview(b"x")])
def test_other_content_types_raise_type_error_and_store_nothing(
    store: ContentAddressedToolResultStore, content: object
) -> None:
    before = snapshot(store.root)
    with pytest.raises(TypeError):
        store.write(key="a.txt", content=content)  # type: ignore[arg-type]  # not str or bytes, on purpose
    assert snapshot(store.root) == before


@pytest.mark.parametrize("content", ["\ud800", "ok \udfff then", "x" * 1000 + "\udc80"])
def test_text_that_is_not_utf8_encodable_raises_and_stores_nothing(
    store: ContentAddressedToolResultStore, content: str
) -> None:
    before = snapshot(store.root)
    with pytest.raises(InvalidContentError, match="UTF-8") as raised:
        store.write(key="a.txt", content=content)
    assert isinstance(raised.value, ValueError)
    assert isinstance(raised.value, CasStoreError)
    assert snapshot(store.root) == before


@pytest.mark.parametrize("key", ["", "a\x00b.txt", "x" * 1025])
def test_unrecordable_keys_raise_invalid_key_error_and_store_nothing(
    store: ContentAddressedToolResultStore, key: str
) -> None:
    before = snapshot(store.root)
    with pytest.raises(InvalidKeyError):
        store.write(key=key, content="content")
    assert snapshot(store.root) == before


@pytest.mark.parametrize("key", ["a\ud800.txt", "\udfff", "ok.t\udc80"])
def test_keys_that_are_not_utf8_encodable_are_refused_before_anything_is_stored(
    file_store: ContentAddressedToolResultStore, key: str
) -> None:
    before = snapshot(file_store.root)
    with pytest.raises(InvalidKeyError, match="UTF-8"):
        file_store.write(key=key, content="a result large enough for a blob file\n" * 1000)
    assert snapshot(file_store.root) == before


@pytest.mark.parametrize("key", ["report.final version", "a.<script>", "a." + "x" * 17, "a.tx\u0442", "x.\u00fc"])
def test_an_extension_unfit_for_a_reference_is_left_out_and_the_key_recorded(
    store: ContentAddressedToolResultStore, key: str
) -> None:
    reference = store.write(key=key, content="content")
    assert reference == f"blake3/{blake3_hex(b'content')[:2]}/{blake3_hex(b'content')[2:]}"
    assert store.read(reference) == "content"
    with sqlite3.connect(store.root / "index.db") as connection:
        assert connection.execute("SELECT key FROM writes").fetchone()[0] == key


def test_a_non_string_key_raises_type_error(store: ContentAddressedToolResultStore) -> None:
    with pytest.raises(TypeError):
        store.write(key=7, content="content")  # type: ignore[arg-type]  # not a string, on purpose
    assert count_rows(store.root, "writes") == 0


def test_keys_are_recorded_never_used_as_paths(store: ContentAddressedToolResultStore, tmp_path: Path) -> None:
    hostile_key = "../../../../" + str(tmp_path / "escaped.txt")
    reference = store.write(key=hostile_key, content="inside")
    assert not (tmp_path / "escaped.txt").exists()
    assert store.read(reference) == "inside"
    with sqlite3.connect(store.root / "index.db") as connection:
        assert connection.execute("SELECT key FROM writes").fetchone()[0] == hostile_key


VALID = "blake3/" + "ab" + "/" + "c" * 62 + ".txt"
MALFORMED_REFERENCES: list[object] = [
    "",
    "../x",
    "/etc/passwd",
    "blake3/../../index.db",
    VALID.replace("blake3/", "/blake3/"),
    VALID + "\x00",
    VALID.replace("ab", "a\x00"),
    VALID.replace("c" * 62, "c" * 61),
    VALID.replace("c" * 62, "c" * 63),
    VALID.replace("c" * 62, "g" * 62),
    VALID.upper(),
    VALID.replace("ab", "AB"),
    VALID.replace("/", "\\"),
    VALID.replace("/", "%2F"),
    VALID.replace("ab/", "ab\u2215"),
    "sha256/ab/" + "c" * 62 + ".txt",
    VALID + "/",
    VALID + ".",
    " " + VALID,
    VALID * 2,
    "x" * 100_000,
    None,
    42,
    b"blake3/ab/" + b"c" * 62,
    ["blake3"],
]


@pytest.mark.parametrize("reference", MALFORMED_REFERENCES, ids=lambda value: repr(value)[:40])
def test_malformed_references_raise_invalid_reference_error(
    store: ContentAddressedToolResultStore, reference: object
) -> None:
    store.write(key="a.txt", content="something")
    with pytest.raises(InvalidReferenceError) as raised:
        store.read(reference)  # type: ignore[arg-type]  # some are not strings, on purpose
    assert isinstance(raised.value, ValueError)
    assert isinstance(raised.value, CasStoreError)


def test_well_formed_unknown_references_raise_reference_not_found(store: ContentAddressedToolResultStore) -> None:
    written = store.write(key="a.txt", content="known")
    unknown = f"blake3/{'0' * 2}/{'0' * 62}.txt"
    with pytest.raises(ReferenceNotFoundError) as raised:
        store.read(unknown)
    assert isinstance(raised.value, FileNotFoundError)
    for variant in (
        written.removesuffix(".txt") + ".png",
        written.removesuffix(".txt"),
        written.replace("/", "/bin/", 1),
    ):
        with pytest.raises(ReferenceNotFoundError):
            store.read(variant)


def test_namespaces_isolate_reads_but_share_blobs(store_root: Path) -> None:
    with (
        ContentAddressedToolResultStore(store_root, namespace="alice") as alice,
        ContentAddressedToolResultStore(store_root, namespace="bob") as bob,
    ):
        shared = "a result both users got\n" * 100
        reference_alice = alice.write(key="a.txt", content=shared)
        reference_bob = bob.write(key="b.txt", content=shared)
        secret = bob.write(key="secret.txt", content="bob's secret")
        assert reference_alice == reference_bob
        assert alice.read(reference_alice) == shared
        with pytest.raises(ReferenceNotFoundError) as foreign:
            alice.read(secret)
        never_written = f"blake3/{'1' * 2}/{'1' * 62}.txt"
        with pytest.raises(ReferenceNotFoundError) as nowhere:
            alice.read(never_written)
        assert str(foreign.value).replace(secret, "REF") == str(nowhere.value).replace(never_written, "REF")
    assert count_rows(store_root, "blobs") == 2


@pytest.mark.parametrize("namespace", ["", "tab\there", "x" * 257])
def test_bad_namespaces_are_refused(store_root: Path, namespace: str) -> None:
    with pytest.raises(ValueError, match="namespace"):
        ContentAddressedToolResultStore(store_root, namespace=namespace)


@pytest.mark.parametrize(
    ("argument", "value"), [("compression_level", 0), ("compression_level", 23), ("inline_max", -1)]
)
def test_bad_settings_are_refused(store_root: Path, argument: str, value: int) -> None:
    with pytest.raises(ValueError, match=argument):
        keywords: dict[str, Any] = {argument: value}
        ContentAddressedToolResultStore(store_root, **keywords)


def test_a_closed_store_says_so(store_root: Path) -> None:
    store = ContentAddressedToolResultStore(store_root)
    reference = store.write(key="a.txt", content="x")
    store.close()
    store.close()
    with pytest.raises(StoreClosedError):
        store.read(reference)
    with pytest.raises(StoreClosedError):
        store.write(key="a.txt", content="x")


def test_content_survives_reopening(store_root: Path) -> None:
    with ContentAddressedToolResultStore(store_root, durable=True) as store:
        reference = store.write(key="a.txt", content="persisted")
    with ContentAddressedToolResultStore(store_root) as reopened:
        assert reopened.read(reference) == "persisted"


def test_large_content_round_trips(file_store: ContentAddressedToolResultStore) -> None:
    content = "line of a large log file\n" * 400_000  # 10 MB
    reference = file_store.write(key="huge.log", content=content)
    assert file_store.read(reference) == content


def test_prepare_write_stores_nothing_until_written(store: ContentAddressedToolResultStore) -> None:
    prepared = store.prepare_write(key="a.txt", content="later")
    assert count_rows(store.root, "writes") == 0
    assert count_rows(store.root, "blobs") == 0
    with pytest.raises(ReferenceNotFoundError):
        store.read(prepared.reference)
    assert store.write_prepared(prepared) == prepared.reference == store.write(key="b.txt", content="later")
    assert store.read(prepared.reference) == "later"


def test_write_prepared_many_stores_every_part_in_order(store: ContentAddressedToolResultStore) -> None:
    parts = [
        store.prepare_write(key="0.txt", content="first"),
        store.prepare_write(key="1.png", content=b"\x89PNG second"),
        store.prepare_write(key="2.txt", content="first"),
    ]
    references = store.write_prepared_many(parts)
    assert references == [part.reference for part in parts]
    assert [store.read(reference) for reference in references] == ["first", b"\x89PNG second", "first"]
    assert (count_rows(store.root, "writes"), count_rows(store.root, "blobs")) == (3, 2)


def test_every_public_error_derives_from_cas_store_error_and_survives_pickling() -> None:
    """Errors cross process boundaries (multiprocessing, concurrent.futures) with their message and attributes."""
    errors = [getattr(casstore, name) for name in casstore.__all__ if name.endswith("Error")]
    # Exactly the error table of docs/store.md, each with the bases it documents.
    assert {error.__name__: error.__bases__ for error in errors} == {
        "CasStoreError": (Exception,),
        "InvalidContentError": (casstore.CasStoreError, ValueError),
        "InvalidKeyError": (casstore.CasStoreError, ValueError),
        "InvalidReferenceError": (casstore.CasStoreError, ValueError),
        "ReferenceNotFoundError": (casstore.CasStoreError, FileNotFoundError),
        "CorruptBlobError": (casstore.CasStoreError, OSError),
        "UnsafeBlobError": (casstore.CorruptBlobError, casstore.ReferenceNotFoundError),
        "SchemaError": (casstore.CasStoreError,),
        "IndexDamagedError": (casstore.SchemaError, casstore.CorruptBlobError),
        "StorageError": (casstore.CasStoreError, OSError),
        "ReadOnlyStoreError": (casstore.StorageError,),
        "StoreClosedError": (casstore.CasStoreError,),
        "SearchUnavailableError": (casstore.CasStoreError,),
        "BlobLocationError": (casstore.CasStoreError, ValueError),
    }
    for error_class in errors:
        assert issubclass(error_class, casstore.CasStoreError)
        error = error_class("what went wrong")
        copy = pickle.loads(pickle.dumps(error))
        assert type(copy) is error_class and str(copy) == "what went wrong"
    corrupt = pickle.loads(pickle.dumps(casstore.CorruptBlobError("gone", digest="ab" * 32, missing=True)))
    assert (corrupt.digest, corrupt.missing) == ("ab" * 32, True)
