"""
The store's contract, one suite for both backends: every test here runs on the local store (SQLite and a folder) and
on the shared store (PostgreSQL and S3, real servers), and what it checks is the same method for method and error
for error. The last tests open both at once and compare their answers directly.
"""

import json
import os
import re
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import zstandard
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from casstore import (
    CasStoreError,
    CorruptBlobError,
    InvalidContentError,
    InvalidKeyError,
    InvalidReferenceError,
    ReferenceNotFoundError,
    StorageError,
    StoreClosedError,
)
from casstore.blobs.frames import FrameCodec
from casstore.blobs.location import MARKER_NAME
from casstore.history.figures import ratio
from casstore.history.stats import namespaces, namespaces_holding, offload_log, stats
from casstore.index.writes import OffloadRecord
from casstore.maintenance.checks import GarbageReport, collect_garbage, verify
from casstore.stores.local import RepositoryToolResultStore
from tests.helpers import blake3_hex
from tests.store_backends import Backend, SharedBackend, StoreFactory, make_backend

PROPERTY_SETTINGS = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
BACKENDS = ["local", "shared"]
TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}$")
LONG_AGO = "2020-01-01 00:00:00.000"

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


@pytest.fixture
def open_store(backend: Backend) -> StoreFactory:
    """`open_store(namespace="default", inline_max=<default>)`: a store on the test's backend."""
    return backend.open


@pytest.fixture
def store(open_store: StoreFactory) -> RepositoryToolResultStore:
    return open_store()


def _digests(backend: Backend) -> list[str]:
    return [row[0] for row in backend.rows("SELECT digest FROM blobs ORDER BY digest")]


def _stored_in(backend: Backend) -> dict[str, str]:
    return {row[0]: row[1] for row in backend.rows("SELECT digest, stored_in FROM blobs")}


def _age_every_blob(backend: Backend) -> None:
    backend.execute(f"UPDATE blobs SET last_seen = '{LONG_AGO}'")


# --- Round trips ----------------------------------------------------------------------------------------------------


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
    before = _digests(backend)  # hypothesis's examples share the store: it may hold these already
    reference_1 = store.write(key="a.txt", content=first)
    reference_2 = store.write(key="b.txt", content=second)
    reference_3 = store.write(key="c.txt", content=first)
    assert reference_1 == reference_3
    assert (reference_1 == reference_2) == (first == second)
    encoded = {x.encode() if isinstance(x, str) else x for x in (first, second)}
    assert _digests(backend) == sorted(set(before) | {blake3_hex(data) for data in encoded})


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


# --- Dedup and where blobs live -------------------------------------------------------------------------------------


@pytest.mark.parametrize("size", ["small", "large"])
def test_the_same_content_written_many_times_in_two_namespaces_is_stored_once(
    backend: Backend, open_store: StoreFactory, size: str
) -> None:
    content = "the same file, read again\n" * 10 if size == "small" else os.urandom(200_000).hex()
    alice, bob = open_store(namespace="A"), open_store(namespace="B")
    references = {store.write(key=f"{n}_read_{n}.txt", content=content) for n in range(10) for store in (alice, bob)}
    digest = blake3_hex(content.encode())
    assert len(references) == 1
    assert backend.count("writes") == 20
    assert backend.rows("SELECT digest FROM blobs") == [(digest,)]
    assert backend.rows("SELECT DISTINCT namespace FROM writes ORDER BY namespace") == [("A",), ("B",)]
    if size == "small":
        assert _stored_in(backend) == {digest: "index"}
        assert backend.count("blob_frames") == 1
        assert backend.blob_names() == []
    else:
        assert _stored_in(backend) == {digest: backend.stored_elsewhere}
        assert backend.count("blob_frames") == 0
        assert backend.blob_names() == [backend.blob_name(digest)]
    (reference,) = references
    assert alice.read(reference) == bob.read(reference) == content


