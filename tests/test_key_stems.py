"""
Migration 0021: a Haystack key's step and stem kept apart from the rest of the key, the stem once, and the whole key
shown by the views exactly as it was written, whatever the key, through repeated writes, copies and the upgrade.
"""

import contextlib
import sqlite3
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from casstore import ContentAddressedToolResultStore
from casstore.copying import copy_store
from casstore.key_stems import CALL_ID_MARKERS, MAX_KEY_STEMS, MAX_STEM_LENGTH, KeyParts, split_key
from casstore.maintenance import verify
from tests.helpers import KEY_STEMS, STORE_SETTINGS, as_before_0021

_TOOL = st.text(
    alphabet=st.characters(blacklist_characters="\x00", blacklist_categories=["Cs"]), min_size=1, max_size=100
)


@given(st.text(alphabet=st.characters(blacklist_categories=["Cs"])))
def test_a_split_key_joins_back_to_the_same_text(key: str) -> None:
    parts = split_key(key)
    assert parts is None or parts.key == key


@given(
    step=st.integers(min_value=0, max_value=10**18 - 1),
    tool=_TOOL,
    marker=st.sampled_from(CALL_ID_MARKERS),
    rest=st.text(alphabet=st.characters(blacklist_categories=["Cs"])),
)
def test_every_key_of_the_hooks_shape_is_split_and_joins_back(step: int, tool: str, marker: str, rest: str) -> None:
    key = f"{step}_{tool}{marker}{rest}"
    parts = split_key(key)
    if len(tool) + len(marker) + len(rest) > MAX_STEM_LENGTH:
        assert parts is None or parts.key == key
        return
    assert parts is not None and parts.step == step and parts.key == key
    assert parts.stem.endswith(CALL_ID_MARKERS)


@given(tool=_TOOL, identifier=st.text(alphabet="0123456789abcdef", min_size=32, max_size=32), part=st.integers(0, 99))
def test_a_compactors_key_is_split_before_its_id(tool: str, identifier: str, part: int) -> None:
    key = f"compacted_{tool}_{identifier}_{part}.txt"
    parts = split_key(key)
    assert parts is not None and parts.step is None and parts.key == key
    assert parts.stem.startswith("compacted_") and parts.rest.endswith(f"_{part}.txt")


@given(tool=_TOOL, marker=st.sampled_from(CALL_ID_MARKERS), identifier=st.text(max_size=30))
def test_casstores_compactor_keys_are_split_at_the_call_id(tool: str, marker: str, identifier: str) -> None:
    key = f"compacted_{tool}{marker}{identifier}.txt"
    parts = split_key(key)
    assert parts is not None and parts.step is None and parts.key == key and parts.stem.startswith("compacted_")


@pytest.mark.parametrize(
    "key",
    [
        "compacted_read_file.txt",  # neither 32 hex digits nor a call id
        "007_read_file_call_abc.txt",  # a leading zero would not print back
        "1234567890123456789_read_file_call_abc.txt",  # 19 digits
        "3__call_abc.txt",  # no tool before the marker
        "３_read_file_call_abc.txt",  # a digit, but not ASCII
        "-3_read_file_call_abc.txt",
        "read_file_call_abc.txt",
        "3_read_file_abc.txt",  # no call id
        "compacted_read_file_0123.txt",  # not 32 hex digits
        f"3_{'x' * MAX_STEM_LENGTH}_call_abc.txt",
    ],
)
def test_keys_of_other_shapes_are_kept_whole(key: str) -> None:
    assert split_key(key) is None


def _rows(root: Path, sql: str) -> list[tuple[object, ...]]:
    with contextlib.closing(sqlite3.connect(root / "index.db")) as connection:
        return connection.execute(sql).fetchall()


_KEYS = [
    "3788_read_range_call_31316e8c2361f1e0.txt",
    "3789_read_range_call_aa.txt",
    "12_read_file_toolu_01A09q90qw90lq917835lq9_2.txt",
    "0_list_dir_call",
    "compacted_read_file_0123456789abcdef0123456789abcdef_2.txt",
    "compacted_search_call_42.txt",
    "notes.md",
    "007_read_file_call_x.txt",
    "５_grep_call_x.txt",
]


