"""
The learned encodings (docs/compression.md): trained dictionaries and deltas, on both backends, and the rules that
keep them safe: what a kept blob needs is kept, a damaged dictionary or base is damage of every blob that needs it and
never wrong bytes, and `learn=False` turns them off while everything stays readable.
"""

import contextlib
import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from casstore import ContentAddressedToolResultStore, CorruptBlobError
from casstore.blobs import learning as learning_module
from casstore.blobs.collection import BlobCollection
from casstore.blobs.frames import FrameCodec, FrameDictionary
from casstore.blobs.groups import tool_of
from casstore.blobs.learning import learner_for
from casstore.maintenance.checks import collect_garbage, verify
from casstore.references import content_digest, split_reference
from casstore.stores.local import RepositoryToolResultStore
from tests.learned_crash_child import content_for
from tests.learned_results import listing, record
from tests.store_backends import LONG_AGO, Backend, age_every_blob

TRAIN_AFTER = 24


@pytest.fixture(autouse=True)
def _train_early(monkeypatch: pytest.MonkeyPatch) -> None:
    # A tool's first dictionary after a few dozen results, so that a test need not write a hundred.
    monkeypatch.setattr(learning_module, "TRAIN_AFTER", TRAIN_AFTER)


def digest_of(reference: str) -> str:
    return split_reference(reference)[0]


def encodings(backend: Backend) -> dict[str, tuple[str, str | None]]:
    """:returns: Each blob's `(encoding, needs)`: its `blobs.encoding`, and its dictionary's or base's digest."""
    return {
        row[0]: (row[1], row[2])
        for row in backend.rows(
            "SELECT b.digest, b.encoding, coalesce(k.digest, n.digest) FROM blobs b "
            "LEFT JOIN dictionaries k ON k.id = b.dictionary_id LEFT JOIN blobs n ON n.id = b.base_id"
        )
    }


def train_a_dictionary(
    store: RepositoryToolResultStore, *, tool: str = "stat", count: int = 3 * TRAIN_AFTER
) -> dict[str, str]:
    """Write `count` small results of `tool`; returns reference -> content."""
    written = {}
    for number in range(count):
        content = record(number if tool == "stat" else number + 10_000)
        written[store.write(key=f"{number}_{tool}_call_{number:016x}.txt", content=content)] = content
    return written


# --- The encodings, on both backends ---------------------------------------------------------------------------------


def test_a_near_copy_is_stored_as_a_delta_of_its_earlier_version(backend: Backend) -> None:
    store = backend.open()
    first = store.write(key="1_pytest_call_a.txt", content=listing(0))
    second = store.write(key="2_pytest_call_b.txt", content=listing(3))
    found = encodings(backend)
    assert found[digest_of(first)] == ("plain", None)
    assert found[digest_of(second)] == ("delta", digest_of(first))
    sizes = dict(backend.rows("SELECT digest, stored_size FROM blobs"))
    plain = len(zstandard.ZstdCompressor(level=3, write_checksum=True).compress(listing(3).encode()))
    assert sizes[digest_of(second)] < 0.2 * plain
    # Another store object (another host, another process) reads it back, verified, through its base.
    other = backend.open()
    assert other.read(second) == listing(3)
    assert other.repository.retention.blob_dependencies([digest_of(second)]) == {digest_of(first)}
    assert verify(other).clean