def test_small_blobs_live_in_the_index_and_large_ones_outside(backend: Backend, open_store: StoreFactory) -> None:
    store = open_store(inline_max=1024)
    small = store.write(key="small.txt", content="short result")
    large_content = os.urandom(50_000)
    large = store.write(key="large.bin", content=large_content)
    assert store.read(small) == "short result"
    assert store.read(large) == large_content
    digest = blake3_hex(large_content)
    assert dict(backend.rows("SELECT size, stored_in FROM blobs")) == {12: "index", 50_000: backend.stored_elsewhere}
    assert backend.blob_names() == [backend.blob_name(digest)]
    if isinstance(backend, SharedBackend):
        # The blob's object, and the marker naming the store at its blob location.
        assert backend.full_object_names() == [
            f"{backend.prefix}/blake3/{digest[:2]}/{digest[2:]}",
            f"{backend.prefix}/{MARKER_NAME}",
        ]
        assert re.fullmatch(r"prefix-[0-9a-f]{32}/blake3/[0-9a-f]{2}/[0-9a-f]{62}", backend.full_object_names()[0])
    else:
        assert (backend.root / "blobs" / digest[:2] / f"{digest[2:]}.zst").is_file()  # type: ignore[attr-defined]
    (stored_size,) = backend.rows("SELECT stored_size FROM blobs WHERE digest = ?", (digest,))[0]
    assert stored_size - len(large_content) <= 64  # incompressible: a few bytes of frame


def test_text_is_compressed(backend: Backend, open_store: StoreFactory) -> None:
    content = Path(__file__).read_text() * 5
    open_store(inline_max=0).write(key="source.txt", content=content)
    ((stored_size, stored_in),) = backend.rows("SELECT stored_size, stored_in FROM blobs")
    assert stored_in == backend.stored_elsewhere
    assert stored_size < len(content.encode()) / 3


def test_concurrent_writers_of_the_same_new_content_store_it_once(backend: Backend, open_store: StoreFactory) -> None:
    threads = 8
    stores = [open_store(namespace="A"), open_store(namespace="B")]  # two replicas, four threads each
    contents: list[str | bytes] = ["small and new\n" * 10, os.urandom(100_000), b"binary and new" * 10]
    barrier = threading.Barrier(threads)

    def write(number: int) -> list[str]:
        store = stores[number % 2]
        barrier.wait(30)
        return [store.write(key=f"{number}_{index}.txt", content=content) for index, content in enumerate(contents)]

    with ThreadPoolExecutor(threads) as pool:
        results = list(pool.map(write, range(threads)))
    assert all(result == results[0] for result in results)
    assert backend.count("writes") == threads * len(contents)
    digests = sorted(blake3_hex(content.encode() if isinstance(content, str) else content) for content in contents)
    assert _digests(backend) == digests
    assert backend.blob_names() == [backend.blob_name(blake3_hex(contents[1]))]  # type: ignore[arg-type]
    for store in stores:
        assert [store.read(reference) for reference in results[0]] == contents
    assert verify(stores[0]).clean


# --- Namespaces -----------------------------------------------------------------------------------------------------


def test_namespaces_isolate_reads_but_share_blobs(backend: Backend, open_store: StoreFactory) -> None:
    alice, bob = open_store(namespace="alice"), open_store(namespace="bob")
    shared = "a result both users got\n" * 100
    assert alice.write(key="a.txt", content=shared) == bob.write(key="b.txt", content=shared)
    secret = bob.write(key="secret.txt", content="bob's secret")
    assert alice.read(bob.write(key="c.txt", content=shared)) == shared
    with pytest.raises(ReferenceNotFoundError) as foreign:
        alice.read(secret)
    never_written = f"blake3/{'1' * 2}/{'1' * 62}.txt"
    with pytest.raises(ReferenceNotFoundError) as nowhere:
        alice.read(never_written)
    assert str(foreign.value).replace(secret, "REF") == str(nowhere.value).replace(never_written, "REF")
    assert "'alice'" in str(foreign.value)
    assert backend.count("blobs") == 2


# --- Bad input ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("namespace", ["", "tab\there", "x" * 257])
def test_bad_namespaces_are_refused(open_store: StoreFactory, namespace: str) -> None:
    with pytest.raises(ValueError, match="namespace"):
        open_store(namespace=namespace)


