"""
The design-only differences from Haystack's `FileSystemToolResultStore` and `ToolResultOffloadCompactor`, as
docs/haystack-differences.md lists them, shown side by side: each row of its two tables holds, for Haystack's class
and for ours.
Two rows are shown where their subject is tested at length: damage (tests/reliability/test_damaged_blobs.py) and a
result of several parts whose write fails part-way (tests/reliability/test_resource_faults.py).
"""

import contextlib
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from haystack.dataclasses import ChatMessage
from haystack.hooks.compaction import ToolResultOffloadCompactor
from haystack.hooks.tool_result_offloading import FileSystemToolResultStore

from casstore import (
    ContentAddressedToolResultStore,
    InvalidKeyError,
    InvalidReferenceError,
    ReferenceNotFoundError,
)
from casstore.compactor import DedupOffloadCompactor, make_read_tool
from tests.compactor_helpers import PayloadCounter, tool_call, tool_result
from tests.helpers import blake3_hex, count_rows

PAGE = Path(__file__).resolve().parents[2] / "docs" / "haystack-differences.md"
SECTION = "# Differences from Haystack's own classes, by design"


@pytest.fixture
def haystack(tmp_path: Path) -> FileSystemToolResultStore:
    return FileSystemToolResultStore(tmp_path / "haystack")


@pytest.fixture
def ours(tmp_path: Path) -> Iterator[ContentAddressedToolResultStore]:
    with ContentAddressedToolResultStore(tmp_path / "casstore", namespace="alice") as store:
        yield store


def _rows() -> list[str]:
    """The first cell of every row of the section's tables."""
    section = PAGE.read_text(encoding="utf-8").split(SECTION, 1)[1].split("\n## ", 1)[0]
    return [line.split("|")[1].strip() for line in section.splitlines() if line.startswith("| ") and "---" not in line]


def test_the_page_lists_each_difference_shown_here() -> None:
    assert [row for row in _rows() if row] == [
        "the reference `write` returns",
        "the key",
        "writing a key again",
        "equal content under two keys",
        "what is on disk",
        "`read` of bytes",
        "`read` of a reference not written",
        "damage",
        "isolation",
        "lifetime",
        "`to_dict`",
        "a reference that would cost more tokens than the result",
        "a result of several parts whose write fails part-way",
        "identical results",
        "store keys",
        "meta of an offloaded message",
        "history",
    ]


def test_the_reference_is_a_hash_path_not_root_and_key(
    haystack: FileSystemToolResultStore, ours: ContentAddressedToolResultStore
) -> None:
    assert haystack.write(key="search_1.txt", content="result") == str((haystack.root / "search_1.txt").resolve())
    digest = blake3_hex(b"result")
    assert ours.write(key="search_1.txt", content="result") == f"blake3/{digest[:2]}/{digest[2:]}.txt"
    assert ours.write(key="search_1.png", content=b"result") == f"blake3/bin/{digest[:2]}/{digest[2:]}.png"


def test_a_key_is_only_recorded_never_a_path(
    tmp_path: Path, haystack: FileSystemToolResultStore, ours: ContentAddressedToolResultStore
) -> None:
    with pytest.raises(ValueError, match="outside the store root"):
        haystack.write(key="../escaped.txt", content="x")
    haystack.write(key="sub/folder/a.txt", content="x")
    assert (haystack.root / "sub" / "folder" / "a.txt").is_file()

    reference = ours.write(key="../escaped.txt", content="x")
    assert ours.read(reference) == "x" and not (tmp_path / "escaped.txt").exists()
    ours.write(key="sub/folder/a.txt", content="x")
    assert not (ours.root / "sub").exists()
    with pytest.raises(InvalidKeyError) as refused:
        ours.write(key="", content="x")
    assert isinstance(refused.value, ValueError)


def test_writing_a_key_again_keeps_the_earlier_reference(
    haystack: FileSystemToolResultStore, ours: ContentAddressedToolResultStore
) -> None:
    first = haystack.write(key="a.txt", content="first")
    assert haystack.write(key="a.txt", content="second") == first
    assert haystack.read(first) == "second"  # the earlier reference now reads the new content

    first = ours.write(key="a.txt", content="first")
    second = ours.write(key="a.txt", content="second")
    assert first != second and (ours.read(first), ours.read(second)) == ("first", "second")


def test_equal_content_under_two_keys_is_one_blob(
    haystack: FileSystemToolResultStore, ours: ContentAddressedToolResultStore
) -> None:
    assert haystack.write(key="a.txt", content="same") != haystack.write(key="b.txt", content="same")
    assert ours.write(key="a.txt", content="same") == ours.write(key="b.txt", content="same")
    assert (count_rows(ours.root, "blobs"), count_rows(ours.root, "writes")) == (1, 2)


def test_the_store_keeps_an_index_beside_its_blobs(
    haystack: FileSystemToolResultStore, ours: ContentAddressedToolResultStore
) -> None:
    haystack.write(key="a.txt", content="x" * 100_000)
    assert [path.name for path in haystack.root.iterdir()] == ["a.txt"]
    assert (haystack.root / "a.txt").read_text() == "x" * 100_000  # readable with cat
    ours.write(key="a.txt", content="x" * 100_000)
    assert (ours.root / "index.db").is_file()
    assert not any(path.name == "a.txt" for path in ours.root.rglob("*"))