def test_small_results_of_a_tool_get_a_trained_dictionary(backend: Backend) -> None:
    store = backend.open()
    written = train_a_dictionary(store)
    dictionaries = backend.rows("SELECT digest, tool, samples, active FROM dictionaries")
    assert [(tool, active) for _, tool, _, active in dictionaries] == [("stat.txt", 1)]
    assert dictionaries[0][2] == TRAIN_AFTER
    dictionary = dictionaries[0][0]
    found = encodings(backend)
    with_dictionary = [reference for reference in written if found[digest_of(reference)] == ("dictionary", dictionary)]
    # Every result written after the training (and none before it) uses the dictionary.
    assert len(with_dictionary) == len(written) - TRAIN_AFTER
    other = backend.open()
    for reference, content in written.items():
        assert other.read(reference) == content
    # The dictionary is no blob: its bytes are in its row, with the results it was trained on.
    assert other.repository.retention.blob_dependencies([digest_of(with_dictionary[0])]) == set()
    trained_on = {row[0] for row in backend.rows("SELECT digest FROM dictionary_samples")}
    assert trained_on and trained_on <= {digest_of(reference) for reference in written}
    report = verify(other)
    assert report.clean and report.blobs_checked == len(written)


def incompressible(number: int) -> bytes:
    """A small binary result a dictionary cannot help with: one short header, then bytes that repeat nowhere."""
    return b"IMAGE v1\x00" + random.Random(number).randbytes(2048)


@pytest.mark.parametrize(("plain_gain", "adopted"), [(learning_module.PLAIN_GAIN, False), (1.5, True)])
def test_a_dictionary_that_does_not_beat_plain_frames_on_held_out_results_is_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, plain_gain: float, adopted: bool
) -> None:
    # zstd trains a dictionary from these, but it compresses the held-out ones to more bytes than plain frames take:
    # it is dropped, and the tool's results stay plain. With the rule relaxed, the same dictionary is used.
    monkeypatch.setattr(learning_module, "PLAIN_GAIN", plain_gain)
    root = tmp_path / "store"
    with ContentAddressedToolResultStore(root) as store:
        for number in range(3 * TRAIN_AFTER):
            store.write(key=f"{number}_view_image_call_{number:016x}.png", content=incompressible(number))
        assert store.repository.history.learning_figures()["trainings"] >= 1
    with contextlib.closing(sqlite3.connect(root / "index.db")) as connection:
        dictionaries = connection.execute("SELECT count(*) FROM dictionaries").fetchone()[0]
        kinds = {row[0] for row in connection.execute("SELECT encoding FROM blobs")}
    assert (dictionaries == 1, "dictionary" in kinds) == (adopted, adopted)


def test_learned_frames_are_kept_in_the_index_only(backend: Backend) -> None:
    """A file or object holds plain frames only: its row and the frame it describes change in one transaction."""
    store = backend.open(inline_max=600)
    store.write(key="1_pytest_call_a.txt", content=listing(0))
    delta = store.write(key="2_pytest_call_b.txt", content=listing(1))
    train_a_dictionary(store)
    learned = {digest for digest, (encoding, _) in encodings(backend).items() if encoding != "plain"}
    assert digest_of(delta) in learned
    stored_in = dict(backend.rows("SELECT digest, stored_in FROM blobs"))
    assert {stored_in[digest] for digest in learned} == {"index"}
    assert backend.stored_elsewhere in set(stored_in.values())