@pytest.mark.parametrize(
    ("argument", "value"), [("compression_level", 0), ("compression_level", 23), ("inline_max", -1)]
)
def test_bad_settings_are_refused(open_store: StoreFactory, argument: str, value: int) -> None:
    keywords: dict[str, Any] = {argument: value}
    with pytest.raises(ValueError, match=argument):
        open_store(**keywords)


@pytest.mark.parametrize("content", [None, 42, 3.5, ["a"], {"a": 1}, bytearray(b"x"), memoryview(b"x")])
def test_other_content_types_raise_type_error_and_store_nothing(
    backend: Backend, store: RepositoryToolResultStore, content: object
) -> None:
    before = backend.snapshot()
    with pytest.raises(TypeError):
        store.write(key="a.txt", content=content)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        store.prepare_write(key="a.txt", content=content)  # type: ignore[arg-type]
    assert backend.snapshot() == before


@pytest.mark.parametrize("content", ["\ud800", "ok \udfff then", "x" * 100_000 + "\udc80"])
def test_text_that_is_not_utf8_encodable_raises_and_stores_nothing(
    backend: Backend, open_store: StoreFactory, content: str
) -> None:
    store = open_store(inline_max=0)
    before = backend.snapshot()
    with pytest.raises(InvalidContentError, match="UTF-8") as raised:
        store.write(key="a.txt", content=content)
    assert isinstance(raised.value, ValueError) and isinstance(raised.value, CasStoreError)
    assert backend.snapshot() == before


@pytest.mark.parametrize("key", ["", "a\x00b.txt", "x" * 1025, "a\ud800.txt", "\udfff", "ok.t\udc80"])
def test_unrecordable_keys_raise_invalid_key_error_and_store_nothing(
    backend: Backend, open_store: StoreFactory, key: str
) -> None:
    store = open_store(inline_max=0)
    before = backend.snapshot()
    with pytest.raises(InvalidKeyError) as raised:
        store.write(key=key, content="a result large enough for a blob of its own\n" * 1000)
    assert isinstance(raised.value, ValueError)
    assert backend.snapshot() == before


def test_a_non_string_key_raises_type_error(backend: Backend, store: RepositoryToolResultStore) -> None:
    with pytest.raises(TypeError):
        store.write(key=7, content="content")  # type: ignore[arg-type]
    assert backend.count("writes") == 0


@pytest.mark.parametrize(
    "key",
    [
        "report.final version",
        "a.<script>",
        "a." + "x" * 17,
        "a.tx\u0442",
        "x.\u00fc",
        "../../../etc/passwd",
        "../../../../{outside}/escaped",
    ],
)
def test_keys_are_recorded_never_used_as_paths(
    backend: Backend, store: RepositoryToolResultStore, tmp_path: Path, key: str
) -> None:
    key = key.format(outside=tmp_path)
    reference = store.write(key=key, content="content")
    assert reference == f"blake3/{blake3_hex(b'content')[:2]}/{blake3_hex(b'content')[2:]}"
    assert store.read(reference) == "content"
    assert backend.rows("SELECT key FROM writes") == [(key,)]
    assert not (tmp_path / "escaped").exists()


@pytest.mark.parametrize("reference", MALFORMED_REFERENCES, ids=lambda value: repr(value)[:40])
def test_malformed_references_raise_invalid_reference_error(
    store: RepositoryToolResultStore, reference: object
) -> None:
    store.write(key="a.txt", content="something")
    with pytest.raises(InvalidReferenceError) as raised:
        store.read(reference)  # type: ignore[arg-type]
    assert isinstance(raised.value, ValueError) and isinstance(raised.value, CasStoreError)


def test_well_formed_unknown_references_raise_reference_not_found(store: RepositoryToolResultStore) -> None:
    written = store.write(key="a.txt", content="known")
    for unknown in (
        f"blake3/{'0' * 2}/{'0' * 62}.txt",
        written.removesuffix(".txt") + ".png",
        written.removesuffix(".txt"),
        written.replace("/", "/bin/", 1),
    ):
        with pytest.raises(ReferenceNotFoundError) as raised:
            store.read(unknown)
        assert isinstance(raised.value, FileNotFoundError)


# --- Prepared writes ------------------------------------------------------------------------------------------------


