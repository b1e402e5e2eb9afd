"""
The search tool puts the result holding the query exactly first, on both engines (SQLite FTS5 and PostgreSQL
`pg_trgm`): an identifier whole before the longer tokens it begins or sits inside, its case as written before another
case, the terms as a phrase before the terms apart; and hostile queries get an answer and change nothing.
"""

import itertools
import random
import re
from collections.abc import Callable, Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from casstore import ContentAddressedToolResultStore, SharedToolResultStore
from casstore.compactor import make_search_tool
from casstore.stores.local import RepositoryToolResultStore
from tests.store_backends import Backend, LocalBackend, SharedBackend

pytestmark = pytest.mark.filterwarnings("ignore::haystack.utils.experimental.ExperimentalWarning")

Opener = Callable[[str], RepositoryToolResultStore]
_NAMESPACES = itertools.count()
_PROSE = ["the", "agent", "read", "file", "again", "found", "handler", "while", "build", "ran", "tests", "deploy"]


@pytest.fixture
def open_searchable(backend: Backend) -> Iterator[Opener]:
    """`open_searchable(namespace)`: a store with the search index on, on the test's backend, closed after it."""
    opened: list[RepositoryToolResultStore] = []

    def open_one(namespace: str) -> RepositoryToolResultStore:
        store: RepositoryToolResultStore
        if isinstance(backend, LocalBackend):
            store = ContentAddressedToolResultStore(backend.root, namespace=namespace, search_index=True)
        else:
            assert isinstance(backend, SharedBackend)
            store = SharedToolResultStore(
                index_url=backend.index_url,
                blob_url=backend.s3.url,
                blob_options=backend.s3.options,
                namespace=namespace,
                search_index=True,
            )
        opened.append(store)
        return store

    yield open_one
    for store in opened:
        store.close()


def _references(answer: str) -> list[str]:
    return re.findall(r"^\d+\. '([^']+)'", answer, flags=re.MULTILINE)


def _prose(chooser: random.Random, words: int) -> str:
    return " ".join(chooser.choice(_PROSE) for _ in range(words))


def _result(chooser: random.Random, token: str, *, words: int, node_id: bool = False) -> str:
    """
    A result with one line naming `token` among lines of prose (`words` of them in all); with `node_id`, the line is
    pytest's, naming `token` as a test in a file or a class (`tests/test_io.py::TestIO::token FAILED`).
    """
    if node_id:
        line = chooser.choice(
            [f"tests/test_io.py::{token} FAILED", f"tests/unit/test_io.py::TestIO::{token} PASSED   [ 40%]"]
        )
    else:
        line = chooser.choice(
            [
                f"    raise LookupError('{token}') from error",
                f"E1102: {token}: not found",
                f"see {token}.",
                f"value = registry[{token!r}]",
                f"ERROR {token} failed after 3 attempts",
            ]
        )
    return f"{_prose(chooser, words // 2)}\n{line}\n{_prose(chooser, words - words // 2)}\n"


@pytest.mark.slow
def test_an_exact_identifier_ranks_first_among_300_results(open_searchable: Opener) -> None:
    store = open_searchable("ident")
    chooser = random.Random(17)
    references = {
        number: store.write(
            key=f"{number}_run_c{number}.txt",
            content=_result(chooser, f"alpha_ident_{number}", words=chooser.randint(5, 120)),
        )
        for number in range(300)
    }
    tool = make_search_tool(store)
    # 1 and 2 begin 110 other identifiers each (10..19, 100..199): more candidates than a search reads by default.
    for number in [1, 2, 17, *chooser.sample(range(300), 37)]:
        listed = _references(tool.invoke(query=f"alpha_ident_{number}"))
        assert listed[0] == references[number], number
        assert len(listed) == min(10, sum(str(other).startswith(str(number)) for other in range(300)))
    # A part of an identifier still finds results (none of them holds it whole).
    assert len(_references(tool.invoke(query="ha_ident_2"))) == 10


@pytest.mark.parametrize("shorter", [1_200, pytest.param(2_500, marks=pytest.mark.slow)])
def test_an_exact_identifier_behind_thousands_of_shorter_longer_tokens_is_found(
    open_searchable: Opener, shorter: int
) -> None:
    # More shorter results than a term hands the ranking (its 1,000 shortest; 300 once over 2,000 results hold its
    # trigrams), each holding a longer token: the search looks on through the later candidates.
    store = open_searchable(f"behind-{shorter}")
    for number in range(shorter):
        store.write(key=f"{number}_t_x.txt", content=f"value alpha_ident_17{number % 10}{number} here\n")
    exact = store.write(
        key=f"{shorter}_t_y.txt", content="prose line\n" * 450 + "raise LookupError('alpha_ident_17') from error\n"
    )
    answer = make_search_tool(store).invoke(query="alpha_ident_17", limit=3)
    assert _references(answer)[0] == exact, answer
    # Only the tool's results: the same.
    assert _references(make_search_tool(store).invoke(query="alpha_ident_17", tool_name="t", limit=3))[0] == exact