def test_learn_false_stores_plain_frames_and_reads_learned_ones(backend: Backend) -> None:
    learning = backend.open()
    base = learning.write(key="1_pytest_call_a.txt", content=listing(0))
    delta = learning.write(key="2_pytest_call_b.txt", content=listing(5))
    written = train_a_dictionary(learning)
    before = encodings(backend)
    plain = backend.open(learn=False)
    assert plain.read(delta) == listing(5) and plain.read(base) == listing(0)
    for reference, content in written.items():
        assert plain.read(reference) == content
    new = plain.write(key="3_pytest_call_c.txt", content=listing(9))
    more = train_a_dictionary(plain, tool="find", count=2 * TRAIN_AFTER)
    after = encodings(backend)
    assert after[digest_of(new)] == ("plain", None)
    assert all(after[digest_of(reference)] == ("plain", None) for reference in more)
    assert backend.count("dictionaries") == 1
    assert {digest: after[digest] for digest in before} == before


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    edits=st.lists(
        st.tuples(st.integers(0, 3), st.integers(0, 40), st.binary(min_size=0, max_size=30)), min_size=1, max_size=25
    )
)
def test_whatever_is_written_reads_back_exactly(
    tmp_path_factory: pytest.TempPathFactory, edits: list[tuple[int, int, bytes]]
) -> None:
    """Versions of a few results edited at random, and small ones: every read is exact, in a reopened store too."""
    root = tmp_path_factory.mktemp("learned")
    versions = [listing(0, seed=seed).encode() for seed in range(4)]
    written: dict[str, bytes] = {}
    with ContentAddressedToolResultStore(root) as store:
        for step, (which, position, inserted) in enumerate(edits):
            data = versions[which]
            cut = len(data) * position // 40
            versions[which] = data[:cut] + inserted + data[cut:]
            written[store.write(key=f"{step}_cat_call_{which}.bin", content=versions[which])] = versions[which]
            small = record(step).encode() + inserted
            written[store.write(key=f"{step}_stat_call_{step}.bin", content=small)] = small
        for reference, content in written.items():
            assert store.read(reference) == content
    with ContentAddressedToolResultStore(root) as reopened:
        for reference, content in written.items():
            assert reopened.read(reference) == content
        assert verify(reopened).clean


def test_tool_names_come_from_haystack_keys() -> None:
    assert tool_of("12_read_file_call_0123456789abcdef.txt") == "read_file.txt"
    assert tool_of("3_search_toolu_01ABCdef_2.txt") == "search.txt"
    assert tool_of("7_screenshot_call_ab_1.png") == "screenshot.png"
    assert tool_of("notes.md") == ".md"
    assert tool_of("no-extension") == "."


# --- The rules that keep it safe --------------------------------------------------------------------------------------


def test_forgetting_the_namespace_that_wrote_a_base_keeps_it_while_a_delta_needs_it(backend: Backend) -> None:
    alice, bob = backend.open(namespace="alice"), backend.open(namespace="bob")
    base = alice.write(key="1_pytest_call_a.txt", content=listing(0))
    delta = bob.write(key="1_pytest_call_b.txt", content=listing(2))
    assert encodings(backend)[digest_of(delta)] == ("delta", digest_of(base))
    age_every_blob(backend)
    report = collect_garbage(alice, namespace="alice", grace=timedelta(0))
    assert report.writes_forgotten == 1 and report.blobs_deleted == 0
    fresh = backend.open(namespace="bob")
    assert fresh.read(delta) == listing(2)
    assert verify(fresh).clean
    # Once bob forgets too, the delta goes and then its base, in the same collection.
    report = collect_garbage(fresh, namespace="bob", grace=timedelta(0))
    assert report.blobs_deleted == 2 and backend.count("blobs") == 0


def test_a_base_that_a_delta_comes_to_need_after_gc_listed_it_is_kept(backend: Backend) -> None:
    """
    gc lists its candidates without the write lock; a write may then store a delta against one of them. gc asks what
    is needed again under its lock, before deleting, and keeps that base (migration 0020: no index answers it per blob).
    """
    alice, bob = backend.open(namespace="alice"), backend.open(namespace="bob")
    base = alice.write(key="1_pytest_call_a.txt", content=listing(0))
    age_every_blob(backend)
    real = BlobCollection.collectable
    written: list[str] = []

    def collectable_then_a_delta(self: BlobCollection, connection: Any, *, grace: timedelta) -> list[tuple[str, int]]:
        candidates = real(self, connection, grace=grace)
        if not written:  # the first pass only: a delta against a candidate, while gc holds no lock
            assert digest_of(base) in {digest for digest, _ in candidates}
            written.append(bob.write(key="1_pytest_call_b.txt", content=listing(2)))
        return candidates

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(BlobCollection, "collectable", collectable_then_a_delta)
        collector = backend.open(namespace="alice")  # opened after the patch: a store binds its parts' verbs
        report = collect_garbage(collector, namespace="alice", grace=timedelta(0))
    (delta,) = written
    assert encodings(backend)[digest_of(delta)] == ("delta", digest_of(base))
    assert report.writes_forgotten == 1 and report.blobs_deleted == 0
    fresh = backend.open(namespace="bob")
    assert fresh.read(delta) == listing(2)
    assert verify(fresh).clean