def test_prepare_write_stores_nothing_until_written(backend: Backend, store: RepositoryToolResultStore) -> None:
    prepared = store.prepare_write(key="a.txt", content="later")
    assert backend.snapshot() == (0, 0, 0, [])
    with pytest.raises(ReferenceNotFoundError):
        store.read(prepared.reference)
    assert store.write_prepared(prepared) == prepared.reference == store.write(key="b.txt", content="later")
    assert store.read(prepared.reference) == "later"


def test_write_prepared_many_stores_every_part_in_order(backend: Backend, store: RepositoryToolResultStore) -> None:
    parts = [
        store.prepare_write(key="0.txt", content="first"),
        store.prepare_write(key="1.png", content=b"\x89PNG second"),
        store.prepare_write(key="2.txt", content="first"),
    ]
    references = store.write_prepared_many(parts)
    assert references == [part.reference for part in parts]
    assert [store.read(reference) for reference in references] == ["first", b"\x89PNG second", "first"]
    assert (backend.count("writes"), backend.count("blobs")) == (3, 2)
    assert backend.rows("SELECT key, kind, size FROM writes ORDER BY id") == [
        ("0.txt", "text", 5),
        ("1.png", "binary", 11),
        ("2.txt", "text", 5),
    ]


def test_the_parts_of_one_result_are_stored_together_or_not_at_all(backend: Backend, open_store: StoreFactory) -> None:
    store = open_store(inline_max=1024)
    known = store.write(key="known.txt", content="already stored")
    before = backend.snapshot()
    backend.fail_writes_of_key("boom.txt")
    small, large = "a small first part\n" * 10, os.urandom(100_000)
    parts = [
        store.prepare_write(key="0.txt", content=small),
        store.prepare_write(key="1.bin", content=large),
        store.prepare_write(key="2.txt", content="already stored"),
        store.prepare_write(key="boom.txt", content="the part the index refuses"),
    ]
    with pytest.raises(StorageError, match="no space left on device") as raised:
        store.write_prepared_many(parts)
    assert not isinstance(raised.value, FileNotFoundError)
    writes, blobs, frames, names = backend.snapshot()
    assert (writes, blobs, frames) == before[:3]  # not even the parts before the one refused
    # At most the large part's staged blob, which no row points at (gc removes it).
    assert set(names) - set(before[3]) <= {backend.blob_name(blake3_hex(large))}
    for part in parts[:2]:
        with pytest.raises(ReferenceNotFoundError):
            store.read(part.reference)
    assert store.read(known) == "already stored"
    # Without the refused part, the same parts are stored, and read back, from this store and another.
    assert store.write_prepared_many(parts[:3]) == [part.reference for part in parts[:3]]
    other = open_store()
    assert [other.read(part.reference) for part in parts[:3]] == [small, large, "already stored"]
    assert verify(store).ok


@pytest.mark.parametrize("leftover", ["other settings", "damaged"])
def test_a_blob_left_by_a_failed_write_does_not_harm_a_later_write(
    backend: Backend, open_store: StoreFactory, leftover: str
) -> None:
    """
    A failed write (or a crash before its commit) leaves its staged blob, which no row points at: garbage for gc, and
    harmless meanwhile. A later write of that content, by a replica with another compression level (whose frame has
    another size) or after the leftover was damaged (same size, other bytes), stores it and reads it back.
    """
    content = "".join(f"line {number}: compressible text, again and again\n" for number in range(5000))
    digest = blake3_hex(content.encode())
    first = open_store(inline_max=0, compression_level=1)
    backend.fail_writes_of_key("boom.txt")
    with pytest.raises(StorageError):
        first.write(key="boom.txt", content=content)
    assert backend.blob_names() == [backend.blob_name(digest)]  # the leftover
    assert backend.count("blobs") == 0
    if leftover == "damaged":
        frame = FrameCodec(compression_level=1).encode(content.encode())  # what the failed write left
        backend.put_raw(backend.blob_name(digest), bytes(len(frame)))
        other = open_store(inline_max=0, compression_level=1)
    else:
        other = open_store(inline_max=0, compression_level=19)
    reference = other.write(key="a.txt", content=content)
    assert other.read(reference) == content
    assert open_store().read(reference) == content
    assert verify(other).clean


