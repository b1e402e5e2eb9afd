"""
`make_search_tool`: the answer's form, its bounds, what it finds (identifiers, paths, parts of words, phrases), the
`tool_name` and `limit` arguments, and that any query gets an answer, never an exception.
"""

import json
import re
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest
import zstandard
from haystack.hooks.tool_result_offloading import FileSystemToolResultStore
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from casstore import ContentAddressedToolResultStore, OffloadRecord
from casstore.compactor import make_read_tool, make_search_tool
from casstore.compactor.search_query import MAX_TERMS, parse_query
from casstore.compactor.search_tool import SearchOffloadedResultsTool

SOURCE = (
    "import os\n"
    "\n"
    "class ToolResultStore:\n"
    "    def write(self, *, key, content):\n"
    "        return self._repository.store(key)\n"
    "\n"
    "def test_case_39():\n"
    "    assert ToolResultStore.write is not None\n"
)
LOG = (
    "collected 40 items\n"
    + "".join(f"tests/test_io.py::test_case_{n} PASSED\n" for n in range(30))
    + ("tests/test_io.py::test_case_39 FAILED\nE1102: KeyError: 'user_id' at /srv/app/handlers/login.py:88\n")
)


@pytest.fixture
def indexed(store_root: Path) -> Iterator[ContentAddressedToolResultStore]:
    with ContentAddressedToolResultStore(store_root, namespace="alice", search_index=True) as opened:
        yield opened


def _references(answer: str) -> list[str]:
    return re.findall(r"^\d+\. '([^']+)'", answer, flags=re.MULTILINE)


def test_it_is_exported_beside_the_read_tool(indexed: ContentAddressedToolResultStore) -> None:
    tool = make_search_tool(indexed)
    assert tool.name == "search_offloaded_results"
    Draft202012Validator.check_schema(tool.parameters)
    assert set(tool.parameters["properties"]) == {"query", "tool_name", "limit"}
    assert tool.parameters["required"] == ["query"]
    assert make_search_tool(indexed, name="find_again").tool_spec["name"] == "find_again"


@pytest.mark.parametrize(
    ("settings_", "complaint"),
    [
        ({"max_chars": 999}, "`max_chars` must be at least 1000"),
        ({"max_hits": 0}, "`max_hits` must be from 1 to 100"),
        ({"max_hits": 101}, "`max_hits` must be from 1 to 100"),
        ({"name": "has space"}, "`name` must be 1 to 64"),
    ],
)
def test_settings_out_of_range_are_refused(
    indexed: ContentAddressedToolResultStore, settings_: dict[str, object], complaint: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(complaint)):
        make_search_tool(indexed, **settings_)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "query",
    ["ToolResultStore.write", "test_case_39", "/srv/app/handlers/login.py", "E1102", "ResultSto", "toolresultstore"],
)
def test_identifiers_paths_codes_and_parts_of_words_are_found(
    indexed: ContentAddressedToolResultStore, query: str
) -> None:
    source = indexed.write(key="1_read_file_a.txt", content=SOURCE)
    log = indexed.write(key="2_run_tests_b.txt", content=LOG)
    indexed.write(key="3_read_file_c.txt", content="nothing of interest here\n")
    answer = make_search_tool(indexed).invoke(query=query)
    found = _references(answer)
    expected = {source, log} & {ref for ref, text in ((source, SOURCE), (log, LOG)) if query.lower() in text.lower()}
    assert set(found) == expected
    assert "That is every result that holds a term." in answer


def test_a_hit_shows_its_reference_tool_time_size_and_numbered_lines(indexed: ContentAddressedToolResultStore) -> None:
    reference = indexed.write(key="compacted_read_file_0123456789abcdef0123456789abcdef.txt", content=SOURCE)
    answer = make_search_tool(indexed).invoke(query='"def write"')
    block = answer.split("\n\n")[1]
    first = block.splitlines()[0]
    assert first.startswith(f"1. '{reference}' (tool read_file; written 20")
    assert f"{len(SOURCE.encode())} bytes, {len(SOURCE.splitlines())} lines" in first  # a final newline starts no line
    # The matching line with its number, and a line of context on each side.
    assert block.splitlines()[1:] == [
        "   3- class ToolResultStore:",
        "   4:     def write(self, *, key, content):",
        "   5-         return self._repository.store(key)",
    ]
    # What the hit says is what the read tool reads at that line.
    window = make_read_tool(indexed).invoke(reference=reference, offset=4, limit=1)
    assert "    def write(self, *, key, content):" in window


