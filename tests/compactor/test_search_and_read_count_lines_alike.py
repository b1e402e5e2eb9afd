"""
The search tool and the read tool count lines alike (a final newline starts no line): the count the search answer
states is the number of lines the read tool pages through, and every line number the search answer shows is an
offset the read tool takes, never a phantom empty line after the last.
"""

import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from haystack.tools.tool import Tool
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from casstore import ContentAddressedToolResultStore
from casstore.compactor import make_read_tool, make_search_tool

NEEDLE = "Needle42"
# Terms holding `İ`, whose lower case is two characters (`i̇`): the lines are found as the search finds the term, in
# the text lower-cased whole, and numbered in the text as written.
NEEDLES = [NEEDLE, "İSTANBUL", "İstanbul", "KİLİT_HATASI", "abxİ"]
# Where a piece holds the example's term.
_TERM = "\x00"
STATED = re.compile(r" bytes, ([\d,]+) lines?; holds ")
SHOWN = re.compile(r"^   (\d+)[:-]", flags=re.MULTILINE)
MATCHING = re.compile(r"^   (\d+):", flags=re.MULTILINE)
MORE = re.compile(r"^   \(and (\d+) more match\(es\) after line (\d+)\)$", flags=re.MULTILINE)
HEADER = re.compile(r"^\[Lines (\d+)-(\d+) of (\d+)\.\]")
NEXT = re.compile(r"offset=(\d+) for the next lines")

# Line breaks of every kind: only `\n` ends a line for either tool, and both must agree on that too. (No NUL: text
# holding one is not indexed for search; it marks where the term goes.)
pieces = st.lists(
    st.one_of(
        # `İ` lower-cases to two characters: a line found in the lower-cased text must still be numbered right, and
        # near-misses of the terms (`I` for `İ`, `i̇` spelt out) are matches exactly when the search counts them.
        st.sampled_from(
            ["\n", "\n\n", "\r\n", "\r", "\u2028", " ", "İİİ", _TERM, f"\n{_TERM}\n", "ISTANBUL", "i\u0307stanbul"]
        ),
        st.sampled_from(["KILIT_HATASI", "ki\u0307li\u0307t_hatasi", "abxi", "abx", "İ", "\u0307"]),
        st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=12),
    ),
    max_size=30,
)


@pytest.fixture
def indexed(store_root: Path) -> Iterator[ContentAddressedToolResultStore]:
    with ContentAddressedToolResultStore(store_root, namespace="alice", search_index=True) as opened:
        yield opened


def _search(store: ContentAddressedToolResultStore, text: str, needle: str = NEEDLE) -> tuple[str, str]:
    """:returns: The reference of `text`, written as a tool's result, and the search answer listing it."""
    tool_name = f"tool{uuid.uuid4().hex[:12]}"  # this example's result alone among the store's
    reference = store.write(key=f"1_{tool_name}_call_1.txt", content=text)
    answer = make_search_tool(store).invoke(query=needle, tool_name=tool_name)
    assert f"'{reference}'" in answer, answer
    return reference, answer


def _lines_paged_through(read: Tool, reference: str) -> tuple[int, int]:
    """:returns: How many lines the read tool gives, window after window of 3, and the total its headers state."""
    offset, seen, totals = 1, 0, set()
    while True:
        answer = read.invoke(reference=reference, offset=offset, limit=3)
        header = HEADER.match(answer)
        assert header, answer
        first, last, total = map(int, header.groups())
        assert first == offset
        seen += last - first + 1
        totals.add(total)
        following = NEXT.search(answer.rsplit("\n", 1)[-1])
        if following is None:
            assert answer.endswith("[End of the result.]")
            (stated_total,) = totals
            return seen, stated_total
        offset = int(following.group(1))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(needle=st.sampled_from(NEEDLES), before=pieces, after=pieces, ends_in_newline=st.booleans())
