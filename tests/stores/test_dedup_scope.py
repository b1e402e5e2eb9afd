"""
The dedup scope (docs/dedup-scope.md), on both stores: under `namespace` scope a write of content another namespace
holds is stored as new content, touches nothing of the other namespace's, and learns only from its own namespace;
under `store` scope identical content is stored once. The scope is chosen when a store is made, recorded in its
index, and read from there by every later opener.
"""

import contextlib
import json
import random
import sqlite3
import zlib
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from casstore import CompactionRecord, ContentAddressedToolResultStore, CorruptBlobError, ReferenceNotFoundError
from casstore.blobs import learning as learning_module
from casstore.cli import cli
from casstore.maintenance.checks import verify
from casstore.maintenance.copying import copy_store
from casstore.references import content_digest, split_reference
from tests.learned_results import listing, record
from tests.store_backends import Backend

# A tool's first dictionary after this many small results, so a test need not write a hundred.
TRAIN_AFTER = 24
# A template with a low-entropy secret in it, as the attacker guesses.
SECRET_TEMPLATE = "salary of employee {employee}: {salary} EUR, approved by HR on 2026-11-02\n" * 40


@pytest.fixture(autouse=True)
def _train_early(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(learning_module, "TRAIN_AFTER", TRAIN_AFTER)


def digest_of(reference: str) -> str:
    return split_reference(reference)[0]


def blob_rows(backend: Backend) -> dict[str, tuple[object, ...]]:
    """Every blob row by digest, with its frame if kept in the index: what a write must leave alone."""
    rows = backend.rows(
        "SELECT b.digest, b.size, b.stored_size, b.stored_in, b.encoding, b.dictionary_id, b.base_id, b.first_seen, "
        "b.last_seen, b.namespace, f.frame FROM blobs b LEFT JOIN blob_frames f ON f.blob_id = b.id"
    )
    return {row[0]: tuple(bytes(value) if isinstance(value, memoryview) else value for value in row) for row in rows}


@pytest.mark.parametrize("size", ["small", "large"])
def test_under_namespace_scope_another_namespaces_content_is_stored_anew_and_theirs_left_alone(
    backend: Backend, size: str
) -> None:
    # Small content has its frame in the index; large content (inline_max=0) a file or object of its own.
    inline_max = 0 if size == "large" else 64 * 1024
    alice = backend.open(namespace="alice", dedup_scope="namespace", inline_max=inline_max)
    mallory = backend.open(namespace="mallory", inline_max=inline_max)
    content = SECRET_TEMPLATE.format(employee=17, salary=3900)
    theirs = alice.write(key="1_payroll_call_1.txt", content=content)
    before, names_before = blob_rows(backend), backend.blob_names()

    guess = mallory.write(key="1_payroll_call_1.txt", content=content)

    after = blob_rows(backend)
    assert guess != theirs and digest_of(guess) != digest_of(theirs)
    assert {digest: row for digest, row in after.items() if digest in before} == before  # alice's rows as they were
    assert set(after) - set(before) == {digest_of(guess)}
    assert after[digest_of(guess)][9] == "mallory" and after[digest_of(theirs)][9] == "alice"
    new_names = set(backend.blob_names()) - set(names_before)
    if size == "large":
        assert new_names == {backend.blob_name(digest_of(guess))}
    else:
        assert new_names == set() and after[digest_of(guess)][10] is not None  # a frame row of its own
    # Each reads its own, and only its own.
    assert alice.read(theirs) == content and mallory.read(guess) == content
    with pytest.raises(ReferenceNotFoundError):
        alice.read(guess)
    with pytest.raises(ReferenceNotFoundError):
        mallory.read(theirs)
    # The digests are keyed: neither is the content's plain BLAKE3, which anyone could compute.
    assert content_digest(content.encode()) not in after
    assert verify(alice).clean


def test_under_store_scope_identical_content_in_two_namespaces_is_one_blob(backend: Backend) -> None:
    alice = backend.open(namespace="alice", dedup_scope="store")
    mallory = backend.open(namespace="mallory")
    content = SECRET_TEMPLATE.format(employee=17, salary=3900)
    theirs = alice.write(key="1_payroll_call_1.txt", content=content)
    before = blob_rows(backend)
    assert mallory.write(key="1_payroll_call_1.txt", content=content) == theirs
    assert set(blob_rows(backend)) == set(before) == {content_digest(content.encode())}
    assert mallory.repository.dedup_scope.name == "store"


def test_the_scope_is_recorded_when_the_store_is_made_and_read_by_every_later_opener(backend: Backend) -> None:
    made = backend.open(namespace="alice", dedup_scope="namespace")
    later = backend.open(namespace="bob")
    assert (made.repository.dedup_scope.name, later.repository.dedup_scope.name) == ("namespace", "namespace")
    assert later.to_dict()["init_parameters"]["dedup_scope"] is None
    assert made.to_dict()["init_parameters"]["dedup_scope"] == "namespace"
    settings_rows = dict(backend.rows("SELECT name, value FROM store_settings"))
    assert settings_rows["dedup_scope"] == "namespace" and len(bytes.fromhex(settings_rows["dedup_secret"])) == 32
    with pytest.raises(ValueError, match=r"made with dedup_scope='namespace', not 'store'"):
        backend.open(namespace="alice", dedup_scope="store")
    with pytest.raises(ValueError, match="`dedup_scope` must be"):
        backend.open(namespace="alice", dedup_scope="tenant")


def test_a_store_first_written_without_a_scope_is_of_store_scope_for_good(backend: Backend) -> None:
    reader = backend.open(namespace="alice")
    assert dict(backend.rows("SELECT name, value FROM store_settings")).get("dedup_scope") is None  # opening chose none
    reader.write(key="a.txt", content="the first write records the default")
    assert dict(backend.rows("SELECT name, value FROM store_settings"))["dedup_scope"] == "store"
    with pytest.raises(ValueError, match=r"made with dedup_scope='store', not 'namespace'"):
        backend.open(namespace="alice", dedup_scope="namespace")


def test_namespace_scope_survives_serialisation(tmp_path: Path, allow_casstore_deserialization: None) -> None:
    store = ContentAddressedToolResultStore(tmp_path / "store", namespace="alice", dedup_scope="namespace")
    reference = store.write(key="a.txt", content="kept apart")
    store.close()
    with ContentAddressedToolResultStore.from_dict(store.to_dict()) as again:
        assert again.dedup_scope == "namespace" and again.read(reference) == "kept apart"


def test_under_namespace_scope_deltas_and_dictionaries_come_only_from_the_writing_namespace(backend: Backend) -> None:
    alice = backend.open(namespace="alice", dedup_scope="namespace")
    mallory = backend.open(namespace="mallory")
    # Alice stores a result and its next version (a delta on it), and enough small results to train a dictionary.
    alice.write(key="1_pytest_call_a.txt", content=listing(0))
    alice.write(key="2_pytest_call_b.txt", content=listing(3))
    for number in range(3 * TRAIN_AFTER):
        alice.write(key=f"{number}_stat_call_{number:016x}.txt", content=record(number))
    # Mallory writes near-copies of alice's results: with alice's base or dictionary they would be far smaller.
    first = mallory.write(key="1_pytest_call_c.txt", content=listing(5))
    mallory.write(key="2_pytest_call_d.txt", content=listing(6))
    for number in range(TRAIN_AFTER // 2):
        mallory.write(key=f"{number}_stat_call_{number:016x}.txt", content=record(1000 + number))

    rows = backend.rows(
        "SELECT b.namespace, n.namespace, k.tool FROM blobs b LEFT JOIN blobs n ON n.id = b.base_id "
        "LEFT JOIN dictionaries k ON k.id = b.dictionary_id WHERE b.encoding <> 'plain'"
    )
    assert ("alice", "alice", None) in rows  # alice's second version is a delta on her first
    assert any(tool is not None and owner == "alice" for owner, _, tool in rows)  # and she has a dictionary
    for owner, base_owner, tool in rows:
        assert base_owner in (None, owner)
        assert tool is None or tool.startswith(f"{owner}\x1f")
    # Mallory's second version is a delta on her own first: what a namespace learns from itself it uses.
    assert ("mallory", "mallory", None) in rows
    trained_on = backend.rows(
        "SELECT k.tool, s.digest FROM dictionary_samples s JOIN dictionaries k ON k.id = s.dictionary_id"
    )
    alice_blobs = {row[0] for row in backend.rows("SELECT digest FROM blobs WHERE namespace = 'alice'")}
    assert trained_on and all(digest in alice_blobs for _, digest in trained_on)
    assert mallory.read(first) == listing(5)
    assert verify(mallory).clean


def test_under_store_scope_a_namespace_does_use_anothers_base(backend: Backend) -> None:
    # The leak `namespace` scope closes: here mallory's write is a delta on alice's result.
    alice = backend.open(namespace="alice", dedup_scope="store")
    mallory = backend.open(namespace="mallory")
    theirs = alice.write(key="1_pytest_call_a.txt", content=listing(0))
    mine = mallory.write(key="1_pytest_call_b.txt", content=listing(2))
    rows = backend.rows(
        "SELECT n.digest FROM blobs b JOIN blobs n ON n.id = b.base_id WHERE b.digest = ?", (digest_of(mine),)
    )
    assert rows == [(digest_of(theirs),)]


NAMESPACES = st.text(
    st.characters(codec="utf-8", categories=["L", "N", "P", "S"], include_characters=" "), min_size=1, max_size=40
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    namespaces=st.lists(NAMESPACES, min_size=1, max_size=3, unique=True),
    writes=st.lists(
        st.tuples(st.integers(min_value=0, max_value=2), st.binary(max_size=300) | st.text(max_size=300)),
        min_size=1,
        max_size=12,
    ),
)
def test_under_namespace_scope_blobs_are_per_namespace_and_content(
    tmp_path_factory: pytest.TempPathFactory, namespaces: list[str], writes: list[tuple[int, str | bytes]]
) -> None:
    root = tmp_path_factory.mktemp("store")
    stores = {
        namespace: ContentAddressedToolResultStore(root, namespace=namespace, dedup_scope="namespace")
        for namespace in namespaces
    }
    try:
        references: dict[tuple[str, str | bytes], str] = {}
        for which, content in writes:
            namespace = namespaces[which % len(namespaces)]
            reference = stores[namespace].write(key="k.bin", content=content)
            assert references.setdefault((namespace, content), reference) == reference  # deduplicated within
        for (namespace, content), reference in references.items():
            assert stores[namespace].read(reference) == content
            for other in set(stores) - {namespace}:
                if (other, content) not in references:
                    with pytest.raises(ReferenceNotFoundError):
                        stores[other].read(reference)
        # One blob per namespace and distinct content (text and bytes of the same bytes are one blob).
        distinct = {
            (namespace, content if isinstance(content, bytes) else content.encode())
            for namespace, content in references
        }
        counts = stores[namespaces[0]].repository.history.encoding_counts()
        assert counts["plain"] + counts["dictionary"] + counts["delta"] == len(distinct)
        assert verify(stores[namespaces[0]]).clean
    finally:
        for store in stores.values():
            store.close()


def test_stats_json_shows_the_dedup_scope(tmp_path: Path) -> None:
    for scope in ("store", "namespace"):
        root = tmp_path / scope
        with ContentAddressedToolResultStore(root, namespace="alice", dedup_scope=scope) as store:
            store.write(key="a.txt", content="something")
        result = CliRunner().invoke(cli, ["stats", "--root", str(root), "--json"], catch_exceptions=False)
        assert result.exit_code == 0, result.stderr
        figures = json.loads(result.stdout)
        assert (figures["dedup_scope"], figures["scope"]) == (scope, "store")
        text = CliRunner().invoke(cli, ["stats", "--root", str(root)], catch_exceptions=False).stdout
        assert f"dedup scope      {scope}" in text


def test_a_copy_of_a_namespace_scoped_store_keeps_its_scope_and_references(tmp_path: Path) -> None:
    source = ContentAddressedToolResultStore(tmp_path / "source", namespace="alice", dedup_scope="namespace")
    mallory = ContentAddressedToolResultStore(tmp_path / "source", namespace="mallory")
    references = {
        source.write(key="1_pytest_call_a.txt", content=listing(0)): listing(0),
        source.write(key="2_pytest_call_b.txt", content=listing(1)): listing(1),  # a delta
        mallory.write(key="1_pytest_call_a.txt", content=listing(0)): listing(0),
    }
    with ContentAddressedToolResultStore(tmp_path / "target", namespace="alice") as target:
        report = copy_store(source, target)
        assert report.complete and target.repository.dedup_scope.name == "namespace"
        assert copy_store(source, target).blobs_copied == 0  # run again, it adds only what is missing
        for reference, content in list(references.items())[:2]:
            assert target.read(reference) == content
        assert verify(target).clean
    # A store of another scope that holds blobs cannot take the copy: its references would not be the source's.
    with ContentAddressedToolResultStore(tmp_path / "other", dedup_scope="store") as other:
        other.write(key="a.txt", content="already here")
        with pytest.raises(ValueError, match="hash alike"):
            copy_store(source, other)
    with ContentAddressedToolResultStore(tmp_path / "another", dedup_scope="namespace") as another:
        another.write(key="a.txt", content="already here")
        with pytest.raises(ValueError, match="with another secret"):
            copy_store(source, another)
    source.close()
    mallory.close()


def test_a_blob_is_verified_with_the_key_of_the_namespace_its_row_names(backend: Backend) -> None:
    alice = backend.open(namespace="alice", dedup_scope="namespace")
    reference = alice.write(key="a.txt", content="verified with alice's key")
    assert verify(alice).clean
    # The same bytes, said to be keyed with another namespace's key, no longer have their digest.
    backend.execute("UPDATE blobs SET namespace = 'mallory' WHERE digest = ?", (digest_of(reference),))
    other = backend.open(namespace="alice")
    with pytest.raises(CorruptBlobError, match="another digest"):
        other.read(reference)
    assert not verify(other).clean


def test_under_namespace_scope_the_search_index_holds_each_namespaces_copy_apart(tmp_path: Path) -> None:
    root = tmp_path / "store"
    alice = ContentAddressedToolResultStore(root, namespace="alice", dedup_scope="namespace", search_index=True)
    mallory = ContentAddressedToolResultStore(root, namespace="mallory", search_index=True)
    eve = ContentAddressedToolResultStore(root, namespace="eve", search_index=True)
    content = SECRET_TEMPLATE.format(employee=17, salary=3900)
    try:
        theirs = alice.write(key="1_payroll_call_1.txt", content=content)
        mine = mallory.write(key="1_payroll_call_1.txt", content=content)
        found_by_alice = alice.search(terms=["employee 17"]).hits
        found_by_mallory = mallory.search(terms=["employee 17"]).hits
        assert [hit.reference for hit in found_by_alice] == [theirs]
        assert [hit.reference for hit in found_by_mallory] == [mine]
        assert eve.search(terms=["employee 17"]).hits == []
    finally:
        for store in (alice, mallory, eve):
            store.close()
    with contextlib.closing(sqlite3.connect(root / "index.db")) as connection:
        documents = {row[0] for row in connection.execute("SELECT digest FROM search_documents")}
    assert documents == {digest_of(theirs), digest_of(mine)}


def test_a_write_prepared_for_one_namespace_is_refused_in_another(backend: Backend) -> None:
    alice = backend.open(namespace="alice", dedup_scope="namespace")
    mallory = backend.open(namespace="mallory")
    prepared = alice.prepare_write(key="a.txt", content="hashed with alice's key")
    before = backend.snapshot()
    with pytest.raises(ValueError, match="hashed for namespace 'alice', but is written in namespace 'mallory'"):
        mallory.write_prepared(prepared)
    assert backend.snapshot() == before
    assert alice.read(alice.write_prepared(prepared)) == "hashed with alice's key"


def _crc_patch(prefix: bytes, target: int, *, start: int = 0) -> bytes:
    """
    :returns: `prefix` and 4 bytes after it, chosen so that `zlib.crc32(result, start)` is `target` (CRC is linear,
        so this takes no search).
    """
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0xEDB88320 if crc & 1 else crc >> 1
        table.append(crc)
    by_top_byte = {entry >> 24: index for index, entry in enumerate(table)}
    crc, indexes = target ^ 0xFFFFFFFF, []
    for _ in range(4):
        index = by_top_byte[crc >> 24]
        indexes.append(index)
        crc = ((crc ^ table[index]) << 8) & 0xFFFFFFFF
    register, patch = zlib.crc32(prefix, start) ^ 0xFFFFFFFF, bytearray()
    for index in reversed(indexes):
        byte = (register ^ index) & 0xFF
        patch.append(byte)
        register = table[(register ^ byte) & 0xFF] ^ (register >> 8)
    return prefix + bytes(patch)


@settings(max_examples=60, deadline=None)
@given(alices=st.binary(min_size=1024, max_size=4096), seed=st.integers(0, 2**32 - 1))
def test_under_namespace_scope_no_crafted_head_finds_another_namespaces_base(alices: bytes, seed: int) -> None:
    # Mallory crafts a head whose CRC-32 equals the one alice's result starts with, as if guessing it: under
    # namespace scope the look-up still finds only mallory's own bases, so its outcome says nothing about alice's.
    learner = learning_module.Learner()
    alice_anchors = learner.anchors(alices, "alice")
    learner.stored(tool="t", digest="a" * 64, data=alices, depth=0, anchors=alice_anchors, namespace="alice")
    filler = random.Random(seed).randbytes(2048)
    own = b"M" * learning_module.ANCHOR_BYTES + filler
    learner.stored(
        tool="t", digest="b" * 64, data=own, depth=0, anchors=learner.anchors(own, "mallory"), namespace="mallory"
    )
    alice_head = alices[: learning_module.ANCHOR_BYTES]
    prefix = b"Z" * (learning_module.ANCHOR_BYTES - 4)
    # Heads that collide with alice's under the plain CRC and under a CRC seeded with each namespace's name.
    heads = [
        _crc_patch(prefix, zlib.crc32(alice_head)),
        _crc_patch(prefix, zlib.crc32(alice_head, zlib.crc32(b"alice")), start=zlib.crc32(b"mallory")),
    ]
    for head in heads:
        found = learner.base_for(learner.anchors(head + filler, "mallory"))  # the same tail as mallory's own base
        assert found is not None and found.namespace == "mallory" and found.digest == "b" * 64
    assert learner.base_for(learner.anchors(alices, "mallory")) is None


def test_a_lazy_store_asked_for_one_scope_refuses_to_write_into_an_index_made_with_the_other(tmp_path: Path) -> None:
    root = tmp_path / "store"
    asked_store = ContentAddressedToolResultStore(root, namespace="alice", dedup_scope="store")  # creates nothing yet
    assert not root.exists()
    with ContentAddressedToolResultStore(root, namespace="bob", dedup_scope="namespace") as made:
        made.write(key="b.txt", content="bob's result")
    with asked_store, pytest.raises(ValueError, match="dedup_scope='namespace', not 'store'"):
        asked_store.write(key="a.txt", content="alice's result")
    with contextlib.closing(sqlite3.connect(root / "index.db")) as connection:
        assert connection.execute("SELECT namespace FROM writes").fetchall() == [("bob",)]


def test_a_lazy_store_asked_for_namespace_scope_records_it_with_its_first_write(tmp_path: Path) -> None:
    root = tmp_path / "store"
    with ContentAddressedToolResultStore(root, namespace="alice", dedup_scope="namespace") as store:
        store.write(key="a.txt", content="alice's result")
    with ContentAddressedToolResultStore(root) as reopened:
        assert reopened.repository.dedup_scope.name == "namespace"


def test_the_secret_is_in_no_printed_form_of_the_store_or_its_scope(tmp_path: Path) -> None:
    root = tmp_path / "store"
    with ContentAddressedToolResultStore(root, namespace="alice", dedup_scope="namespace") as store:
        store.write(key="a.txt", content="something")
        with sqlite3.connect(root / "index.db") as connection:
            (secret,) = connection.execute("SELECT value FROM store_settings WHERE name = 'dedup_secret'").fetchone()
        scope = store.repository.dedup_scope
        assert scope.secret == bytes.fromhex(secret)  # the scope does hold it: it keys the digests
        printed = " ".join((repr(scope), str(scope), repr(store), str(store.to_dict())))
        assert secret not in printed
        assert repr(scope.secret) not in printed


def test_an_empty_target_of_namespace_scope_that_takes_the_sources_secret_is_told_so(tmp_path: Path) -> None:
    with ContentAddressedToolResultStore(tmp_path / "source", dedup_scope="namespace") as source:
        reference = source.write(key="a.txt", content="keyed with the source's secret")
        with ContentAddressedToolResultStore(tmp_path / "target", dedup_scope="namespace") as target:
            target.record_compaction(compaction_id="c1", compaction=CompactionRecord(10, 10, 5))  # a secret, no blob
            report = copy_store(source, target)
            assert report.dedup_scope_adopted == "namespace"  # the same scope, another secret: still said
            assert target.read(reference) == "keyed with the source's secret"
            assert copy_store(source, target).dedup_scope_adopted is None