def test_the_tool_name_comes_from_the_offload_history_when_the_key_does_not_say(
    indexed: ContentAddressedToolResultStore,
) -> None:
    reference = indexed.write(key="4_fetch_page_call_7.txt", content=LOG)
    indexed.record_offloads(
        compaction_id="c1",
        offloads=[OffloadRecord("fetch_page", "call_7", [reference], original_tokens=500, saved_tokens=400)],
    )
    assert "(tool fetch_page; " in make_search_tool(indexed).invoke(query="KeyError")


def test_identical_results_appear_once(indexed: ContentAddressedToolResultStore) -> None:
    for step in range(5):
        indexed.write(key=f"{step}_run_tests_call{step}.txt", content=LOG)
    indexed.write(key="9_run_tests_bin.log", content=LOG.encode())  # the same bytes, written as a file
    answer = make_search_tool(indexed).invoke(query="KeyError")
    assert len(_references(answer)) == 1


def test_tool_name_keeps_only_that_tools_results(indexed: ContentAddressedToolResultStore) -> None:
    from_hook = indexed.write(key="3_read_file_call_1.txt", content="alpha marker one\n")
    from_compactor = indexed.write(key="compacted_read_file_9f8e.txt", content="alpha marker two\n")
    offloaded = indexed.write(key="anything.txt", content="alpha marker three\n")
    indexed.record_offloads(
        compaction_id="c", offloads=[OffloadRecord("read_file", None, [offloaded], original_tokens=9, saved_tokens=1)]
    )
    other = indexed.write(key="4_grep_call_2.txt", content="alpha marker four\n")
    lookalike = indexed.write(key="5_read_files_call_3.txt", content="alpha marker five\n")
    tool = make_search_tool(indexed)
    assert set(_references(tool.invoke(query="alpha marker", tool_name="read_file"))) == {
        from_hook,
        from_compactor,
        offloaded,
    }
    assert set(_references(tool.invoke(query="alpha marker", tool_name="grep"))) == {other}
    assert set(_references(tool.invoke(query="alpha marker"))) == {
        from_hook,
        from_compactor,
        offloaded,
        other,
        lookalike,
    }
    assert "No offloaded result holds" in tool.invoke(query="alpha marker", tool_name="list_dir")


def test_tool_name_is_a_compactors_key_whole_never_a_prefix_of_it(indexed: ContentAddressedToolResultStore) -> None:
    # Haystack's compactor keys a result `compacted_<tool>_<uuid4 hex>`: that names its tool whole, so a tool whose
    # name is the start of another's (`read`, `read_file`) does not take the other's results.
    compacted = indexed.write(key=f"compacted_read_file_{'ab' * 16}.txt", content="gamma marker\n")
    own = indexed.write(key=f"compacted_read_{'cd' * 16}_2.txt", content="gamma marker too\n")
    tool = make_search_tool(indexed)
    assert set(_references(tool.invoke(query="gamma marker", tool_name="read_file"))) == {compacted}
    assert set(_references(tool.invoke(query="gamma marker", tool_name="read"))) == {own}


@pytest.mark.parametrize("inline_max", [0, 65536], ids=["file", "inline"])
def test_a_damaged_result_is_counted_never_shown(store_root: Path, inline_max: int) -> None:
    # A hit's lines come from a verified read: a frame forged to decode to other bytes is not shown, and the answer
    # says a result could not be read, while the intact one is found as ever.
    with ContentAddressedToolResultStore(
        store_root, namespace="alice", search_index=True, inline_max=inline_max
    ) as store:
        damaged = store.write(key="1_grep_a.txt", content="delta marker in the damaged one\n")
        intact = store.write(key="2_grep_b.txt", content="delta marker in the intact one\n")
        forged = zstandard.ZstdCompressor().compress(b"delta marker in a forged frame!!\n")
        digest = damaged.split("/")[1] + damaged.split("/")[2].split(".")[0]
        if inline_max:
            with closing(sqlite3.connect(store_root / "index.db")) as connection, connection:
                connection.execute(
                    "UPDATE blob_frames SET frame = ? WHERE blob_id = (SELECT id FROM blobs WHERE digest = ?)",
                    (forged, digest),
                )
        else:
            (path,) = (store_root / "blobs" / digest[:2]).glob(f"{digest[2:]}*")
            path.write_bytes(forged)
        answer = make_search_tool(store).invoke(query="delta marker")
    assert _references(answer) == [intact]
    assert "forged" not in answer and "1 result(s) could not be read" in answer