def test_retention_by_size_counts_the_base_a_kept_delta_needs(backend: Backend) -> None:
    alice, bob = backend.open(namespace="alice"), backend.open(namespace="bob")
    base = alice.write(key="1_pytest_call_a.txt", content=listing(0))
    delta = bob.write(key="1_pytest_call_b.txt", content=listing(2))
    assert encodings(backend)[digest_of(delta)] == ("delta", digest_of(base))
    sizes = dict(backend.rows("SELECT digest, stored_size FROM blobs"))
    # Bob's one write needs his delta and, through it, alice's base: both count, though no bob write names the base.
    assert bob.repository.retention.needed_bytes(namespace="bob") == sizes[digest_of(base)] + sizes[digest_of(delta)]
    assert bob.repository.retention.needed_bytes(namespace=None) == sizes[digest_of(base)] + sizes[digest_of(delta)]
    age_every_blob(backend)
    # Room for the delta alone is not room for what reading it needs: alice's older write goes, the base stays.
    report = collect_garbage(alice, max_size=sizes[digest_of(base)] + sizes[digest_of(delta)], grace=timedelta(0))
    assert report.writes_forgotten == 0 and report.blobs_deleted == 0
    report = collect_garbage(alice, max_size=sizes[digest_of(delta)], grace=timedelta(0))
    assert report.writes_forgotten == 2 and report.blobs_deleted == 2  # nothing fits but both: both writes go
    assert backend.count("blobs") == 0


def test_gc_keeps_the_dictionary_in_use_and_the_retired_one_while_blobs_need_it(backend: Backend) -> None:
    store = backend.open(namespace="alice")
    train_a_dictionary(store)
    backend.execute("UPDATE dictionaries SET active = 0")  # as when a better one replaced it
    other = backend.open(namespace="bob")
    kept = other.write(key="1_notes_call_x.txt", content="kept by bob")
    age_every_blob(backend)
    # Alice's results go; her dictionary's dependents go with them, and then the dictionary, retired and unneeded.
    report = collect_garbage(store, namespace="alice", grace=timedelta(0))
    assert report.dictionaries_deleted == 1 and backend.count("dictionaries") == 0
    assert backend.count("dictionary_samples") == 0
    assert other.read(kept) == "kept by bob"
    # A dictionary in use goes once the results it was trained on are all deleted and no kept blob uses it: a store
    # whose writes are all forgotten keeps nothing they taught it.
    third = backend.open(namespace="carol")
    train_a_dictionary(third, tool="find")
    collect_garbage(third, namespace="carol", grace=timedelta(hours=1))
    assert backend.count("dictionaries") == 1  # its samples wait out the grace period
    age_every_blob(backend)
    collect_garbage(third, grace=timedelta(0))
    assert backend.count("dictionaries") == 0 and backend.rows("SELECT count(*) FROM blobs") == [(1,)]  # bob's
    # The writer that trained it finds it gone: its next results of that tool are stored plain, and read back.
    again = {third.write(key=f"{n}_find_call_{n:016x}.txt", content=record(20_000 + n)): n for n in range(5)}
    assert all(third.read(reference) == record(20_000 + n) for reference, n in again.items())
    assert verify(third).clean


