"""The read tool's answer to a pattern RE2 refuses: what is wrong with the pattern the model wrote, in its own terms."""

import pytest
import re2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from casstore import ContentAddressedToolResultStore
from casstore.compactor import make_read_tool
from casstore.compactor.patterns import _CHECK_MEM, PatternError, _options, compile_pattern

LOG = "".join(f"line {number}: status=ok\n" for number in range(1, 31))
# Characters RE2 gives meaning to, and a few it does not, to build patterns both valid and not.
_PATTERN_ALPHABET = "()[]{}*+?|\\^$.,:-=!<>Pamdw10"


@pytest.mark.parametrize(
    ("pattern", "what_is_wrong"),
    [
        ("status(", "a ( opens a group that is never closed: add its )"),
        ("(?m)status(", "a ( opens a group that is never closed"),  # the model's own flag is quoted back
        ("ok)", "a ) closes no group"),
        ("[a-z", "the class [a-z is never closed"),
        ("line\\", "it ends in a lone backslash"),
        ("*ok", "* has nothing before it to repeat"),
        ("ok**", "** repeats a repetition"),
        ("o{3,2}", "the count {3,2} is out of range"),
        ("(?<=line )1", "(?<= is not a group or flag RE2 knows: it has no lookahead or lookbehind"),
        ("(s)\\1", "\\1 is not an escape RE2 knows: there are no backreferences"),
        ("[z-a]", "z-a is not a range or class RE2 knows"),
    ],
)
def test_an_invalid_pattern_is_answered_with_what_is_wrong_in_it(
    store: ContentAddressedToolResultStore, pattern: str, what_is_wrong: str
) -> None:
    answer = make_read_tool(store).invoke(reference=store.write(key="log.txt", content=LOG), pattern=pattern)
    assert isinstance(answer, str)
    assert answer.startswith(f"Error: The pattern {pattern!r} is not a valid RE2 regular expression: {what_is_wrong}")
    # The pattern the tool compiles starts with an added `(?m)`: only the model's own text is quoted back.
    assert answer.count("(?m)") == pattern.count("(?m)"), answer


@given(pattern=st.text(alphabet=_PATTERN_ALPHABET, max_size=12))
def test_a_refused_pattern_is_quoted_as_written(pattern: str) -> None:
    try:
        compile_pattern(pattern)
    except PatternError as error:
        message = str(error)
        assert message.startswith(f"The pattern {pattern!r} ")
        assert message.count("(?m)") == pattern.count("(?m)"), message


@given(pattern=st.text(alphabet=_PATTERN_ALPHABET, max_size=12))
def test_re2_refuses_a_pattern_with_the_multiline_flag_exactly_when_it_refuses_it_alone(pattern: str) -> None:
    # What the message relies on: the pattern compiled alone fails when the one searched with fails.
    def valid(text: str) -> bool:
        try:
            re2.compile(text, _options(_CHECK_MEM))
        except re2.error:
            return False
        return True

    assert valid(pattern) == valid(f"(?m){pattern}")


@pytest.mark.parametrize(
    ("pattern", "what_is_wrong"),
    [
        ("f\\C", "\\C matches one byte, which can end a match inside a character: write . to match"),
        ("\\Q.\\E\\C", "\\C matches one byte"),
        ("caf\ud800", "it holds a lone surrogate, '\\ud800' at index 3, which is half of a character"),
        ("[\udc00-\udfff]", "it holds a lone surrogate, '\\udc00' at index 1"),
    ],
)
def test_a_pattern_that_could_end_a_match_inside_a_character_is_answered_with_what_to_write(
    store: ContentAddressedToolResultStore, pattern: str, what_is_wrong: str
) -> None:
    reference = store.write(key="words.txt", content="café\nnaïve été\n")
    answer = make_read_tool(store).invoke(reference=reference, pattern=pattern)
    assert answer.startswith(f"Error: The pattern {pattern!r} is not a valid RE2 regular expression: {what_is_wrong}")


@pytest.mark.parametrize("pattern", ["\\\\C", "\\QC\\C\\E", "[\\\\C]", "\\pC"])
def test_a_literal_backslash_c_is_searched_for(store: ContentAddressedToolResultStore, pattern: str) -> None:
    reference = store.write(key="path.txt", content="C:\\Cache\\QC\\C\\E\n")
    answer = make_read_tool(store).invoke(reference=reference, pattern=pattern)
    assert not answer.startswith("Error"), answer


_TEXT = "café\nnaïve été 😀\n\\C \\Q\n"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pattern=st.text(alphabet=[*"\\CQE.é?*[]()", "\ud800", "\udfff"], max_size=10))
def test_any_pattern_is_searched_or_gets_a_pattern_message(
    store: ContentAddressedToolResultStore, pattern: str
) -> None:
    reference = store.write(key="words.txt", content=_TEXT)
    answer = make_read_tool(store).invoke(reference=reference, pattern=pattern)
    assert answer.startswith(("Error: The pattern ", "No line", "[")), answer