def test_limit_and_max_hits_bound_the_listing_and_the_rest_is_counted(
    indexed: ContentAddressedToolResultStore,
) -> None:
    for number in range(14):
        indexed.write(key=f"{number}_grep_c{number}.txt", content=f"shared needle in result {number}\n")
    tool = make_search_tool(indexed, max_hits=5)
    answer = tool.invoke(query="needle")
    assert len(_references(answer)) == 5
    assert "9 more results hold a term" in answer
    answer = tool.invoke(query="needle", limit=2)
    assert len(_references(answer)) == 2 and "12 more results hold a term" in answer
    assert len(_references(tool.invoke(query="needle", limit=50))) == 5  # the ceiling is max_hits
    assert tool.invoke(query="needle", limit=0).startswith("Error: `limit` must be a whole number from 1 to 5")
    # More digits than Python converts to a number: past the ceiling too, or below 1.
    assert len(_references(tool.invoke(query="needle", limit="9" * 5_000))) == 5
    assert len(_references(tool.invoke(query="needle", limit="0" * 5_000 + "3"))) == 3
    assert tool.invoke(query="needle", limit=-(10**5_000)) == (
        "Error: `limit` must be a whole number from 1 to 5, got a number of over 4,000 digits."
    )


def test_results_holding_more_and_rarer_terms_come_first(indexed: ContentAddressedToolResultStore) -> None:
    both = indexed.write(key="a.txt", content="timeout while connecting to database replica\n")
    for number in range(6):
        indexed.write(key=f"b{number}.txt", content=f"timeout number {number}\n")
    rare = indexed.write(key="c.txt", content="the replica is down\n")
    references = _references(make_search_tool(indexed).invoke(query="timeout replica"))
    assert references[0] == both
    assert references[1] == rare  # "replica" is rarer than "timeout" in this namespace
    assert len(references) == 8


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(max_chars=st.integers(min_value=1_000, max_value=6_000), width=st.integers(min_value=1, max_value=5_000))
def test_no_answer_exceeds_max_chars(indexed: ContentAddressedToolResultStore, max_chars: int, width: int) -> None:
    long_line = "x" * width + " needle " + "y" * width
    for number in range(3):
        indexed.write(key=f"{number}_t_c.txt", content=f"{number}\n{long_line}\n" * 20)
    answer = make_search_tool(indexed, max_chars=max_chars).invoke(query="needle")
    assert len(answer) <= max_chars
    assert _references(answer), answer  # the best hit is always listed


def test_a_store_without_a_search_index_says_how_to_turn_it_on(store: ContentAddressedToolResultStore) -> None:
    store.write(key="a.txt", content=LOG)
    answer = make_search_tool(store).invoke(query="KeyError")
    assert answer.startswith("This store has no search index")
    assert "search_index=True" in answer and "casstore search-index" in answer


def test_a_store_haystack_ships_gets_a_message(tmp_path: Path) -> None:
    answer = make_search_tool(FileSystemToolResultStore(tmp_path)).invoke(query="KeyError")
    assert answer.startswith("Error: this agent's store (FileSystemToolResultStore) cannot be searched")


def test_a_closed_store_gets_a_message(store_root: Path) -> None:
    store = ContentAddressedToolResultStore(store_root, search_index=True)
    tool = make_search_tool(store)
    store.close()
    assert tool.invoke(query="KeyError").startswith("Error: the store could not be searched (StoreClosedError)")


@pytest.mark.parametrize(
    ("arguments", "complaint"),
    [
        ({"query": None}, "`query` must be a string"),
        ({"query": 42}, "`query` must be a string"),
        ({"query": "a b c"}, "nothing to search for (terms shorter than 3 characters"),
        ({"query": '"" ""'}, "nothing to search for."),
        ({"query": "abc", "tool_name": "no such/tool"}, "`tool_name` must be a tool's name"),
        ({"query": "abc", "colour": 1}, "Unknown argument(s) 'colour'"),
    ],
)
def test_unusable_arguments_get_a_message(
    indexed: ContentAddressedToolResultStore, arguments: dict[str, object], complaint: str
) -> None:
    answer = make_search_tool(indexed).invoke(**arguments)
    assert answer.startswith("Error: ") and complaint in answer


