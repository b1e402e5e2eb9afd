"""Hostile references and keys, on both stores: nothing reads outside the store or across namespaces."""

import os
import string
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from casstore import (
    CasStoreError,
    ContentAddressedToolResultStore,
    CorruptBlobError,
    InvalidKeyError,
    InvalidReferenceError,
    ReferenceNotFoundError,
    StorageError,
    UnsafeBlobError,
)
from casstore.stores.local import RepositoryToolResultStore
from tests.helpers import blob_files, snapshot
from tests.store_backends import Backend

SECRET = "the content an attacker wants\n" * 400
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture
def two_namespaces(backend: Backend) -> tuple[RepositoryToolResultStore, str, str]:
    """Alice's store, a reference of hers, and a reference only Bob wrote, on either store."""
    bobs = backend.open(namespace="bob", inline_max=0).write(key="secret.txt", content=SECRET)
    alice = backend.open(namespace="alice", inline_max=0)
    alices = alice.write(key="mine.txt", content="alice's result")
    return alice, alices, bobs


def _tricks(alices: str, bobs: str, root: Path) -> list[object]:
    digest_path = bobs.removeprefix("blake3/")
    return [
        bobs,  # another namespace's valid reference
        bobs.upper(),
        bobs.replace(".txt", ".TXT"),
        bobs.replace(".txt", ".png"),  # valid digest, foreign extension
        alices.replace(".txt", ".png"),
        alices.replace(".txt", ""),
        alices.replace("blake3/", "blake3/bin/"),
        "../" + alices,
        alices + "/..",
        "blake3/../index.db",
        "blake3/../../../etc/passwd",
        str(root / "index.db"),
        "/" + alices,
        "blake3//" + digest_path,
        "blake3/" + digest_path.replace("/", "%2F"),
        "blake3/" + digest_path.replace("/", "%2f"),
        "blake3/" + digest_path.replace("/", "\u2215"),  # division slash
        "blake3/" + digest_path.replace("/", "\uff0f"),  # full-width solidus
        "blake3\\" + digest_path.replace("/", "\\"),
        alices.replace("a", "\u0430"),  # Cyrillic a
        alices + "\x00",
        alices.replace("/", "\x00/", 1),
        "blake3/" + digest_path[:2] + "/" + digest_path[3:],
        alices + " ",
        "\n" + alices,
        "file://" + alices,
        "blake3:" + digest_path,
        alices * 1000,
        "A" * 1_000_000,
        "",
        None,
        b"blake3",
        ("blake3", "ab"),
        0,
    ]


def test_known_tricks_get_invalid_or_not_found(
    two_namespaces: tuple[RepositoryToolResultStore, str, str], backend: Backend, tmp_path: Path
) -> None:
    alice, alices, bobs = two_namespaces
    for trick in _tricks(alices, bobs, getattr(backend, "root", tmp_path)):
        with pytest.raises((InvalidReferenceError, ReferenceNotFoundError)):
            alice.read(trick)  # type: ignore[arg-type]  # some tricks are not strings, on purpose
    assert alice.read(alices) == "alice's result"


def _mutations() -> st.SearchStrategy[str]:
    valid = "blake3/ab/" + "c" * 62 + ".txt"
    alphabet = st.sampled_from([*string.printable, "\x00", "\u2215", "\uff0f", "\u0430", "/", ".", "%"])
    return st.builds(
        lambda position, removed, inserted: valid[:position] + inserted + valid[position + removed :],
        st.integers(min_value=0, max_value=len(valid)),
        st.integers(min_value=0, max_value=4),
        st.text(alphabet=alphabet, max_size=6),
    )


@FUZZ
@given(reference=st.one_of(st.text(), _mutations(), st.binary(), st.integers(), st.none()))
@example(reference="blake3/ab/" + "C" * 62 + ".txt")
def test_fuzzed_references_never_read_anything(
    two_namespaces: tuple[RepositoryToolResultStore, str, str], reference: object
) -> None:
    alice, alices, _ = two_namespaces
    if reference == alices:
        return
    with pytest.raises((InvalidReferenceError, ReferenceNotFoundError)):
        alice.read(reference)  # type: ignore[arg-type]


@pytest.mark.slow
@FUZZ
@given(key=st.text(alphabet=st.characters(exclude_categories=()), max_size=1100), content=st.text(max_size=50))
def test_fuzzed_keys_are_recorded_or_refused_and_never_touch_the_file_system(
    store: ContentAddressedToolResultStore, tmp_path: Path, key: str, content: str
) -> None:
    outside_before = sorted(path.name for path in tmp_path.iterdir())
    before = snapshot(store.root)
    try:
        reference = store.write(key=key, content=content)
    except InvalidKeyError:
        assert snapshot(store.root) == before
    else:
        assert store.read(reference) == content
        assert reference.startswith("blake3/") and "/.." not in reference
    assert sorted(path.name for path in tmp_path.iterdir()) == outside_before


def _outside_copy_of_blob(root: Path, outside: Path) -> tuple[Path, Path]:
    """Move the one blob file outside the store, keeping a correct copy there (so following a link would succeed)."""
    (blob,) = blob_files(root)
    outside.mkdir()
    target = outside / blob.name
    target.write_bytes(blob.read_bytes())
    return blob, target


def test_a_symlinked_blob_file_is_refused_not_followed(store_root: Path, tmp_path: Path) -> None:
    with ContentAddressedToolResultStore(store_root, inline_max=0) as store:
        reference = store.write(key="a.txt", content=SECRET)
        blob, outside = _outside_copy_of_blob(store_root, tmp_path / "outside")
        blob.unlink()
        blob.symlink_to(outside)
        with pytest.raises(UnsafeBlobError, match="symlink") as refused:
            store.read(reference)
        # Tampering, and nothing casstore wrote behind the reference: code expecting either error catches it.
        assert isinstance(refused.value, CorruptBlobError) and isinstance(refused.value, ReferenceNotFoundError)


def test_a_symlinked_fanout_folder_is_refused_not_followed(store_root: Path, tmp_path: Path) -> None:
    with ContentAddressedToolResultStore(store_root, inline_max=0) as store:
        reference = store.write(key="a.txt", content=SECRET)
        blob, outside = _outside_copy_of_blob(store_root, tmp_path / "outside")
        fanout = blob.parent
        blob.unlink()
        fanout.rmdir()
        fanout.symlink_to(outside.parent, target_is_directory=True)
        with pytest.raises(UnsafeBlobError):
            store.read(reference)
        # and nothing is written through the link either: the write is refused
        with pytest.raises(StorageError):
            store.write(key="b.txt", content=SECRET)  # its blob file would go through the planted link
        assert sorted(p.name for p in outside.parent.iterdir()) == [outside.name]


def test_a_symlinked_blob_folder_is_refused_when_the_store_opens(store_root: Path, tmp_path: Path) -> None:
    with ContentAddressedToolResultStore(store_root, inline_max=0) as store:
        store.write(key="a.txt", content=SECRET)
    (tmp_path / "elsewhere").mkdir()
    os.rename(store_root / "blobs", tmp_path / "elsewhere" / "blobs")
    (store_root / "blobs").symlink_to(tmp_path / "elsewhere" / "blobs", target_is_directory=True)
    with pytest.raises(CasStoreError, match="symlink"):
        ContentAddressedToolResultStore(store_root)