_WORDS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=2, max_size=8)
_IDENTIFIERS = st.one_of(
    st.builds(lambda a, b, n: f"{a}_{b}_{n}", _WORDS, _WORDS, st.integers(min_value=0, max_value=999)),
    st.builds(".".join, st.lists(_WORDS, min_size=2, max_size=4)),
    st.builds(lambda a, b: f"{a}/{b}.py", _WORDS, _WORDS),
    st.text(alphabet="0123456789abcdef", min_size=12, max_size=40),
    st.builds(lambda a, n: f"{a.upper()}-{n}", _WORDS, st.integers(min_value=1, max_value=9999)),
    st.builds(lambda a, b: f"{a}{b.capitalize()}Error", _WORDS, _WORDS),
)


def _longer(token: str) -> list[str]:
    """Tokens that hold `token` but are not it: `token` followed by 0..9, and prefixed and suffixed variants."""
    return [
        *(f"{token}{digit}" for digit in range(10)),
        f"x_{token}",
        f"pkg.{token}",
        f"/srv/{token}",
        f"{token}_old",
        f"{token}.attr",
        f"{token}-2",
        f"{token}:88",
    ]


@pytest.mark.slow
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    token=_IDENTIFIERS,
    seed=st.integers(min_value=0, max_value=2**32),
    exact_words=st.integers(min_value=0, max_value=400),
    with_other_case=st.booleans(),
    node_ids=st.booleans(),
)
def test_the_exact_token_comes_first_then_another_case_then_the_longer_ones(
    open_searchable: Opener, *, token: str, seed: int, exact_words: int, with_other_case: bool, node_ids: bool
) -> None:
    # With `node_ids`, every result names its token in a pytest node id, after `::`.
    with open_searchable(f"property-{next(_NAMESPACES)}") as store:  # closed after each example: few connections
        chooser = random.Random(seed)
        longer = [
            store.write(
                key=f"{number}_grep_c{number}.txt",
                content=_result(chooser, variant, words=chooser.randint(0, 40), node_id=node_ids),
            )
            for number, variant in enumerate(_longer(token))
        ]
        # The exact result is as long as the seed says: often far longer than those holding longer tokens.
        exact = store.write(
            key="90_grep_exact.txt", content=_result(chooser, token, words=exact_words, node_id=node_ids)
        )
        other_case = token.upper() if token.upper() != token else token.lower()
        folded = (
            store.write(
                key="91_grep_case.txt",
                content=_result(chooser, other_case, words=chooser.randint(0, 40), node_id=node_ids),
            )
            if with_other_case and other_case != token
            else None
        )
        tool = make_search_tool(store, max_hits=30, max_chars=100_000)
        answer = tool.invoke(query=token)
        listed = _references(answer)
        assert listed[0] == exact, answer
        if folded is not None:
            assert listed[1] == folded, answer
        assert sorted(listed) == sorted({exact, *longer} | ({folded} if folded else set())), answer
        # Listing fewer than hold the query, the search chooses the best among them all.
        for count in (1, 2):
            assert _references(tool.invoke(query=token, limit=count)) == listed[:count], count


def test_a_test_named_after_double_colons_ranks_first(open_searchable: Opener) -> None:
    store = open_searchable("node-ids")
    failed = store.write(
        key="0_run_tests_a.txt", content="tests/test_io.py::test_case_3 FAILED\nE   KeyError: 'user_id'\n" + "ok\n" * 40
    )
    for number in range(12):
        store.write(key=f"{number + 1}_run_tests_b.txt", content=f"tests/test_io.py::test_case_3{number} PASSED\n")
    assert _references(make_search_tool(store, max_hits=100).invoke(query="test_case_3"))[0] == failed
    # A Rust or C++ path's last name after `::` is whole too; a dotted path's and a file's line number stay part of
    # the token (`pkg.mod` is not whole in `pkg.mod.func`, nor `app.py` in `app.py:88`).
    vector = store.write(key="20_t_c.txt", content=_prose(random.Random(2), 300) + "\nlet v: std::vector<u8>\n")
    store.write(key="21_t_c.txt", content="std::vector_base\n")
    assert _references(make_search_tool(store).invoke(query="vector"))[0] == vector
    dotted = store.write(key="22_t_c.txt", content=_prose(random.Random(3), 300) + "\nimport pkg.mod\n")
    store.write(key="23_t_c.txt", content="pkg.mod.func()\n")
    assert _references(make_search_tool(store).invoke(query="pkg.mod"))[0] == dotted
    file = store.write(key="24_t_c.txt", content=_prose(random.Random(4), 300) + "\nin app.py\n")
    store.write(key="25_t_c.txt", content="app.py:88\n")
    assert _references(make_search_tool(store).invoke(query="app.py"))[0] == file


