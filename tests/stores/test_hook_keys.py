"""
The keys of Haystack's `ToolResultOffloadHook` read back: the tool and call id where the key tells them for certain,
and never a wrong tool name where it does not.
"""

import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from casstore.hook_keys import HookKey, parse_hook_key

# What follows an id's marker as providers write it: letters, digits and dashes.
_BODY = st.text(alphabet=string.ascii_letters + string.digits + "-", min_size=1, max_size=24)
# The same, or a number or a word that begins another kind of id: the bodies that let a key read two ways.
_ANY_BODY = st.one_of(_BODY, st.integers(min_value=0, max_value=20).map(str), st.sampled_from(["call", "toolu", "fc"]))


def _call_ids(body: st.SearchStrategy[str]) -> st.SearchStrategy[str | None]:
    """A call id of each kind the markers name, and None: a call without an id, for which the hook writes `call{n}`."""
    kinds = [st.builds(f"{prefix}{{}}".format, body) for prefix in ("call_", "toolu_", "fc_", "chatcmpl-")]
    return st.one_of(*kinds, st.none())


_WORD = st.text(alphabet=string.ascii_lowercase + string.digits + ".-", min_size=1, max_size=8)
# Tool names with underscores whose words are not the words that begin an id.
_PLAIN_TOOL = st.lists(_WORD.filter(lambda word: word not in {"call", "toolu", "fc"}), min_size=1, max_size=4).map(
    "_".join
)
# Any tool name of such words, those words included: the keys that may read two ways.
_ANY_TOOL = st.lists(
    st.one_of(_WORD, st.sampled_from(["call", "toolu", "fc", "call7", "chatcmpl-x", "0", "12"])), min_size=1, max_size=5
).map("_".join)
_EXTENSION = st.sampled_from([".txt", ".png", ".csv", ".bin", ".json", ".t_t"])


def hook_key(*, step: int, tool: str, call_id: str | None, index: int, part: int | None, extension: str) -> str:
    """The key Haystack's hook writes (hooks.py and utils.py of `haystack.hooks.tool_result_offloading`)."""
    prefix = f"{step}_{tool}_{call_id or f'call{index}'}"
    return f"{prefix if part is None else f'{prefix}_{part}'}{extension}"


@given(
    step=st.integers(min_value=0, max_value=10**9),
    tool=_PLAIN_TOOL,
    call_id=_call_ids(_BODY),
    index=st.integers(min_value=0, max_value=50),
    part=st.none() | st.integers(min_value=0, max_value=20),
    extension=_EXTENSION,
)
def test_a_hook_key_gives_back_its_tool_and_call_id(
    *, step: int, tool: str, call_id: str | None, index: int, part: int | None, extension: str
) -> None:
    key = hook_key(step=step, tool=tool, call_id=call_id, index=index, part=part, extension=extension)
    assert parse_hook_key(key) == HookKey(step, key[: -len(extension)], tool, call_id, part)


@given(
    step=st.integers(min_value=0, max_value=10**9),
    tool=_ANY_TOOL,
    call_id=_call_ids(_ANY_BODY),
    index=st.integers(min_value=0, max_value=50),
    part=st.none() | st.integers(min_value=0, max_value=20),
    extension=_EXTENSION,
)
def test_a_hook_key_never_reads_as_another_tool(
    *, step: int, tool: str, call_id: str | None, index: int, part: int | None, extension: str
) -> None:
    key = hook_key(step=step, tool=tool, call_id=call_id, index=index, part=part, extension=extension)
    parsed = parse_hook_key(key)
    assert parsed is not None and parsed.step == step and parsed.stem == key[: -len(extension)]
    if parsed.tool_name is None:
        assert (parsed.tool_call_id, parsed.part) == (None, None)
    else:
        assert (parsed.tool_name, parsed.tool_call_id, parsed.part) == (tool, call_id, part)


@given(tool=_PLAIN_TOOL, number=st.integers(min_value=0, max_value=20), step=st.integers(min_value=0, max_value=99))
def test_a_key_two_calls_could_have_written_names_no_tool(tool: str, number: int, step: int) -> None:
    # Tool `{tool}_call` with Anthropic's id `toolu_{n}`, or tool `{tool}` with OpenAI's `call_toolu`, part n.
    first = hook_key(step=step, tool=f"{tool}_call", call_id=f"toolu_{number}", index=0, part=None, extension=".txt")
    second = hook_key(step=step, tool=tool, call_id="call_toolu", index=0, part=number, extension=".txt")
    # Tool `{tool}_call` without an id (the hook's stand-in), or tool `{tool}` with OpenAI's id `call_call{n}`.
    third = hook_key(step=step, tool=f"{tool}_call", call_id=None, index=number, part=None, extension=".txt")
    fourth = hook_key(step=step, tool=tool, call_id=f"call_call{number}", index=0, part=None, extension=".txt")
    assert first == second and third == fourth
    for key in (first, third):
        assert parse_hook_key(key) == HookKey(step, key.removesuffix(".txt"), None, None, None)


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("3_read_file_call_5f0cAbc.txt", HookKey(3, "3_read_file_call_5f0cAbc", "read_file", "call_5f0cAbc", None)),
        ("0_run_tests_call0.txt", HookKey(0, "0_run_tests_call0", "run_tests", None, None)),
        (
            "12_render_page_toolu_01XyZ_1.png",
            HookKey(12, "12_render_page_toolu_01XyZ_1", "render_page", "toolu_01XyZ", 1),
        ),
        # Mistral's ids carry no marker: the key's stem says what was offloaded, with no tool or id.
        ("4_read_file_D681PevKs.txt", HookKey(4, "4_read_file_D681PevKs", None, None, None)),
        ("0_run_tests.txt", HookKey(0, "0_run_tests", None, None, None)),
    ],
)
def test_keys_the_hook_writes_read_as_expected(key: str, expected: HookKey) -> None:
    assert parse_hook_key(key) == expected


@pytest.mark.parametrize(
    "key",
    [
        "search_1.txt",  # no step
        "compacted_read_file_call_1.txt",  # a compactor's key
        "1_render.png",  # no `_` between a tool and an id
        "01_read_file_call_1.txt",  # a step the hook cannot print
        "3_read_file_call_1",  # no extension
        "3_.txt",
    ],
)
def test_keys_of_another_shape_are_no_hook_keys(key: str) -> None:
    assert parse_hook_key(key) is None
