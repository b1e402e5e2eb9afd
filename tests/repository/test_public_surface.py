"""
The `Repository`'s public surface stays small (a few verbs and properties, and its collaborators by name), and the
collaborators it hands out work on the one index and blob layer it owns.
"""

from pathlib import Path

import pytest

from casstore.repository import Copies, History, Repository, Retention, Search, prepare
from casstore.stores.local import DEFAULT_INLINE_MAX

# Issue 29: a public surface one can read in one screen, about 15 names.
MOST_PUBLIC_NAMES = 16
COLLABORATORS = {"history": History, "search": Search, "retention": Retention, "copies": Copies}


def _public_names(cls: type) -> list[str]:
    return [name for name in dir(cls) if not name.startswith("_")]


def _open(root: Path) -> Repository:
    return Repository.local(root, compression_level=3, inline_max=DEFAULT_INLINE_MAX, durable=False, search_index=True)


def test_the_repository_surface_fits_on_one_screen() -> None:
    names = _public_names(Repository)
    assert len(names) <= MOST_PUBLIC_NAMES, names
    assert set(COLLABORATORS) <= set(names)


def test_the_repository_is_composed_not_inherited() -> None:
    assert Repository.__mro__ == (Repository, object)
    for collaborator in COLLABORATORS.values():
        assert collaborator.__mro__ == (collaborator, object), collaborator


@pytest.mark.parametrize("name", sorted(COLLABORATORS))
def test_each_collaborator_is_handed_out_by_name(tmp_path: Path, name: str) -> None:
    with _open(tmp_path / "store") as repository:
        collaborator = getattr(repository, name)
        assert isinstance(collaborator, COLLABORATORS[name])
        assert getattr(repository, name) is collaborator  # one per repository, not made on each access


def test_what_the_verbs_write_every_collaborator_sees(tmp_path: Path) -> None:
    write = prepare(key="notes.txt", content="the collaborators share one index and one blob layer")
    with _open(tmp_path / "store") as repository:
        repository.store(namespace="team", writes=[write])
        assert repository.read(namespace="team", digest=write.digest, reference=write.reference) == write.data
        assert repository.history.namespaces() == ["team"]
        assert repository.history.namespaces_holding(write.reference) == ["team"]
        assert repository.retention.integrity_snapshot().digests == [write.digest]
        assert repository.copies.blob_content(write.digest) == write.data
        found = repository.search.find(namespace="team", terms=["collaborators"], tool_name=None, limit=5, seconds=5.0)
        assert [hit.reference for hit in found.hits] == [write.reference]
        assert repository.search.check().consistent