def test_a_phrase_comes_before_its_words_apart(open_searchable: Opener) -> None:
    store = open_searchable("phrase")
    apart = [
        store.write(key=f"{number}_logs_c{number}.txt", content=f"refused {number}\nconnection {number}\n")
        for number in range(5)
    ]
    inside = store.write(key="8_logs_c8.txt", content="reconnection refused twice\n")
    phrase = store.write(
        key="9_logs_c9.txt", content=_result(random.Random(3), "ok", words=300) + "Connection   refused by replica\n"
    )
    listed = _references(make_search_tool(store).invoke(query="connection refused"))
    assert listed[:2] == [phrase, inside]
    assert sorted(listed[2:]) == sorted(apart)


def _state(backend: Backend) -> list[object]:
    tables = ["writes", "blobs", "search_documents", "search_entries", "search_namespaces", "search_pending"]
    return [backend.count(table) for table in tables] + [backend.blob_names()]


_HOSTILE = [
    '"alpha_ident_17',
    'alpha_ident_17"',
    'alpha"ident"17',
    "NEAR(alpha_ident_17 other)",
    "alpha_ident*",
    "-alpha_ident_17",
    "^alpha_ident_17",
    "body:alpha_ident_17",
    "search_text:alpha",
    "'; DROP TABLE search_text; --",
    "alpha_ident_17') OR 1=1; DELETE FROM search_documents; --",
    "\x00alpha_ident_17\x00",
    "alpha\x00ident",
    "(^|[^a])alpha.*$",
    "\\",
    "%_%",
    "x" * 100_000,
    "alpha_ident_17 " * 7_000,
    "".join(chr(32 + (number * 7919) % 90) for number in range(100_000)),
]


def test_hostile_queries_get_an_answer_and_change_nothing(backend: Backend, open_searchable: Opener) -> None:
    store = open_searchable("hostile")
    chooser = random.Random(5)
    exact = store.write(key="17_run_c.txt", content=_result(chooser, "alpha_ident_17", words=200))
    for number in range(170, 180):
        store.write(key=f"{number}_run_c.txt", content=_result(chooser, f"alpha_ident_{number}", words=10))
    tool = make_search_tool(store)
    assert _references(tool.invoke(query="alpha_ident_17"))[0] == exact
    before = _state(backend)
    for query in _HOSTILE:
        answer = tool.invoke(query=query)
        assert isinstance(answer, str) and answer, query[:40]
        assert not answer.startswith("Error: the search failed"), (query[:40], answer)
        assert "took too long" not in answer, query[:40]
        assert _references(tool.invoke(query="alpha_ident_17"))[0] == exact, query[:40]
    assert _state(backend) == before


def test_a_phrase_of_regex_and_sql_punctuation_is_graded_as_text(open_searchable: Opener) -> None:
    store = open_searchable("punctuation")
    term = r"cfg[a-z]+ (x|y)? $1 \d.*%_' --"
    inside = store.write(key="1_t_c.txt", content="set xcfg[a-z]+ (x|y)? $1 \\d.*%_' -- now\n")
    exact = store.write(key="2_t_c.txt", content=_result(random.Random(9), "ok", words=200) + f"set {term} now\n")
    store.write(key="3_t_c.txt", content="set cfg[a-z]+ (x|y) $1\n")  # only some of the phrase: not a hit
    tool = make_search_tool(store)
    assert _references(tool.invoke(query=f'"{term}"')) == [exact, inside]
    assert _references(tool.invoke(query=f'"{term}"', limit=1)) == [exact]


def test_a_whole_token_after_many_longer_ones_in_the_same_result_is_found(open_searchable: Opener) -> None:
    store = open_searchable("many")
    # Scored alone, the short result holding only longer tokens would come first.
    longer = store.write(key="1_t_c.txt", content="alpha_ident_170 " * 10)
    late = store.write(
        key="2_t_c.txt", content="alpha_ident_170 " * 40 + _prose(random.Random(1), 4_000) + "\nsee alpha_ident_17.\n"
    )
    phrase_late = store.write(key="3_t_c.txt", content="such ident7 " * 100 + "\nSuch  ident\n")
    apart = store.write(key="4_t_c.txt", content="ident such\n")
    tool = make_search_tool(store)
    assert _references(tool.invoke(query="alpha_ident_17")) == [late, longer]
    assert _references(tool.invoke(query="such ident"))[:2] == [phrase_late, apart]
