"""
`keep_in_context`: strategies for Haystack's `ToolResultOffloadHook` under which casstore's tools are never offloaded,
checked against the hook's own resolution of a tool's policy (exact name, then a tuple holding it, then `"*"`).
"""

import re
from pathlib import Path

import pytest
from haystack.hooks.tool_result_offloading import (
    AlwaysOffload,
    FileSystemToolResultStore,
    NeverOffload,
    OffloadOverChars,
    OffloadPolicy,
    ToolResultOffloadHook,
)
from hypothesis import given
from hypothesis import strategies as st

from casstore import compactor
from casstore.compactor import keep_in_context

READ = "read_offloaded_result"
SEARCH = "search_offloaded_results"
Strategies = dict[str | tuple[str, ...], OffloadPolicy]


def _policy(strategies: Strategies, tool_name: str) -> OffloadPolicy | None:
    """The policy Haystack's hook applies to a tool under these strategies (the hook's own resolution)."""
    hook = ToolResultOffloadHook(store=FileSystemToolResultStore(Path("unused")), offload_strategies=strategies)
    return hook._policy_for(tool_name=tool_name)


def test_it_is_exported_where_the_compactor_is() -> None:
    assert "keep_in_context" in compactor.__all__


def test_the_search_tool_is_kept_in_context_under_a_wildcard_too() -> None:
    """The search tool's answer is what the model asked to see: offloaded, it would be another reference to read."""
    kept = keep_in_context({"*": AlwaysOffload(), SEARCH: OffloadOverChars(10)})
    assert isinstance(_policy(kept, SEARCH), NeverOffload)
    assert isinstance(_policy(kept, "run_tests"), AlwaysOffload)


def test_the_read_tool_is_kept_in_context_under_a_wildcard() -> None:
    strategies: Strategies = {"*": AlwaysOffload()}
    kept = keep_in_context(strategies)

    assert isinstance(_policy(kept, READ), NeverOffload)
    assert isinstance(_policy(kept, "run_tests"), AlwaysOffload)
    assert set(strategies) == {"*"}  # the input is not changed


def test_an_explicit_entry_for_the_read_tool_is_overridden_and_the_input_is_left_alone() -> None:
    always = AlwaysOffload()
    strategies: Strategies = {READ: always, "search": OffloadOverChars(10)}
    kept = keep_in_context(strategies)

    assert isinstance(kept[READ], NeverOffload)
    assert kept["search"] is strategies["search"]
    assert strategies[READ] is always
    assert kept is not strategies


def test_a_tuple_holding_the_read_tool_still_applies_to_its_other_names() -> None:
    shared = OffloadOverChars(100)
    kept = keep_in_context({(READ, "list_dir"): shared})

    assert isinstance(_policy(kept, READ), NeverOffload)
    assert _policy(kept, "list_dir") is shared
    assert kept[(READ, "list_dir")] is shared


def test_a_renamed_read_tool_is_named_with_tool_names() -> None:
    kept = keep_in_context({"*": AlwaysOffload()}, tool_names=["read_back", "fetch_back"])

    for name in ("read_back", "fetch_back", READ):  # the default name stays covered too
        assert isinstance(_policy(kept, name), NeverOffload)
    assert isinstance(_policy(kept, "other"), AlwaysOffload)


def test_without_a_wildcard_no_other_tool_starts_being_offloaded() -> None:
    kept = keep_in_context({"search": AlwaysOffload()})
    assert _policy(kept, "run_tests") is None
    assert set(kept) == {"search", READ, SEARCH}


@pytest.mark.parametrize(
    ("strategies", "tool_names", "error", "message"),
    [
        ([("*", AlwaysOffload())], (), TypeError, "must be the mapping given to ToolResultOffloadHook"),
        ({"*": AlwaysOffload()}, "read_back", TypeError, "pass tool_names=['read_back']"),
        ({"*": AlwaysOffload()}, [42], TypeError, "must be a tool's name"),
        ({"*": AlwaysOffload()}, [""], ValueError, "empty"),
    ],
)
def test_bad_arguments_say_what_to_pass(
    strategies: object, tool_names: object, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=re.escape(message)):
        keep_in_context(strategies, tool_names=tool_names)  # type: ignore[arg-type]


_NAMES = [READ, SEARCH, "read_back", "search", "run_tests", "list_dir"]
_POLICIES: list[OffloadPolicy] = [AlwaysOffload(), NeverOffload(), OffloadOverChars(0), OffloadOverChars(50)]
_KEYS = st.one_of(
    st.sampled_from([*_NAMES, "*"]),
    st.lists(st.sampled_from(_NAMES), min_size=1, max_size=3, unique=True).map(tuple),
)


@given(
    strategies=st.dictionaries(_KEYS, st.sampled_from(_POLICIES), max_size=6),
    renamed=st.lists(st.sampled_from(["read_back", "search"]), max_size=2),
)
def test_only_casstores_tools_change_policy(strategies: Strategies, renamed: list[str]) -> None:
    before = dict(strategies)
    kept = keep_in_context(strategies, tool_names=renamed)

    assert strategies == before  # same keys, same policy objects
    for name in [*_NAMES, "unlisted"]:
        if name in {READ, SEARCH} or name in renamed:
            assert isinstance(_policy(kept, name), NeverOffload)
        else:
            assert _policy(kept, name) is _policy(strategies, name)