# --- Offload history ------------------------------------------------------------------------------------------------


def test_record_offloads_appends_one_row_per_offload(backend: Backend, open_store: StoreFactory) -> None:
    alice, bob = open_store(namespace="alice"), open_store(namespace="bob")
    log = alice.write(key="0_run_tests_1.txt", content="log\n" * 100)
    image = alice.write(key="1_render_2.png", content=b"\x89PNG image")
    alice.record_offloads(
        compaction_id="c1",
        offloads=[
            OffloadRecord("run_tests", "call_1", [log], 120, 100),
            OffloadRecord("render", None, [log, image], 900, 850),
        ],
    )
    bob.record_offloads(compaction_id="c2", offloads=[OffloadRecord("search", "s1", [log], 50, 30)])
    alice.record_offloads(compaction_id="c3", offloads=[])
    rows = backend.rows(
        "SELECT compaction_id, namespace, tool_name, tool_call_id, refs, original_tokens, saved_tokens, offloaded_at "
        "FROM offloads ORDER BY id"
    )
    assert [(*row[:4], json.loads(row[4]), *row[5:7]) for row in rows] == [
        ("c1", "alice", "run_tests", "call_1", [log], 120, 100),
        ("c1", "alice", "render", None, [log, image], 900, 850),
        ("c2", "bob", "search", "s1", [log], 50, 30),
    ]
    assert all(TIMESTAMP.match(row[7]) for row in rows)
    # The two writes' keys have the offload hook's shape, so the log lists them too, as the hook's.
    entries = offload_log(alice, namespace="alice")
    assert [entry.key for entry in entries if entry.source == "hook"] == ["1_render_2.png", "0_run_tests_1.txt"]
    entries = [entry for entry in entries if entry.source == "compactor"]
    assert [(entry.tool_name, entry.references, entry.compaction_id) for entry in entries] == [
        ("render", [log, image], "c1"),
        ("run_tests", [log], "c1"),
    ]
    assert [entry.tool_name for entry in offload_log(bob, tool="search")] == ["search"]
    assert len(offload_log(bob, since=timedelta(days=1), limit=2)) == 2


# --- Lifetime -------------------------------------------------------------------------------------------------------


def test_a_closed_store_says_so(store: RepositoryToolResultStore) -> None:
    reference = store.write(key="a.txt", content="x")
    prepared = store.prepare_write(key="b.txt", content="y")
    store.close()
    store.close()
    calls: dict[str, Callable[[], object]] = {
        "read": lambda: store.read(reference),
        "write": lambda: store.write(key="a.txt", content="x"),
        "write_prepared": lambda: store.write_prepared(prepared),
        "write_prepared_many": lambda: store.write_prepared_many([prepared]),
        "record_offloads": lambda: store.record_offloads(compaction_id="c", offloads=[]),
        "stats": lambda: stats(store),
        "verify": lambda: verify(store),
    }
    for name, call in calls.items():
        with pytest.raises(StoreClosedError):
            call()
            pytest.fail(f"{name} ran on a closed store")


def test_the_store_is_a_context_manager(open_store: StoreFactory) -> None:
    opened = open_store()
    with opened as entered:
        assert entered is opened
        reference = entered.write(key="a.txt", content="inside")
    with pytest.raises(StoreClosedError):
        opened.read(reference)
    with open_store() as reopened:
        assert reopened.read(reference) == "inside"


# --- Damage ---------------------------------------------------------------------------------------------------------


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
        assert _stored_in(backend) == {digest: "index"}
        backend.execute(
            "UPDATE blob_frames SET frame = ? WHERE blob_id = (SELECT id FROM blobs WHERE digest = ?)",
            (_frame(forged), digest),
        )
    else:
        assert _stored_in(backend) == {digest: backend.stored_elsewhere}
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


# --- Maintenance ----------------------------------------------------------------------------------------------------


