"""
A prepared write is stored only if it is what the store's own `prepare_write` makes of its key and content: a digest
that does not hash its content would otherwise be recorded as another result (another namespace's, or one not
written yet). Whatever is changed in it, nothing is stored, and the result it named is untouched.
"""

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from casstore import ContentAddressedToolResultStore, CorruptBlobError, ReferenceNotFoundError
from casstore.repository import PreparedWrite
from casstore.stores.local import RepositoryToolResultStore
from tests.store_backends import Backend


def test_a_tenant_cannot_take_another_namespaces_result_by_its_digest(backend: Backend) -> None:
    alice = backend.open(namespace="alice", dedup_scope="namespace")
    mallory = backend.open(namespace="mallory")
    theirs = alice.prepare_write(key="a.txt", content="alice's PIN is 4711")
    alice.write_prepared(theirs)
    mine = mallory.prepare_write(key="m.txt", content="anything at all")
    forged = dataclasses.replace(mine, digest=theirs.digest, reference=theirs.reference)
    before = backend.snapshot()
    with pytest.raises(ValueError, match="does not hash its content here"):
        mallory.write_prepared(forged)
    assert backend.snapshot() == before
    with pytest.raises(ReferenceNotFoundError):
        mallory.read(theirs.reference)


def test_content_not_yet_written_cannot_be_poisoned_under_its_digest(backend: Backend) -> None:
    alice = backend.open(namespace="alice")
    mallory = backend.open(namespace="mallory")
    expected = alice.prepare_write(key="build.log", content="the build log alice will write")
    garbage = mallory.prepare_write(key="x.log", content="GARBAGE")
    with pytest.raises(ValueError, match="does not hash its content here"):
        mallory.write_prepared_many([dataclasses.replace(garbage, digest=expected.digest)])
    assert backend.count("blobs") == 0
    assert alice.read(alice.write(key="build.log", content="the build log alice will write")) == (
        "the build log alice will write"
    )


def test_a_write_prepared_by_another_store_of_the_same_namespace_is_refused(backend: Backend, tmp_path: Path) -> None:
    # Two stores under `namespace` scope: the same namespace name, another secret, so another digest.
    store = backend.open(namespace="alice", dedup_scope="namespace")
    store.write(key="settle.txt", content="the scope is recorded by the first write")
    with ContentAddressedToolResultStore(tmp_path / "other", namespace="alice", dedup_scope="namespace") as other:
        prepared = other.prepare_write(key="a.txt", content="hashed with the other store's secret")
    before = backend.snapshot()
    with pytest.raises(ValueError, match="made by another store"):
        store.write_prepared(prepared)
    assert backend.snapshot() == before
    reference = store.write(key="a.txt", content="hashed with the other store's secret")
    assert reference != prepared.reference
    assert store.read(reference) == "hashed with the other store's secret"


def test_anything_but_a_prepared_write_is_a_type_error(backend: Backend) -> None:
    store = backend.open(namespace="alice")
    prepared = store.prepare_write(key="a.txt", content="hello")
    for wrong in ("blake3/aa/" + "b" * 62 + ".txt", dataclasses.asdict(prepared), None):
        with pytest.raises(TypeError, match="takes what `prepare_write` returned"):
            store.write_prepared(wrong)  # type: ignore[arg-type]
    assert backend.count("writes") == 0


changes = st.one_of(
    st.tuples(st.just("data"), st.binary(max_size=40)),
    st.tuples(st.just("data"), st.text(max_size=10)),
    st.tuples(st.just("is_text"), st.booleans()),
    st.tuples(st.just("key"), st.sampled_from(["a.png", "a.md", "a", "b.txt"])),
    st.tuples(st.just("digest"), st.text(alphabet="0123456789abcdef", min_size=64, max_size=64)),
    st.tuples(st.just("reference"), st.sampled_from(["blake3/aa/" + "b" * 62 + ".txt", ""])),
    st.tuples(st.just("keyed_for"), st.sampled_from([None, "alice"])),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(change=changes)
def test_a_changed_prepared_write_is_stored_only_if_it_is_still_what_prepare_write_makes(
    backend: Backend, change: tuple[str, Any]
) -> None:
    store = backend.open(namespace="alice")
    prepared = store.prepare_write(key="a.txt", content="the original content")
    changed = dataclasses.replace(prepared, **{change[0]: change[1]})
    if changed == _remade(store, changed):
        # Unchanged, or changed into exactly what `prepare_write` makes: stored, and read back as written.
        assert store.read(store.write_prepared(changed)) == (
            changed.data.decode("utf-8") if changed.is_text else changed.data
        )
        return
    before = backend.snapshot()
    with pytest.raises(ValueError):
        store.write_prepared(changed)
    assert backend.snapshot() == before
    try:
        store.read(changed.reference)
    except (ReferenceNotFoundError, ValueError):
        pass  # never stored (or not even a reference)
    except CorruptBlobError:
        pytest.fail("a refused prepared write left a reference that reads as damaged")


def _remade(store: RepositoryToolResultStore, changed: PreparedWrite) -> PreparedWrite | None:
    """:returns: What `prepare_write` makes of `changed`'s key and content, if it has content at all."""
    data: object = changed.data  # a change may have made it a `str`
    if not isinstance(data, bytes):
        return None
    try:
        content = data.decode("utf-8") if changed.is_text else data
    except UnicodeDecodeError:
        return None
    return store.prepare_write(key=changed.key, content=content)


class _AlwaysEqual(PreparedWrite):
    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = PreparedWrite.__hash__


def test_a_part_that_claims_to_equal_anything_is_still_refused(backend: Backend) -> None:
    alice = backend.open(namespace="alice")
    mallory = backend.open(namespace="mallory")
    expected = alice.prepare_write(key="build.log", content="the build log alice will write")
    fields = {field.name: getattr(expected, field.name) for field in dataclasses.fields(expected)}
    forged = _AlwaysEqual(**{**fields, "data": b"POISON"})
    with pytest.raises(ValueError, match="does not hash its content here"):
        mallory.write_prepared(forged)
    assert backend.count("blobs") == 0
    reference = alice.write(key="build.log", content="the build log alice will write")
    assert alice.read(reference) == "the build log alice will write"


def test_content_that_may_change_while_it_is_written_is_refused(backend: Backend) -> None:
    store = backend.open(namespace="alice")
    prepared = store.prepare_write(key="a.txt", content="hello")
    changeable = dataclasses.replace(prepared, data=bytearray(prepared.data))  # equal bytes, but mutable
    with pytest.raises(ValueError, match="does not hash its content here"):
        store.write_prepared(changeable)
    assert backend.count("writes") == 0