def test_bytes_read_back_as_bytes_and_the_read_tool_shows_utf8_as_text(
    haystack: FileSystemToolResultStore, ours: ContentAddressedToolResultStore
) -> None:
    assert haystack.read(haystack.write(key="table.csv", content=b"a,b\n1,2\n")) == "a,b\n1,2\n"
    reference = ours.write(key="table.csv", content=b"a,b\n1,2\n")
    assert ours.read(reference) == b"a,b\n1,2\n"
    assert make_read_tool(ours).invoke(reference=reference) == "a,b\n1,2\n"


def test_a_store_reads_only_what_it_wrote_in_its_namespace(
    haystack: FileSystemToolResultStore, ours: ContentAddressedToolResultStore
) -> None:
    haystack.root.mkdir(parents=True)
    (haystack.root / "planted.txt").write_text("put there by someone else")
    assert haystack.read(str(haystack.root / "planted.txt")) == "put there by someone else"
    with pytest.raises(FileNotFoundError):
        haystack.read(str(haystack.root / "never.txt"))
    with pytest.raises(ValueError):
        haystack.read("../outside.txt")

    with ContentAddressedToolResultStore(ours.root, namespace="bob") as bob:
        bobs = bob.write(key="b.txt", content="bob's")
    with pytest.raises(ReferenceNotFoundError) as not_found:
        ours.read(bobs)
    assert isinstance(not_found.value, FileNotFoundError)
    with pytest.raises(InvalidReferenceError) as malformed:
        ours.read("../outside.txt")
    assert isinstance(malformed.value, ValueError)


def test_serialized_settings(haystack: FileSystemToolResultStore, ours: ContentAddressedToolResultStore) -> None:
    assert set(haystack.to_dict()["init_parameters"]) == {"root"}
    assert set(ours.to_dict()["init_parameters"]) == {
        "root",
        "namespace",
        "compression_level",
        "inline_max",
        "durable",
        "learn",
        "search_index",
        "dedup_scope",
    }


def _conversation(*results: str) -> list[ChatMessage]:
    """One tool-calling step per result, then a last step (kept by `min_keep_steps=1`)."""
    messages = [ChatMessage.from_user("go")]
    for number, result in enumerate([*results, "latest"], start=1):
        messages += [
            tool_call(f"call_{number}", name="run_tests"),
            tool_result(result, call_id=f"call_{number}", name="run_tests"),
        ]
    return messages


def _written_keys(root: Path) -> list[str]:
    with contextlib.closing(sqlite3.connect(root / "index.db")) as connection:
        return [key for (key,) in connection.execute("SELECT key FROM writes ORDER BY id")]


def test_a_reference_that_saves_nothing_is_never_written(
    haystack: FileSystemToolResultStore, ours: ContentAddressedToolResultStore
) -> None:
    messages = _conversation("ok")  # the reference is longer than the result
    counter = PayloadCounter()
    assert ToolResultOffloadCompactor(haystack, min_tokens=0).compact(messages, 0, counter) is None
    assert len(list(haystack.root.iterdir())) == 1  # written, then dropped: an entry nothing refers to
    assert DedupOffloadCompactor(ours, min_tokens=0).compact(messages, 0, counter) is None
    assert not ours.root.exists()  # nothing written, so not even the store was created (its first write would)


def test_identical_results_share_one_reference_and_keys_name_the_call(
    haystack: FileSystemToolResultStore, ours: ContentAddressedToolResultStore
) -> None:
    log = "test_case ... ok\n" * 200
    messages = _conversation(log, log)
    counter = PayloadCounter()

    theirs = ToolResultOffloadCompactor(haystack).compact(messages, 0, counter)
    assert theirs is not None
    their_references = [message.meta["tool_result_offloaded"] for message in theirs[2:5:2]]
    assert their_references[0] != their_references[1]
    assert all(re.fullmatch(r"compacted_run_tests_[0-9a-f]{32}\.txt", Path(ref).name) for [ref] in their_references)

    compacted = DedupOffloadCompactor(ours).compact(messages, 0, counter)
    assert compacted is not None
    our_references = [message.meta["tool_result_offloaded"] for message in compacted[2:5:2]]
    assert our_references[0] == our_references[1]
    assert _written_keys(ours.root) == ["compacted_run_tests_call_1.txt", "compacted_run_tests_call_2.txt"]
    assert count_rows(ours.root, "blobs") == 1


def test_meta_is_haystacks_plus_casstores_own_key(
    haystack: FileSystemToolResultStore, ours: ContentAddressedToolResultStore
) -> None:
    messages = _conversation("test_case ... ok\n" * 200)
    counter = PayloadCounter()
    theirs = ToolResultOffloadCompactor(haystack).compact(messages, 0, counter)
    compacted = DedupOffloadCompactor(ours).compact(messages, 0, counter)
    assert theirs is not None and compacted is not None
    their_meta, our_meta = theirs[2].meta, compacted[2].meta
    assert set(their_meta) == {"tool_result_offloaded", "context_compaction"}
    assert set(our_meta) == {"tool_result_offloaded", "context_compaction", "casstore"}
    assert our_meta["context_compaction"] == their_meta["context_compaction"]
    with contextlib.closing(sqlite3.connect(ours.root / "index.db")) as connection:
        (compaction_id,) = connection.execute("SELECT compaction_id FROM offloads").fetchone()
    assert our_meta["casstore"] == {"compaction_id": compaction_id}