def test_queries_are_text_never_an_engines_syntax(indexed: ContentAddressedToolResultStore) -> None:
    """FTS5's operators, column filters, quotes and NEAR, and SQL, are searched for as written."""
    hostile = 'body: NEAR(a b) OR "x" AND ^start * -- \'; DROP TABLE writes; --'
    reference = indexed.write(key="a.txt", content=f"before\n{hostile}\nafter\n")
    indexed.write(key="b.txt", content="OR AND NOT body start\n")
    tool = make_search_tool(indexed)
    assert _references(tool.invoke(query="DROP TABLE writes;")) == [reference]
    assert _references(tool.invoke(query='"NEAR(a b)"')) == [reference]
    assert _references(tool.invoke(query='body: "OR \\"x\\""')) == [reference]  # unbalanced quotes are text too
    with sqlite3.connect(indexed.root / "index.db") as connection:
        assert connection.execute("SELECT count(*) FROM writes").fetchone()[0] == 2


def test_a_query_of_thousands_of_terms_searches_the_first_ones_and_says_so(
    indexed: ContentAddressedToolResultStore,
) -> None:
    reference = indexed.write(key="a.txt", content="word0001 is here\n")
    query = " ".join(f"word{number:04}" for number in range(1, 2_001))
    answer = make_search_tool(indexed).invoke(query=query)
    assert _references(answer) == [reference]
    assert f"Note: only the first {MAX_TERMS} of 2000 terms were searched." in answer
    longer = make_search_tool(indexed).invoke(query=query * 3)  # past the query's cap, at 20,000 characters
    assert _references(longer) == [reference]
    assert "Note: the query was cut to its first 20,000 characters." in longer


def test_unicode_is_found_case_insensitively(indexed: ContentAddressedToolResultStore) -> None:
    reference = indexed.write(key="a.txt", content="Größe: ÜBERLAUF in Zürich; 日本語のログ; emoji 🚀🚀 ok\n")
    tool = make_search_tool(indexed)
    for query in ["überlauf", "ZÜRICH", "日本語", '"🚀🚀 ok"', "Größe"]:
        assert _references(tool.invoke(query=query)) == [reference], query


def test_parse_query_keeps_phrases_whole_and_words_as_written() -> None:
    assert parse_query('KeyError "def write" `path/to.py`, x') == (
        ["KeyError", "def write", "path/to.py"],
        ["terms shorter than 3 characters cannot be searched and were left out ('x')"],
    )
    assert parse_query("Alpha alpha ALPHA")[0] == ["Alpha"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=st.text(max_size=400) | st.lists(st.text(max_size=30), max_size=60).map(" ".join))
def test_any_query_gets_an_answer_not_an_exception(indexed: ContentAddressedToolResultStore, query: str) -> None:
    if not _references(make_search_tool(indexed).invoke(query="marker")):
        indexed.write(key="a.txt", content='marker "quoted" NEAR(a b) ü日本 * ^ : - OR AND\n')
    answer = make_search_tool(indexed, max_chars=2_000).invoke(query=query)
    assert isinstance(answer, str) and answer and len(answer) <= 2_000
    assert not answer.startswith("Error: the search failed"), answer  # that would be a bug caught by the tool


def test_a_search_past_its_time_says_so(indexed: ContentAddressedToolResultStore) -> None:
    for number in range(300):
        indexed.write(key=f"{number}.txt", content=f"common text {number}\n")
    outcome = indexed.search(terms=["common text"], seconds=1e-9)
    assert outcome.enabled and outcome.timed_out and outcome.hits == []


def test_the_tool_round_trips_through_serialization(
    indexed: ContentAddressedToolResultStore, allow_casstore_deserialization: None
) -> None:
    tool = make_search_tool(indexed, name="find_again", max_chars=5_000, max_hits=3)
    data = json.loads(json.dumps(tool.to_dict()))
    assert data["type"] == "casstore.compactor.search_tool.SearchOffloadedResultsTool"
    restored = SearchOffloadedResultsTool.from_dict(data)
    assert restored.to_dict() == data
    assert isinstance(restored.store, ContentAddressedToolResultStore) and restored.store.search_index
    restored.store.close()