def test_a_retired_dictionary_stays_while_a_kept_blob_needs_it(backend: Backend) -> None:
    """gc keeps a dictionary nothing references and no write uses any more while a kept frame needs it."""
    alice, bob = backend.open(namespace="alice"), backend.open(namespace="bob")
    train_a_dictionary(alice)
    (dictionary,) = [row[0] for row in backend.rows("SELECT digest FROM dictionaries")]
    kept = {bob.write(key=f"{n}_stat_call_{n:016x}.txt", content=record(50_000 + n)): n for n in range(5)}
    assert {encodings(backend)[digest_of(reference)] for reference in kept} == {("dictionary", dictionary)}
    backend.execute("UPDATE dictionaries SET active = 0")  # as when a better one replaced it
    age_every_blob(backend)
    report = collect_garbage(alice, namespace="alice", grace=timedelta(0))
    assert report.blobs_deleted > 0  # alice's results went
    assert backend.rows("SELECT count(*) FROM dictionaries WHERE digest = ?", (dictionary,)) == [(1,)]
    # It holds fragments of alice's deleted results, and stays while bob's blobs need it: gc says so.
    assert report.dictionaries_deleted == 0 and report.dictionaries_kept == 1
    fresh = backend.open(namespace="bob")
    assert all(fresh.read(reference) == record(50_000 + n) for reference, n in kept.items())
    assert verify(fresh).clean


def _damage_frame(backend: Backend, digest: str) -> None:
    """Replace a blob's frame in the index by a valid zstd frame of other content, as a damaged disk could leave."""
    (size,) = backend.rows("SELECT size FROM blobs WHERE digest = ?", (digest,))[0]
    forged = zstandard.ZstdCompressor(write_content_size=True).compress(bytes(size))
    backend.execute(
        "UPDATE blob_frames SET frame = ? WHERE blob_id = (SELECT id FROM blobs WHERE digest = ?)", (forged, digest)
    )


def test_a_damaged_dictionary_is_damage_of_every_blob_that_needs_it(backend: Backend) -> None:
    store = backend.open()
    written = train_a_dictionary(store)
    (dictionary,) = [row[0] for row in backend.rows("SELECT digest FROM dictionaries")]
    dependents = {digest for digest, (_, needs) in encodings(backend).items() if needs == dictionary}
    # Its bytes in the table changed: a valid dictionary of the same size, trained on nothing of ours.
    (size,) = backend.rows("SELECT length(data) FROM dictionaries")[0]
    backend.execute("UPDATE dictionaries SET data = ?", (bytes(size),))
    fresh = backend.open()  # nothing cached: what is read comes from the index
    for reference in written:
        if digest_of(reference) in dependents:
            with pytest.raises(CorruptBlobError, match=dictionary):
                fresh.read(reference)
        else:
            assert fresh.read(reference) == written[reference]
    report = verify(fresh)
    assert {digest for digest, _ in report.corrupt} == dependents | {dictionary}
    # The store that trained it still holds it verified in memory: it reads right, and its verify sees the damage.
    assert {digest for digest, _ in verify(store).corrupt} == dependents | {dictionary}