def test_the_history_shows_every_key_as_written_and_keeps_each_stem_once(tmp_path: Path) -> None:
    root = tmp_path / "store"
    with ContentAddressedToolResultStore(root) as store, ContentAddressedToolResultStore(root, namespace="b") as other:
        for number, key in enumerate(_KEYS):
            store.write(key=key, content=f"result {number}\n" * 40)
        # Repeated writes (the one-statement path) and a new namespace's first write of the same content.
        store.write(key="3790_read_range_call_bb.txt", content="result 0\n" * 40)
        other.write(key="5_read_range_call_cc.txt", content="result 0\n" * 40)
    written = [*_KEYS, "3790_read_range_call_bb.txt", "5_read_range_call_cc.txt"]
    assert [row[0] for row in _rows(root, "SELECT key FROM writes ORDER BY id")] == written
    stems = {row[0]: row[1] for row in _rows(root, "SELECT stem, id FROM key_stems")}
    assert set(stems) == {
        "read_range_call",
        "read_file_toolu_",
        "list_dir_call",
        "compacted_read_file_",
        "compacted_search_call",
    }
    logged = _rows(root, "SELECT key_step, key_stem_id, key FROM write_log ORDER BY id")
    assert logged[0] == (3788, stems["read_range_call"], "_31316e8c2361f1e0.txt")
    assert logged[3] == (0, stems["list_dir_call"], "")
    assert logged[4] == (None, stems["compacted_read_file_"], "0123456789abcdef0123456789abcdef_2.txt")
    assert logged[5] == (None, stems["compacted_search_call"], "_42.txt")
    assert logged[6:9] == [(None, None, key) for key in _KEYS[6:9]]
    assert logged[9] == (3790, stems["read_range_call"], "_bb.txt")
    assert _rows(root, "SELECT example_key FROM repeated_results") == [("3788_read_range_call_31316e8c2361f1e0.txt",)]


def test_a_repeated_write_of_a_stem_not_yet_kept_keeps_its_key_whole(tmp_path: Path) -> None:
    # The one-statement repeated write finds a stem but adds none: this key's stem is new, so it is kept whole.
    root = tmp_path / "store"
    with ContentAddressedToolResultStore(root) as store:
        store.write(key="1_read_file_call_a.txt", content="the same result")
        store.write(key="2_grep_call_b.txt", content="the same result")
        store.write(key="3_grep_call_c.txt", content="another result")  # a new reference adds the stem
        store.write(key="4_grep_call_d.txt", content="the same result")
    assert _rows(root, "SELECT key_step, key FROM write_log ORDER BY id") == [
        (1, "_a.txt"),
        (None, "2_grep_call_b.txt"),
        (3, "_c.txt"),
        (4, "_d.txt"),
    ]
    keys = ["1_read_file_call_a.txt", "2_grep_call_b.txt", "3_grep_call_c.txt", "4_grep_call_d.txt"]
    assert [row[0] for row in _rows(root, "SELECT key FROM writes ORDER BY id")] == keys


def test_the_whole_key_is_text_as_the_column_was(tmp_path: Path) -> None:
    root = tmp_path / "store"
    with ContentAddressedToolResultStore(root) as store:
        store.write(key="5", content="a")
        store.write(key="7_read_file_call_1", content="b")
    assert _rows(root, "SELECT key FROM writes WHERE key = 5") == [("5",)]
    assert _rows(root, "SELECT typeof(key) FROM writes") == [("text",), ("text",)]


def test_a_stem_that_keys_need_cannot_be_deleted(tmp_path: Path) -> None:
    root = tmp_path / "store"
    with ContentAddressedToolResultStore(root) as store:
        store.write(key="7_read_file_call_1.txt", content="b")
    with contextlib.closing(sqlite3.connect(root / "index.db")) as connection:
        with pytest.raises(sqlite3.IntegrityError, match="never deleted"):
            connection.execute("DELETE FROM key_stems")
        connection.execute("INSERT INTO key_stems (stem) VALUES ('unused_call')")
        connection.execute("DELETE FROM key_stems WHERE stem = 'unused_call'")
    assert _rows(root, "SELECT key FROM writes") == [("7_read_file_call_1.txt",)]