def test_verify_a_healthy_store_and_its_stray_blobs(backend: Backend, open_store: StoreFactory) -> None:
    store = open_store(inline_max=1024)
    store.write(key="a.txt", content="small")
    store.write(key="b.bin", content=os.urandom(20_000))
    report = verify(store)
    assert (report.ok, report.clean, report.blobs_checked, report.unreferenced_blobs) == (True, True, 2, 0)
    stray = blake3_hex(b"nothing points at me")
    backend.put_raw(backend.blob_name(stray), b"a blob nobody recorded")
    report = verify(store)
    assert (report.ok, report.clean, report.stray_files, report.stray_bytes) == (True, False, 1, 22)
    removed = collect_garbage(store, grace=timedelta(0))
    assert (removed.stray_files_removed, removed.stray_bytes_freed, removed.blobs_deleted) == (1, 22, 0)
    assert backend.blob_name(stray) not in backend.blob_names()
    assert verify(store).clean


def test_collect_garbage_forgets_a_namespace_and_then_its_blobs(backend: Backend, open_store: StoreFactory) -> None:
    alice, bob = open_store(namespace="A", inline_max=1024), open_store(namespace="B", inline_max=1024)
    only_alice = alice.write(key="x.txt", content="only A wrote this")
    large = os.urandom(30_000)
    only_alice_large = alice.write(key="z.bin", content=large)
    both = alice.write(key="y.txt", content="both wrote this")
    assert bob.write(key="y.txt", content="both wrote this") == both
    sizes = dict(backend.rows("SELECT digest, stored_size FROM blobs"))
    gone = [blake3_hex(b"only A wrote this"), blake3_hex(large)]

    preview = collect_garbage(alice, namespace="A", grace=timedelta(0), dry_run=True)
    assert (preview.dry_run, preview.writes_forgotten) == (True, 3)
    assert backend.count("writes") == 4  # a dry run changes nothing

    # Forgotten, but seen a moment ago: the grace period keeps every blob.
    first = collect_garbage(alice, namespace="A")
    assert (first.writes_forgotten, first.blobs_deleted, first.offloads_forgotten) == (3, 0, 0)
    assert backend.count("blobs") == 3
    for reference in (only_alice, only_alice_large, both):
        with pytest.raises(ReferenceNotFoundError):
            alice.read(reference)
    assert bob.read(both) == "both wrote this"

    _age_every_blob(backend)
    preview = collect_garbage(bob, grace=timedelta(0), dry_run=True)
    assert (preview.blobs_deleted, preview.blob_bytes_freed) == (2, sum(sizes[digest] for digest in gone))
    assert backend.count("blobs") == 3
    second = collect_garbage(bob, grace=timedelta(0))
    assert (second.writes_forgotten, second.blobs_deleted) == (0, 2)
    assert second.blob_bytes_freed == sum(sizes[digest] for digest in gone)
    assert _digests(backend) == [blake3_hex(b"both wrote this")]
    assert backend.blob_names() == []  # the large blob's file or object went with its row
    assert bob.read(both) == "both wrote this"
    assert verify(bob).clean
    # Written again, the collected content is stored again.
    assert alice.write(key="z.bin", content=large) == only_alice_large
    assert open_store(namespace="A").read(only_alice_large) == large
    assert backend.blob_names() == [backend.blob_name(blake3_hex(large))]


def test_a_repeated_write_refreshes_last_seen_so_gc_keeps_the_blob(backend: Backend, open_store: StoreFactory) -> None:
    store = open_store(namespace="A")
    store.write(key="a.txt", content="read again")
    _age_every_blob(backend)
    other = open_store(namespace="B")  # another store object: it has no memory of the blob
    other.write(key="b.txt", content="read again")
    (last_seen,) = backend.rows("SELECT last_seen FROM blobs")[0]
    assert TIMESTAMP.match(last_seen) and last_seen > LONG_AGO
    report = collect_garbage(store, namespace="B", grace=timedelta(hours=1))
    assert (report.writes_forgotten, report.blobs_deleted) == (1, 0)


# --- History --------------------------------------------------------------------------------------------------------