def test_the_search_answer_counts_and_numbers_lines_as_the_read_tool_reads_them(
    indexed: ContentAddressedToolResultStore, needle: str, before: list[str], after: list[str], ends_in_newline: bool
) -> None:
    text = ("".join(before) + _TERM + "".join(after)).replace(_TERM, needle) + ("\n" if ends_in_newline else "")
    reference, answer = _search(indexed, text, needle)
    read = make_read_tool(indexed)
    stated = STATED.search(answer)
    assert stated, answer
    paged, read_total = _lines_paged_through(read, reference)
    assert int(stated.group(1).replace(",", "")) == paged == read_total
    shown = [int(number) for number in SHOWN.findall(answer)]
    assert shown, answer
    for number in shown:
        window = read.invoke(reference=reference, offset=number, limit=1)
        assert window.startswith(f"[Lines {number}-{number} of {paged}."), window
    # A line is shown as matching (`N:`) exactly when the read tool gives it with the term in it.
    matching = {int(number) for number in MATCHING.findall(answer)}
    for number in shown:
        holds = needle.lower() in read.invoke(reference=reference, offset=number, limit=1).lower()
        assert holds == (number in matching), answer
    # The matches said to follow are those after the last line shown, none of them shown.
    lines = text.split("\n")
    more = MORE.search(answer)
    following = sum(line.lower().count(needle.lower()) for line in lines[max(shown) :])
    said = (int(more.group(1)), int(more.group(2))) if more else (0, max(shown))
    assert said == (following, max(shown)), answer


def test_a_context_line_holding_the_term_is_a_match_and_not_counted_again(
    indexed: ContentAddressedToolResultStore,
) -> None:
    text = "".join(f"case_{number} {NEEDLE if number in (1, 5, 6, 7, 9) else 'ok'}\n" for number in range(1, 12))
    _, answer = _search(indexed, text)
    assert [line.split()[0] for line in answer.splitlines() if line.startswith("   ")] == [
        "1:",
        "2-",
        "...",
        "4-",
        "5:",
        "6:",
        "7:",
        "(and",
    ], answer  # lines 1, 5 and 6 are the first matching lines; 7, their context, matches too; 9 is the one more
    assert MORE.search(answer).groups() == ("1", "7"), answer  # type: ignore[union-attr]


def test_a_text_whose_lower_case_is_longer_is_numbered_as_read(indexed: ContentAddressedToolResultStore) -> None:
    text = "İ" * 50 + "\nsecond line\nthe third holds " + NEEDLE + "\nfourth"
    _, answer = _search(indexed, text)
    assert MATCHING.findall(answer) == ["3"] and f"3: the third holds {NEEDLE}" in answer, answer


def test_a_final_newline_adds_no_line_to_the_search_answer(indexed: ContentAddressedToolResultStore) -> None:
    text = "".join(f"line {number}\n" for number in range(1, 6)) + f"{NEEDLE} at the end\n"
    reference, answer = _search(indexed, text)
    assert f"{len(text.encode()):,} bytes, 6 lines" in answer
    assert SHOWN.findall(answer) == ["5", "6"]
    assert make_read_tool(indexed).invoke(reference=reference, offset=6).startswith("[Lines 6-6 of 6.]")


@pytest.mark.parametrize(
    ("text", "query"),
    [
        ("header\nŞehir: İSTANBUL büyük\nend\n", "İSTANBUL"),
        ("header\nŞehir: İSTANBUL büyük\nend\n", "İstanbul"),
        ("header\nKİLİT_HATASI code 7\nend\n", "KİLİT_HATASI"),
    ],
)
def test_a_term_whose_lower_case_is_longer_gets_its_line_numbers(
    indexed: ContentAddressedToolResultStore, text: str, query: str
) -> None:
    _, answer = _search(indexed, text, query)
    assert MATCHING.findall(answer) == ["2"] and "(the match spans lines)" not in answer, answer