def test_a_damaged_or_forged_base_never_gives_wrong_bytes(backend: Backend) -> None:
    store = backend.open()
    base = store.write(key="1_pytest_call_a.txt", content=listing(0))
    other = store.write(key="1_pytest_call_z.txt", content=listing(0, seed=9))
    delta = store.write(key="2_pytest_call_b.txt", content=listing(4))
    assert encodings(backend)[digest_of(delta)] == ("delta", digest_of(base))
    delta_row = "digest = '" + digest_of(delta) + "'"
    # The delta's row made to name another base: decoding against it cannot give the content's digest.
    backend.execute(
        f"UPDATE blobs SET base_id = (SELECT id FROM blobs WHERE digest = ?) WHERE {delta_row}", (digest_of(other),)
    )
    with pytest.raises(CorruptBlobError):
        backend.open().read(delta)
    # A cycle (the base made a delta of its own delta) is refused, not followed for ever.
    backend.execute(
        f"UPDATE blobs SET base_id = (SELECT id FROM blobs WHERE digest = ?) WHERE {delta_row}", (digest_of(base),)
    )
    (delta_id,) = backend.rows(f"SELECT id FROM blobs WHERE {delta_row}")[0]
    backend.execute("UPDATE blobs SET encoding = 'delta', base_id = ? WHERE digest = ?", (delta_id, digest_of(base)))
    with pytest.raises(CorruptBlobError):
        backend.open().read(delta)
    backend.execute("UPDATE blobs SET encoding = 'plain', base_id = NULL WHERE digest = ?", (digest_of(base),))
    # A row naming a base that has no row at all: the delta cannot be decoded, and verify says so.
    backend.execute(f"UPDATE blobs SET base_id = ? WHERE {delta_row}", (10**9,))
    with pytest.raises(CorruptBlobError, match="no row"):
        backend.open().read(delta)
    assert [digest for digest, _ in verify(backend.open()).corrupt] == [digest_of(delta)]
    backend.execute(
        f"UPDATE blobs SET base_id = (SELECT id FROM blobs WHERE digest = ?) WHERE {delta_row}", (digest_of(base),)
    )
    assert backend.open().read(delta) == listing(4)
    # The base itself damaged: its delta is damaged too, for reads and for verify.
    _damage_frame(backend, digest_of(base))
    with pytest.raises(CorruptBlobError, match=digest_of(base)):
        backend.open().read(delta)
    report = verify(backend.open())
    assert {digest for digest, _ in report.corrupt} == {digest_of(base), digest_of(delta)}


def test_a_base_collected_meanwhile_makes_the_write_store_plain(backend: Backend) -> None:
    """A write whose base gc took after it was chosen stores its content plain, never a delta of nothing."""
    store = backend.open(namespace="alice")
    store.write(key="1_pytest_call_a.txt", content=listing(0))
    age_every_blob(backend)
    collect_garbage(backend.open(), namespace="alice", grace=timedelta(0))
    assert backend.count("blobs") == 0
    # `store` still remembers the base as a candidate, and has its content cached: the write must not use it.
    again = store.write(key="2_pytest_call_b.txt", content=listing(1))
    assert encodings(backend)[digest_of(again)] == ("plain", None)
    assert backend.open(namespace="alice").read(again) == listing(1)


def test_a_damaged_base_read_from_the_index_is_never_used_again(backend: Backend) -> None:
    """
    A delta read whose base is not in memory reads the base from the index and checks its digest: a forged base makes
    the read fail naming the base, and what was decoded from it is kept for nothing, not for the next write's delta.
    """
    writer = backend.open()
    base = writer.write(key="1_pytest_call_a.txt", content=listing(0))
    delta = writer.write(key="2_pytest_call_b.txt", content=listing(3))
    assert encodings(backend)[digest_of(delta)] == ("delta", digest_of(base))
    _damage_frame(backend, digest_of(base))
    reader = backend.open()  # shares the writer's learner (its candidates), not its memory of verified content
    for _ in range(2):
        with pytest.raises(CorruptBlobError, match=f"needs its base {digest_of(base)}"):
            reader.read(delta)
    later = reader.write(key="3_pytest_call_c.txt", content=listing(5))
    assert encodings(backend)[digest_of(later)][0] != "delta"
    assert backend.open().read(later) == listing(5)
    assert {digest for digest, _ in verify(backend.open()).corrupt} == {digest_of(base), digest_of(delta)}