def test_stats_and_offload_log(open_store: StoreFactory) -> None:
    alice, bob = open_store(namespace="alice"), open_store(namespace="bob")
    log = "test_case ... ok\n" * 500
    references = [alice.write(key=f"{n}_run_tests.txt", content=log) for n in range(3)]
    references.append(bob.write(key="0_run_tests.txt", content=log))
    image = bob.write(key="1_render.png", content=b"\x89PNG" + b"\x00" * 1000)
    alice.record_offloads(compaction_id="c1", offloads=[OffloadRecord("run_tests", "t1", references[:1], 2200, 2150)])
    bob.record_offloads(compaction_id="c2", offloads=[OffloadRecord("render", "r1", [image], 400, 350)])
    figures = stats(alice)
    assert (figures.blobs, figures.writes) == (2, 5)
    assert figures.logical_bytes == 4 * len(log) + 1004
    assert figures.unique_bytes == len(log) + 1004
    assert figures.stored_bytes < figures.unique_bytes
    assert figures.dedup_ratio == round(figures.logical_bytes / figures.unique_bytes, 2)
    assert figures.disk_bytes is not None and figures.disk_bytes > 0
    by_namespace = {row["namespace"]: row for row in figures.namespaces}
    assert {name: (row["writes"], row["distinct_results"], row["offloads"]) for name, row in by_namespace.items()} == {
        "alice": (3, 1, 1),
        "bob": (2, 2, 1),
    }
    assert [(row["namespace"], row["tool_name"], row["saved_tokens"]) for row in figures.tools] == [
        ("alice", "run_tests", 2150),
        ("bob", "render", 350),
    ]
    assert [row["namespace"] for row in stats(alice, namespace="bob").namespaces] == ["bob"]
    # The `{n}_run_tests.txt` writes have the offload hook's shape, but no call id tells `run` from `run_tests`.
    assert [(entry.source, entry.namespace, entry.tool_name, entry.key) for entry in offload_log(alice)] == [
        ("compactor", "bob", "render", None),
        ("compactor", "alice", "run_tests", None),
        ("hook", "bob", None, "0_run_tests.txt"),
        *[("hook", "alice", None, f"{n}_run_tests.txt") for n in (2, 1, 0)],
    ]


def test_stats_of_a_namespace_count_its_writes_and_the_blobs_they_reference(
    backend: Backend, open_store: StoreFactory
) -> None:
    alice, bob, carol = (open_store(namespace=name) for name in ("alice", "bob", "carol"))
    shared, alices, bobs = "shared by two\n" * 300, "alice's own\n" * 200, os.urandom(5_000)
    written = {
        "alice": [alice.write(key="1.txt", content=shared), alice.write(key="2.txt", content=shared)],
        "bob": [bob.write(key="1.txt", content=shared), bob.write(key="2.bin", content=bobs)],
    }
    written["alice"].append(alice.write(key="3.txt", content=alices))
    carol.write(key="1.txt", content="carol's alone\n" * 50)
    stored = dict(backend.rows("SELECT digest, stored_size FROM blobs"))
    expected = {
        "alice": (3, 2 * len(shared) + len(alices), [shared.encode(), alices.encode()]),
        "bob": (2, len(shared) + len(bobs), [shared.encode(), bobs]),
    }
    for name, (writes, logical, contents) in expected.items():
        figures = stats(carol, namespace=name)
        unique = sum(len(content) for content in contents)
        stored_bytes = sum(stored[blake3_hex(content)] for content in contents)
        assert (figures.scope, figures.namespace) == ("namespace", name)
        assert (figures.writes, figures.blobs, figures.logical_bytes) == (writes, len(contents), logical)
        assert (figures.unique_bytes, figures.stored_bytes) == (unique, stored_bytes)
        assert figures.dedup_ratio == ratio(logical, unique)
        assert figures.compression_ratio == ratio(unique, stored_bytes)
        assert figures.total_ratio == ratio(logical, stored_bytes)
        assert (figures.disk_bytes, figures.index_bytes, figures.blob_bytes) == (None, None, None)
        assert [row["namespace"] for row in figures.namespaces] == [name]
    whole = stats(carol)
    assert (whole.scope, whole.namespace, whole.writes, whole.blobs) == ("store", None, 6, 4)
    assert whole.disk_bytes is not None and whole.disk_bytes > 0
    assert stats(carol, namespace="nobody").writes == 0


