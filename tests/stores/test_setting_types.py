"""
The stores' own settings are checked for type and range when a store is made, before anything is opened or created:
a wrong type raises `TypeError`, an `int` out of range `ValueError`, and each message names the setting, what it got
and what it takes. A `bool` is no number here, and no number (nor "no") is a `bool`.
"""

import uuid
from pathlib import Path
from typing import Any

import pytest
from haystack.utils import Secret
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from casstore import ContentAddressedToolResultStore, SharedToolResultStore, StorageError

NUMBERS = {"compression_level": (1, 22, "from 1 to 22"), "inline_max": (0, 1_000_000_000, "from 0 to 1000000000")}
LOCAL_SWITCHES = ("durable", "learn", "search_index")
SHARED_SWITCHES = ("learn", "search_index")

# Nothing listens there: a store that got as far as connecting would raise `StorageError`.
UNREACHABLE_INDEX = "postgresql://casstore@127.0.0.1:9/none?connect_timeout=1"

anything_else = st.one_of(
    st.none(),
    st.floats(),
    st.text(max_size=80),
    st.binary(max_size=10),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    st.fractions(),
    st.decimals(),
)
not_a_whole_number = st.one_of(st.booleans(), anything_else)
not_a_bool = st.one_of(st.integers(), anything_else)
not_a_string = st.one_of(
    st.booleans(), st.integers(), anything_else.filter(lambda value: value is not None and not isinstance(value, str))
)


def _out_of_range(name: str) -> st.SearchStrategy[int]:
    low, high, _ = NUMBERS[name]
    below = st.integers(max_value=low - 1)
    return st.one_of(below, st.integers(min_value=high + 1)) if high is not None else below


def wrong_settings(switches: tuple[str, ...]) -> st.SearchStrategy[tuple[str, Any, type[Exception], str]]:
    """:returns: (setting, value, the error it must raise, what the message says the setting takes)."""
    cases = [st.tuples(st.just(name), not_a_bool, st.just(TypeError), st.just("True or False")) for name in switches]
    for name, (_, _, accepted) in NUMBERS.items():
        cases.append(
            st.tuples(st.just(name), not_a_whole_number, st.just(TypeError), st.just(f"whole number {accepted}"))
        )
        cases.append(st.tuples(st.just(name), _out_of_range(name), st.just(ValueError), st.just(accepted)))
    scopes = "'store', 'namespace' or None"
    cases.append(st.tuples(st.just("dedup_scope"), not_a_string, st.just(TypeError), st.just(scopes)))
    cases.append(
        st.tuples(
            st.just("dedup_scope"),
            st.text(max_size=20).filter(lambda text: text not in {"store", "namespace"}),
            st.just(ValueError),
            st.just("'store'"),
        )
    )
    return st.one_of(cases)


def _says_what_was_wrong(error: Exception, name: str, value: Any, accepted: str) -> None:
    message = str(error)
    assert f"`{name}`" in message
    assert repr(value)[:60] in message
    assert accepted in message


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=wrong_settings(LOCAL_SWITCHES))
def test_a_wrong_local_setting_raises_before_anything_is_created(
    tmp_path: Path, case: tuple[str, Any, type[Exception], str]
) -> None:
    name, value, error, accepted = case
    root = tmp_path / uuid.uuid4().hex
    with pytest.raises(error) as raised:
        ContentAddressedToolResultStore(root, **{name: value})
    assert type(raised.value) is error
    _says_what_was_wrong(raised.value, name, value, accepted)
    assert list(tmp_path.iterdir()) == []


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=wrong_settings(SHARED_SWITCHES))
def test_a_wrong_shared_setting_raises_before_connecting_to_anything(
    tmp_path: Path, case: tuple[str, Any, type[Exception], str]
) -> None:
    name, value, error, accepted = case
    with pytest.raises(error) as raised:
        SharedToolResultStore(
            index_url=Secret.from_token(UNREACHABLE_INDEX), blob_url=(tmp_path / "blobs").as_uri(), **{name: value}
        )
    assert type(raised.value) is error
    _says_what_was_wrong(raised.value, name, value, accepted)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow  # waits out the connection's timeout
def test_right_settings_do_get_as_far_as_connecting(tmp_path: Path) -> None:
    # The test above would pass for the wrong reason if the store never tried to connect.
    with pytest.raises(StorageError):
        SharedToolResultStore(index_url=Secret.from_token(UNREACHABLE_INDEX), blob_url=(tmp_path / "blobs").as_uri())


@pytest.mark.parametrize("name", LOCAL_SWITCHES)
@pytest.mark.parametrize("value", [True, False])
def test_bools_are_taken_and_serialized_as_bools(store_root: Path, name: str, value: bool) -> None:
    keywords: dict[str, Any] = {name: value}
    with ContentAddressedToolResultStore(store_root, **keywords) as store:
        assert store.to_dict()["init_parameters"][name] is value


@pytest.mark.parametrize(
    ("name", "value"),
    [("compression_level", 1), ("compression_level", 22), ("inline_max", 0), ("inline_max", 1_000_000_000)],
)
def test_whole_numbers_at_the_ends_of_their_range_are_taken(store_root: Path, name: str, value: int) -> None:
    keywords: dict[str, Any] = {name: value}
    with ContentAddressedToolResultStore(store_root, **keywords) as store:
        reference = store.write(key="a.txt", content="hello " * 100)
        assert store.read(reference) == "hello " * 100
        assert store.to_dict()["init_parameters"][name] == value