def test_verify_names_a_split_write_without_reference_by_its_whole_key(tmp_path: Path) -> None:
    root = tmp_path / "store"
    with ContentAddressedToolResultStore(root) as store:
        store.write(key="7_read_file_call_1.txt", content="b")
        with contextlib.closing(sqlite3.connect(root / "index.db")) as connection:
            connection.execute("DELETE FROM namespace_references")
            connection.commit()
        assert verify(store).writes_without_reference == [(1, "7_read_file_call_1.txt")]


def test_a_copy_keeps_every_key(tmp_path: Path) -> None:
    with ContentAddressedToolResultStore(tmp_path / "a") as source:
        for number, key in enumerate(_KEYS):
            source.write(key=key, content=f"result {number}")
        with ContentAddressedToolResultStore(tmp_path / "b") as target:
            copy_store(source, target)
    question = "SELECT namespace, key, reference, written_at FROM writes ORDER BY key"
    assert _rows(tmp_path / "b", question) == _rows(tmp_path / "a", question)
    assert _rows(tmp_path / "b", "SELECT count(*) FROM write_log WHERE key_stem_id IS NOT NULL") == [(6,)]


def test_past_the_last_stem_keys_are_kept_whole(tmp_path: Path) -> None:
    root = tmp_path / "store"
    with ContentAddressedToolResultStore(root, learn=False) as store:
        keys = [f"1_tool{number}_call_x.txt" for number in range(MAX_KEY_STEMS + 3)]
        for number, key in enumerate(keys):
            store.write(key=key, content=str(number))
    assert _rows(root, "SELECT count(*) FROM key_stems") == [(MAX_KEY_STEMS,)]
    assert [row[0] for row in _rows(root, "SELECT key FROM writes ORDER BY id")] == keys
    whole = _rows(root, "SELECT key_step, key FROM write_log WHERE key_stem_id IS NULL ORDER BY id")
    assert whole == [(None, key) for key in keys[MAX_KEY_STEMS:]]


def test_an_index_of_0020_upgrades_with_its_keys_whole_and_splits_new_ones(tmp_path: Path) -> None:
    root = tmp_path / "store"
    with ContentAddressedToolResultStore(root) as store:
        for number, key in enumerate(_KEYS):
            store.write(key=key, content=f"result {number}")
        store.write(key="3790_read_range_call_bb.txt", content="result 0")
    with contextlib.closing(sqlite3.connect(root / "index.db")) as connection:
        as_before_0021(connection)
        connection.commit()
    question = "SELECT * FROM writes ORDER BY id"
    repeated = "SELECT * FROM repeated_results ORDER BY digest"
    before, repeated_before = _rows(root, question), _rows(root, repeated)
    assert [row[2] for row in before] == [*_KEYS, "3790_read_range_call_bb.txt"]
    assert [row[-1] for row in repeated_before] == ["3788_read_range_call_31316e8c2361f1e0.txt"]
    with ContentAddressedToolResultStore(root) as store:
        assert _rows(root, question) == before  # the upgrade changed no answer
        assert _rows(root, repeated) == repeated_before
        assert _rows(root, "SELECT count(*) FROM write_log WHERE key_stem_id IS NOT NULL") == [(0,)]
        store.write(key="3791_read_range_call_new.txt", content="a new result")
        assert verify(store).ok
    applied_last = _rows(root, "SELECT name FROM _sqlite_migrations ORDER BY id DESC LIMIT 2")
    assert applied_last == [(STORE_SETTINGS,), (KEY_STEMS,)]
    logged = _rows(root, "SELECT key_step, key FROM write_log ORDER BY id DESC LIMIT 1")
    assert logged == [(3791, "_new.txt")]
    assert _rows(root, "SELECT key FROM writes ORDER BY id DESC LIMIT 1") == [("3791_read_range_call_new.txt",)]


def test_key_parts_name_the_whole_key() -> None:
    assert KeyParts(3, "read_call", "_x.txt").key == "3_read_call_x.txt"
    assert KeyParts(None, "compacted_t_", "ab.txt").key == "compacted_t_ab.txt"