# --- Both at once ---------------------------------------------------------------------------------------------------


def _scenario(backend: Backend) -> dict[str, Any]:
    """The same work on a backend, and everything it answered that should not depend on where the store lives."""
    answers: dict[str, Any] = {}
    alice, bob = backend.open(namespace="alice", inline_max=2048), backend.open(namespace="bob", inline_max=2048)
    mark = alice.repository.history.mark()
    contents: list[tuple[str, str | bytes]] = [
        ("0_search_1.txt", "results\n" * 20),
        ("1_render_1.png", b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4),
        ("2_read_file_1.txt", "".join(f"line {n}\n" for n in range(5000))),
        ("3_blob", bytes(range(256)) * 200),
        ("4 odd key.<x>", ""),
        ("5_astral.md", "\U0001f600\x00"),
    ]
    answers["references"] = [alice.write(key=key, content=content) for key, content in contents]
    answers["bob's"] = [bob.write(key=key, content=content) for key, content in contents[:3]]
    answers["prepared"] = [alice.prepare_write(key=key, content=content).reference for key, content in contents]
    answers["read"] = [alice.read(reference) for reference in answers["references"]]
    errors: list[str] = []
    for reference in (answers["references"][4], "blake3/00/" + "0" * 62, "not a reference"):
        try:
            bob.read(reference)
        except CasStoreError as error:
            errors.append(f"{type(error).__name__}: {error}")
    answers["errors"] = errors
    alice.record_offloads(
        compaction_id="c1", offloads=[OffloadRecord("search", "s1", answers["references"][:2], 500, 450)]
    )
    answers["blobs"] = [
        (digest, size, stored_size, stored_in.replace(backend.stored_elsewhere, "elsewhere"))
        for digest, size, stored_size, stored_in in backend.rows(
            "SELECT digest, size, stored_size, stored_in FROM blobs ORDER BY digest"
        )
    ]
    figures = stats(alice)
    answers["stats"] = {
        name: getattr(figures, name)
        for name in ("blobs", "writes", "logical_bytes", "unique_bytes", "stored_bytes", "dedup_ratio")
    } | {"compression_ratio": figures.compression_ratio}
    answers["namespaces"] = [
        {key: value for key, value in row.items() if key not in {"first_write", "last_write"}}
        for row in figures.namespaces
    ]
    answers["tools"] = figures.tools
    answers["namespace list"] = namespaces(alice)
    answers["holding"] = [namespaces_holding(bob, reference) for reference in answers["references"]]
    answers["figures since"] = alice.repository.history.figures_since(namespace="alice", mark=mark)
    answers["writes since"] = alice.repository.history.writes_since(namespace="bob", mark=mark)
    answers["log"] = [
        (entry.namespace, entry.tool_name, entry.tool_call_id, entry.references, entry.compaction_id)
        for entry in offload_log(alice)
    ]
    report = verify(alice)
    answers["verify"] = (report.ok, report.clean, report.blobs_checked, report.unreferenced_blobs)
    answers["gc 1"] = _counts(collect_garbage(alice, namespace="alice"))
    _age_every_blob(backend)
    answers["gc 2"] = _counts(collect_garbage(alice, grace=timedelta(0)))
    answers["left"] = _digests(backend)
    return answers


def _counts(report: GarbageReport) -> dict[str, object]:
    """
    A gc report without the sizes the two backends keep in their own ways (a file on disk, tables and objects), what
    each does with the space (`index_space`) and times by each one's clock (`collectable_from`).
    """
    own_ways = {"index_space", "collectable_from"}
    return {
        name: value
        for name, value in asdict(report).items()
        if not name.endswith(("_before", "_after")) and name not in own_ways
    }


def test_local_and_shared_stores_answer_alike(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """The same work on both backends gives the same references, errors, rows, figures and reports."""
    answers = {}
    for kind in BACKENDS:
        backend = make_backend(kind, request, tmp_path)
        try:
            answers[kind] = _scenario(backend)
        finally:
            backend.close()
    local, shared = answers["local"], answers["shared"]
    for name in local:
        assert shared[name] == local[name], name
    assert shared == local
