"""The read tool's `jmespath`: the selected part of a JSON result, paged like any text; messages for the rest."""

import json
from typing import Any

import jmespath
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from casstore import ContentAddressedToolResultStore
from casstore.compactor import make_read_tool
from casstore.compactor.json_query import MAX_EXPRESSION_CHARS

DOCUMENT = {
    "items": [
        {"name": "build", "status": "ok", "seconds": 41},
        {"name": "tests", "status": "failed", "seconds": 300},
        {"name": "lint", "status": "failed", "seconds": 7},
    ],
    "meta": {"run": 42},
}


@pytest.fixture
def reference(store: ContentAddressedToolResultStore) -> str:
    return store.write(key="ci.json", content=json.dumps(DOCUMENT))


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("items[?status=='failed'].name", ["tests", "lint"]),
        ("items[0]", DOCUMENT["items"][0]),  # type: ignore[index]
        ("meta.run", 42),
        ("max_by(items, &seconds).name", "tests"),
        ("length(items)", 3),
        ("no_such_key", None),
    ],
)
def test_the_answer_is_the_selection_as_json(
    store: ContentAddressedToolResultStore, reference: str, expression: str, expected: Any
) -> None:
    answer = make_read_tool(store).invoke(reference=reference, jmespath=expression)
    assert json.loads(answer) == expected


def test_a_json_file_written_as_bytes_is_queried_too(store: ContentAddressedToolResultStore) -> None:
    reference = store.write(key="ci.json", content=json.dumps(DOCUMENT).encode())
    assert json.loads(make_read_tool(store).invoke(reference=reference, jmespath="meta")) == {"run": 42}


def test_a_large_selection_is_paged_and_searched_like_text(store: ContentAddressedToolResultStore) -> None:
    rows = [{"id": number, "line": f"row {number} " + "x" * 80} for number in range(2_000)]
    reference = store.write(key="rows.json", content=json.dumps({"rows": rows}))
    tool = make_read_tool(store, max_chars=5_000)
    first = tool.invoke(reference=reference, jmespath="rows[*].line")
    assert len(first) <= 5_000 and first.startswith("[Lines 1-")
    selected = json.dumps([row["line"] for row in rows], indent=2)
    assert first.splitlines()[1:3] == selected.splitlines()[:2]
    later = tool.invoke(reference=reference, jmespath="rows[*].line", offset=1001, limit=2)
    assert later.splitlines()[1:3] == selected.splitlines()[1000:1002]
    found = tool.invoke(reference=reference, jmespath="rows[*].id", pattern=r"^\s+1999$", context=0)
    assert "2001:   1999" in found


@pytest.mark.parametrize(
    ("content", "expression", "complaint"),
    [
        ("not json at all", "a", "is not JSON (Expecting value"),
        (json.dumps(DOCUMENT), "items[", "`jmespath` is not a valid JMESPath expression"),
        (json.dumps(DOCUMENT), "", "`jmespath` must be a JMESPath expression"),
        (json.dumps(DOCUMENT), "x" * (MAX_EXPRESSION_CHARS + 1), "characters; at most"),
        (json.dumps(DOCUMENT), "abs(items)", "`jmespath` failed on this result"),
        (json.dumps({"a": list(range(100))}), "@.[@,@]" + ".[@,@]" * 40, "the selection is over"),
    ],
)
def test_what_cannot_be_queried_gets_a_message(
    store: ContentAddressedToolResultStore, content: str, expression: str, complaint: str
) -> None:
    reference = store.write(key="r.json", content=content)
    answer = make_read_tool(store).invoke(reference=reference, jmespath=expression)
    assert answer.startswith("Error: ") and complaint in answer, answer


def test_binary_content_that_is_not_text_gets_a_message(store: ContentAddressedToolResultStore) -> None:
    reference = store.write(key="plot.png", content=b"\x89PNG\r\n\x1a\n" + bytes(range(256)))
    answer = make_read_tool(store).invoke(reference=reference, jmespath="a")
    assert answer.startswith("Error: the result at") and "is binary content, not JSON text" in answer


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4),
    max_leaves=30,
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(document=_JSON, key=st.sampled_from(["a", "b", "x"]), expression=st.text(max_size=30))
def test_the_answer_is_what_jmespath_selects_or_a_message(
    store: ContentAddressedToolResultStore, document: Any, key: str, expression: str
) -> None:
    reference = store.write(key="d.json", content=json.dumps({key: document}))
    tool = make_read_tool(store, max_chars=1_000_000)
    assert json.loads(tool.invoke(reference=reference, jmespath=key)) == document
    answer = tool.invoke(reference=reference, jmespath=expression)  # anything: an answer, never an exception
    assert isinstance(answer, str)
    if not answer.startswith("Error: "):
        assert json.loads(answer) == jmespath.search(expression, {key: document})