def test_a_base_read_from_the_index_is_verified_once_and_kept(backend: Backend) -> None:
    """
    The base a delta read had to read from the index is hashed and kept: the next read through it decodes one frame,
    from memory (so damage done to the stored base after that is not seen by this store, as with a dictionary it
    holds; `verify` reads afresh and reports it).
    """
    writer = backend.open()
    base = writer.write(key="1_pytest_call_a.txt", content=listing(0))
    delta = writer.write(key="2_pytest_call_b.txt", content=listing(3))
    assert encodings(backend)[digest_of(delta)] == ("delta", digest_of(base))
    reader = backend.open()  # its own memory of verified content: the base is not in it
    assert reader.read(delta) == listing(3)
    _damage_frame(backend, digest_of(base))
    assert reader.read(delta) == listing(3)
    with pytest.raises(CorruptBlobError, match=f"needs its base {digest_of(base)}"):
        backend.open().read(delta)
    assert {digest for digest, _ in verify(reader).corrupt} == {digest_of(base), digest_of(delta)}


def test_a_stale_id_of_a_collected_base_never_names_another_blob(backend: Backend) -> None:
    """The id this process remembers for a base is checked with its digest: another blob that took it is not needed."""
    store = backend.open(namespace="alice")
    store.write(key="1_pytest_call_a.txt", content=listing(0))
    age_every_blob(backend)
    collect_garbage(backend.open(), namespace="alice", grace=timedelta(0))
    assert backend.count("blobs") == 0
    other = store.write(key="1_other_call_x.txt", content=listing(0, seed=5))  # may take the base's old id
    again = store.write(key="2_pytest_call_b.txt", content=listing(1))
    found = encodings(backend)
    assert found[digest_of(again)][1] != digest_of(other)
    assert found[digest_of(again)] == ("plain", None)
    assert backend.open(namespace="alice").read(again) == listing(1)
    assert verify(backend.open()).clean


# --- Kills (SIGKILL, in real subprocesses) ----------------------------------------------------------------------------

REPOSITORY = Path(__file__).resolve().parents[2]


def _run_until_stalled(root: Path, mode: str, at: int, tmp_path: Path) -> list[tuple[int, str]]:
    """Start the child, wait (bounded) until it reaches the stalled step, SIGKILL it, and return what it reported."""
    marker = tmp_path / f"marker-{mode}-{at}"
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.learned_crash_child", str(root), mode, str(marker), str(at)],
        cwd=REPOSITORY,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not marker.exists():
            assert child.poll() is None, f"the {mode} child ended before its stalled step"
            assert time.monotonic() < deadline, f"the {mode} child never reached its stalled step"
            time.sleep(0.02)
        child.send_signal(signal.SIGKILL)
        output, _ = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == -signal.SIGKILL
    return [(int(number), reference) for number, reference in (line.split("\t") for line in output.splitlines())]


@pytest.mark.parametrize(
    ("mode", "at"),
    [("training", 1), ("training", 2), ("storing-dictionary", 1), ("delta", 1), ("delta", 7)],
)
def test_a_kill_while_learning_or_writing_a_delta_loses_nothing_reported(
    mode: str, at: int, store_root: Path, tmp_path: Path
) -> None:
    reported = _run_until_stalled(store_root, mode, at, tmp_path)
    assert reported, "the child reported no write before its stalled step"
    with ContentAddressedToolResultStore(store_root, namespace="writer") as store:
        for number, reference in reported:
            assert store.read(reference) == content_for(number)
        report = verify(store)
        assert report.ok, report
        learned = store.repository.history.encoding_counts()
    if mode == "delta":
        assert learned["delta"] >= at - 1  # the stalled one was never committed; those before it were
    # A write after the kill goes on, and learns again.
    with ContentAddressedToolResultStore(store_root, namespace="writer") as store:
        for number in range(len(reported), len(reported) + 4 * TRAIN_AFTER):
            reference = store.write(
                key=f"{number}_tool{number % 2}_call_{number:016x}.txt", content=content_for(number)
            )
            assert store.read(reference) == content_for(number)
        assert verify(store).ok
        assert store.repository.history.encoding_counts()["dictionary"] > 0


