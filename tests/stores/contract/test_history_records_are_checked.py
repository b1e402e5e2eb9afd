"""
`record_offloads` and `record_compaction` refuse records no compactor makes, with the documented error and before
anything is written, on both stores: a string where references are due, malformed references, token counts that
cannot be counts, and tool names or ids neither index could keep alike. The compactors' own records pass.
"""

from typing import Any
from uuid import uuid4

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from casstore import ArchiveRecord, CompactionRecord, InvalidReferenceError, OffloadRecord
from casstore.stores.history_records import MAX_TOKENS
from casstore.stores.local import RepositoryToolResultStore
from tests.store_backends import Backend

GOOD = CompactionRecord(1_000, 400, 500, 2_000)


def _offload(reference: str, **changes: Any) -> OffloadRecord:
    fields: dict[str, Any] = {
        "tool_name": "read_file",
        "tool_call_id": "call_1",
        "references": [reference],
        "original_tokens": 100,
        "saved_tokens": 90,
    }
    return OffloadRecord(**(fields | changes))


# (what is wrong, the offload's changed fields, the error)
BAD_OFFLOADS: list[tuple[str, dict[str, Any], type[Exception]]] = [
    ("one reference as a string", {"references": "REF"}, TypeError),
    ("references as bytes", {"references": b"blake3/ab"}, TypeError),
    ("references as a number", {"references": 7}, TypeError),
    ("not a reference", {"references": ["not a reference"]}, InvalidReferenceError),
    ("a path", {"references": ["../../etc/passwd"]}, InvalidReferenceError),
    ("a reference and a path", {"references": ["REF", "/etc/passwd"]}, InvalidReferenceError),
    ("negative original tokens", {"original_tokens": -10, "saved_tokens": 0}, ValueError),
    ("negative saved tokens", {"saved_tokens": -1}, ValueError),
    ("saved more than the result took", {"original_tokens": 10, "saved_tokens": 5_000}, ValueError),
    ("absurd token counts", {"original_tokens": 2**70, "saved_tokens": 2**70}, ValueError),
    ("tokens as a float", {"original_tokens": 100.0}, TypeError),
    ("tokens as a bool", {"saved_tokens": True}, TypeError),
    ("no tool name", {"tool_name": None}, TypeError),
    ("an empty tool name", {"tool_name": ""}, ValueError),
    ("a lone surrogate in the tool name", {"tool_name": "read\ud800"}, ValueError),
    ("a NUL in the tool name", {"tool_name": "nul\x00tool"}, ValueError),
    ("a lone surrogate in the call id", {"tool_call_id": "call_\udfff"}, ValueError),
    ("a call id as a number", {"tool_call_id": 17}, TypeError),
]


def _history(backend: Backend) -> tuple[int, int]:
    return backend.count("offloads"), backend.count("compactions")


@pytest.mark.parametrize(
    ("change", "error"), [(case[1], case[2]) for case in BAD_OFFLOADS], ids=[c[0] for c in BAD_OFFLOADS]
)
def test_a_bad_offload_is_refused_and_nothing_is_recorded(
    backend: Backend, change: dict[str, Any], error: type[Exception]
) -> None:
    store = backend.open()
    reference = store.write(key="x.txt", content="hello")
    change = {
        name: [reference if item == "REF" else item for item in value] if isinstance(value, list) else value
        for name, value in change.items()
    }
    change = {name: reference if value == "REF" else value for name, value in change.items()}
    good = _offload(reference)
    bad = _offload(reference, **change)
    # The message names the field at fault (a reference's, what a reference looks like).
    says = "is not a casstore reference" if error is InvalidReferenceError else f"`{next(iter(change))}`"
    with pytest.raises(error, match=says):
        store.record_offloads(compaction_id="c1", offloads=[good, bad])
    with pytest.raises(error, match=says):
        store.record_compaction(compaction_id="c2", compaction=GOOD, offloads=[good, bad])
    assert _history(backend) == (0, 0)
    store.record_compaction(compaction_id="c3", compaction=GOOD, offloads=[good])
    assert _history(backend) == (1, 1)