@pytest.mark.parametrize("at", [1, 3, 40])
def test_a_kill_during_gc_leaves_every_needed_base_and_dictionary(at: int, store_root: Path, tmp_path: Path) -> None:
    """Bob's deltas and dictionary-encoded results need Alice's blobs; gc forgetting Alice is killed inside."""
    written: dict[str, str] = {}
    with ContentAddressedToolResultStore(store_root, namespace="alice") as alice:
        for number in range(0, 3 * TRAIN_AFTER):
            alice.write(key=f"{number}_tool{number % 2}_call_{number:016x}.txt", content=content_for(number))
        for number in range(1000, 1040):
            alice.write(key=f"{number}_junk_call_x.txt", content=f"alice alone {number}" * 50)
        with ContentAddressedToolResultStore(store_root, namespace="bob") as bob:
            for number in range(3 * TRAIN_AFTER, 5 * TRAIN_AFTER):
                content = content_for(number)
                written[bob.write(key=f"{number}_tool{number % 2}_call_{number:016x}.txt", content=content)] = content
            counts = bob.repository.history.encoding_counts()
    assert counts["delta"] > 0 and counts["dictionary"] > 0
    with contextlib.closing(sqlite3.connect(store_root / "index.db")) as connection, connection:
        connection.execute("UPDATE blobs SET last_seen = ?", (LONG_AGO,))
    _run_until_stalled(store_root, "gc", at, tmp_path)
    with ContentAddressedToolResultStore(store_root, namespace="bob") as bob:
        for reference, content in written.items():
            assert bob.read(reference) == content
        assert verify(bob).ok
        # A gc that runs to its end keeps them too.
        collect_garbage(bob, namespace="alice", grace=timedelta(0))
        for reference, content in written.items():
            assert bob.read(reference) == content
        assert verify(bob).clean


# --- The frames, on their own -----------------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(base=st.binary(max_size=5000), data=st.binary(max_size=5000), other=st.binary(max_size=5000))
def test_a_delta_frame_decodes_with_its_base_and_never_to_wrong_bytes_with_another(
    base: bytes, data: bytes, other: bytes
) -> None:
    codec = FrameCodec(compression_level=3)
    digest = content_digest(data)
    frame = codec.encode(data, dictionary=FrameDictionary.base(content_digest(base), base))
    assert codec.decode(digest, len(data), frame, dictionary=FrameDictionary.base(content_digest(base), base)) == data
    for wrong in (FrameDictionary.base(content_digest(other), other), None):
        try:
            decoded = codec.decode(digest, len(data), frame, dictionary=wrong)
        except CorruptBlobError:
            continue
        assert decoded == data  # possible only when the frame did not use the base at all


@settings(max_examples=200, deadline=None)
@given(key=st.text(max_size=300))
def test_any_key_has_a_tool_group(key: str) -> None:
    tool = tool_of(key)
    assert isinstance(tool, str) and len(tool) <= 100 and tool == tool_of(key)


def test_a_fork_while_another_thread_holds_the_learners_lock_leaves_the_child_writing(store_root: Path) -> None:
    with ContentAddressedToolResultStore(store_root) as store:
        store.write(key="1_pytest_call_a.txt", content=listing(0))
        learner = learner_for(store.repository.description)
        held, release = threading.Event(), threading.Event()

        def hold() -> None:
            with learner._lock:
                held.set()
                release.wait(30)

        holder = threading.Thread(target=hold)
        holder.start()
        assert held.wait(10)
        pid = os.fork()
        if pid == 0:  # the child: the lock's holder does not exist here
            try:
                reference = store.write(key="2_pytest_call_b.txt", content=listing(1))
                os._exit(0 if store.read(reference) == listing(1) else 1)
            except BaseException:
                os._exit(2)
        release.set()
        holder.join()
        deadline = time.monotonic() + 60
        while (waited := os.waitpid(pid, os.WNOHANG)) == (0, 0):
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                pytest.fail("the forked child hung on the learner's lock")
            time.sleep(0.02)
        assert os.waitstatus_to_exitcode(waited[1]) == 0