@pytest.mark.parametrize(
    ("compaction", "error"),
    [
        (CompactionRecord(-5, 10, 1, 1), ValueError),
        (CompactionRecord(10, -1, 1, None), ValueError),
        (CompactionRecord(10, 5, -1, None), ValueError),
        (CompactionRecord(10, 5, 1, -1), ValueError),
        (CompactionRecord(2**70, 5, 1, None), ValueError),
        (CompactionRecord(10, 5.5, 1, None), TypeError),  # type: ignore[arg-type]
        ((10, 5, 1, None), TypeError),
        (None, TypeError),
    ],
)
def test_a_bad_compaction_is_refused_and_nothing_is_recorded(
    backend: Backend, compaction: Any, error: type[Exception]
) -> None:
    store = backend.open()
    reference = store.write(key="x.txt", content="hello")
    with pytest.raises(error):
        store.record_compaction(compaction_id="c", compaction=compaction, offloads=[_offload(reference)])
    assert _history(backend) == (0, 0)


@pytest.mark.parametrize(("offloads", "error"), [("not a list", TypeError), ([("read", None)], TypeError)])
def test_offloads_that_are_not_records_are_refused(backend: Backend, offloads: Any, error: type[Exception]) -> None:
    store = backend.open()
    with pytest.raises(error):
        store.record_offloads(compaction_id="c", offloads=offloads)
    assert _history(backend) == (0, 0)


@pytest.mark.parametrize(("compaction_id", "error"), [(None, TypeError), ("", ValueError), ("c\x00", ValueError)])
def test_a_bad_compaction_id_is_refused(backend: Backend, compaction_id: Any, error: type[Exception]) -> None:
    store = backend.open()
    reference = store.write(key="x.txt", content="hello")
    with pytest.raises(error):
        store.record_offloads(compaction_id=compaction_id, offloads=[_offload(reference)])
    assert _history(backend) == (0, 0)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    tool=st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"), min_size=1, max_size=30),
    call=st.none() | st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"), max_size=30),
    original=st.integers(min_value=0, max_value=MAX_TOKENS),
    share=st.floats(min_value=0, max_value=1),
)
def test_any_offload_a_compactor_could_make_is_recorded_as_given(
    backend: Backend, tool: str, call: str | None, original: int, share: float
) -> None:
    store: RepositoryToolResultStore = backend.open()
    reference = store.write(key="x.txt", content="hello")
    saved = int(original * share)
    compaction_id = uuid4().hex
    store.record_offloads(
        compaction_id=compaction_id, offloads=[OffloadRecord(tool, call, [reference], original, saved)]
    )
    rows = backend.rows(
        "SELECT tool_name, tool_call_id, original_tokens, saved_tokens FROM offloads WHERE compaction_id = ?",
        [compaction_id],
    )
    assert rows == [(tool, call, original, saved)]


def _archive(reference: str, **changes: Any) -> ArchiveRecord:
    fields: dict[str, Any] = {
        "references": [reference],
        "messages": 12,
        "first_step": 1,
        "last_step": 5,
        "original_tokens": 900,
        "saved_tokens": 700,
    }
    return ArchiveRecord(**(fields | changes))


@pytest.mark.parametrize(
    ("changes", "error"),
    [
        ({"references": "REF"}, TypeError),
        ({"references": []}, ValueError),
        ({"references": ["../transcript.md"]}, InvalidReferenceError),
        ({"messages": -1}, ValueError),
        ({"messages": 2.0}, TypeError),
        ({"saved_tokens": -1}, ValueError),
        ({"original_tokens": 2**70, "saved_tokens": 0}, ValueError),
        ({"first_step": 6}, ValueError),
        ({"first_step": 0}, ValueError),
        ({"first_step": None}, TypeError),
        ({"last_step": "5"}, TypeError),
    ],
)
def test_a_bad_archive_is_refused_and_nothing_is_recorded(
    backend: Backend, changes: dict[str, Any], error: type[Exception]
) -> None:
    store = backend.open()
    reference = store.write(key="archived.md", content="# Steps 1-5\n")
    record = _archive(reference, **{key: value if value != "REF" else reference for key, value in changes.items()})
    with pytest.raises(error):
        store.record_archive(compaction_id="c", compaction=GOOD, archive=record)
    assert (backend.count("archives"), backend.count("compactions")) == (0, 0)


def test_an_archive_of_steps_or_of_none_is_recorded(backend: Backend) -> None:
    store = backend.open()
    reference = store.write(key="archived.md", content="# Steps 1-5\n")
    store.record_archive(compaction_id="c1", compaction=GOOD, archive=_archive(reference))
    store.record_archive(
        compaction_id="c2", compaction=GOOD, archive=_archive(reference, first_step=None, last_step=None)
    )
    assert backend.rows("SELECT first_step, last_step FROM archives ORDER BY id") == [(1, 5), (None, None)]
