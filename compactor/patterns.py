"""
Patterns for searching a result: RE2 regular expressions, checked to be cheap enough to run before any search.

A pattern is matched within one line, without capture groups (they are what makes RE2 slow on long matches). Its
compiled program's size bounds what each search call costs, so a pattern whose program is too large is refused with a
message saying what to simplify; that size is checked with little memory for RE2, so that a huge program fails to
compile quickly.
"""

from typing import Any

import re2

MAX_PATTERN_LENGTH = 1000
# The most instructions a compiled pattern (forward or reverse) may have. A search costs up to the text's length times
# this; common patterns compile to tens or hundreds, `.{0,1000}` to about 9,000.
MAX_PROGRAM_SIZE = 10_000
# RE2's memory for one pattern, its programs and DFA caches: when checking its size, small so that huge programs fail
# to compile quickly (in about 15 ms); when searching, enough for the DFA of a pattern such as .{0,1000}x on a long
# line, which otherwise falls back to simulating the program, hundreds of times slower. Not more: when the DFA does
# give up, each call first spends work filling this memory (some 7 ms for 4 MiB).
_CHECK_MEM = 2 * 1024 * 1024
_SEARCH_MEM = 4 * 1024 * 1024
_SHOWN_PATTERN_CHARS = 60


class PatternError(ValueError):
    """The pattern cannot be used; the message tells the model what to change."""


def compile_pattern(pattern: str) -> Any:
    """
    Compile a pattern for `search`.

    :param pattern: An RE2 regular expression, matched within one line.
    :returns: The compiled expression.
    :raises PatternError: If the pattern is too long, RE2 cannot compile it, its program is too large, or it holds a
        lone surrogate or `\\C` (one byte, which can end a match inside a character).
    """
    if len(pattern) > MAX_PATTERN_LENGTH:
        raise PatternError(f"The pattern has {len(pattern)} characters; use at most {MAX_PATTERN_LENGTH}.")
    surrogate = next((index for index, character in enumerate(pattern) if "\ud800" <= character <= "\udfff"), None)
    if surrogate is not None:
        # Not a character (JSON arguments can carry one, "\ud800"): no text holds it, and RE2 cannot take it.
        raise PatternError(
            _refused(
                pattern,
                f"it holds a lone surrogate, {pattern[surrogate]!r} at index {surrogate}, which is half of a character "
                f"written in UTF-16 and matches nothing: write the whole character, such as é, or \\x{{e9}}",
            )
        )
    if _has_any_byte_escape(pattern):
        # The search counts lines and characters in the UTF-8 text it matched: a match must end between characters.
        raise PatternError(
            _refused(
                pattern,
                "\\C matches one byte, which can end a match inside a character: write . to match any one character",
            )
        )
    try:
        regex = re2.compile(f"(?m){pattern}", _options(_CHECK_MEM))
    except re2.error as error:
        reason = _reason(error)
        if "pattern too large" in reason:
            raise PatternError(_too_large(pattern, None)) from None
        raise PatternError(_invalid(pattern, reason)) from None
    # The reverse program, which finds where a match starts, is compiled here: -1 means it was too large to compile.
    size = program_size(regex)
    if size < 0 or size > MAX_PROGRAM_SIZE:
        raise PatternError(_too_large(pattern, size if size > 0 else None))
    return re2.compile(f"(?m){pattern}", _options(_SEARCH_MEM))


def _reason(error: Exception) -> str:
    """RE2's reason for refusing a pattern, such as `missing ): foo(` (what is wrong, then the part it is about)."""
    reason = error.args[0] if error.args else "invalid pattern"
    return (reason.decode("utf-8", "replace") if isinstance(reason, bytes) else str(reason))[:200]


# What each of RE2's reasons means in the pattern the model wrote, and what to write instead; `{part}` is the part of
# the pattern RE2 names.
_EXPLANATIONS = {
    "missing )": "a ( opens a group that is never closed: add its ), or write \\( to match a (",
    "unexpected )": "a ) closes no group: remove it, or write \\) to match a )",
    "missing ]": "the class {part} is never closed: add its ], or write \\[ to match a [",
    "trailing \\": "it ends in a lone backslash: write \\\\ to match a backslash",
    "no argument for repetition operator": (
        "{part} has nothing before it to repeat: put it after a character or group, or write \\{part} to match it"
    ),
    "bad repetition operator": "{part} repeats a repetition: use one operator, such as a* or a+ (a*? to match less)",
    "invalid repetition size": (
        "the count {part} is out of range: a count may be at most 1000, its second number no smaller than its first, "
        "and counts nested in counts multiply, to at most 1000 (write large ones as * or +)"
    ),
    "invalid perl operator": (
        "{part} is not a group or flag RE2 knows: it has no lookahead or lookbehind, no comments and no (?P=name) "
        "backreferences; it knows (?:...), (?P<name>...) and the flags i, m, s and U, such as (?i)"
    ),
    "invalid escape sequence": (
        "{part} is not an escape RE2 knows: there are no backreferences such as \\1, and only punctuation is "
        "escaped to match itself, such as \\. or \\("
    ),
    "invalid character class range": (
        "{part} is not a range or class RE2 knows: write a range lower end first, such as a-z, and a Unicode class "
        "by its name, such as \\pL or \\p{{Greek}}"
    ),
    "invalid character class": "{part} is not a class RE2 knows: use \\d, \\w, \\s, \\pL or [...]",
    "invalid named capture group": "{part} is not a valid group name: name a group as (?P<name>...), or use (...)",
}


def _invalid(pattern: str, reason: str) -> str:
    """The message refusing a pattern RE2 cannot compile, about the pattern as the model wrote it."""
    # RE2 names the part of the text it compiled, which starts with the `(?m)` this module adds: compiled alone, the
    # pattern fails the same way and the part named is the model's own. (Adding a flag changes no pattern's validity;
    # should it ever, the reason found first is kept, without the added flag.)
    try:
        re2.compile(pattern, _options(_CHECK_MEM))
    except re2.error as error:
        reason = _reason(error)
    else:
        reason = reason.replace("(?m)", "", 1)
    code, _, part = reason.partition(": ")
    explained = _EXPLANATIONS.get(code)
    return _refused(pattern, reason if explained is None else explained.format(part=part))


def _refused(pattern: str, what: str) -> str:
    """The message refusing a pattern, saying what is wrong in it (`what`) and what to write instead."""
    return (
        f"The pattern {shown(pattern)} is not a valid RE2 regular expression: {what}. RE2 supports the usual syntax "
        f"(classes, groups, alternation, repetition, (?i) for case-insensitive) but no backreferences and no "
        f"lookahead or lookbehind; escape literal characters such as ( [ . * + ? with a backslash."
    )


def _has_any_byte_escape(pattern: str) -> bool:
    """Whether the pattern uses `\\C`, RE2's escape for any one byte (and not a literal `\\C`, such as `\\\\C`)."""
    index = 0
    while (index := pattern.find("\\", index)) >= 0:
        escaped = pattern[index + 1 : index + 2]
        if escaped == "C":
            return True
        if escaped == "Q":  # literal text up to \E, or to the end
            end = pattern.find("\\E", index + 2)
            if end < 0:
                return False
            index = end + 2
        else:
            index += 2
    return False


def _options(max_mem: int) -> Any:
    options = re2.Options()
    options.never_nl = True
    options.never_capture = True
    options.log_errors = False
    options.max_mem = max_mem
    return options


def program_size(regex: Any) -> int:
    """
    The size of a compiled pattern's larger program (forward or reverse), in RE2 instructions.

    :param regex: A pattern compiled by RE2.
    :returns: The number of instructions, or -1 if RE2 could not compile one of the programs.
    """
    sizes = (regex.programsize, regex.reverseprogramsize)
    return -1 if min(sizes) < 0 else max(sizes)


def _too_large(pattern: str, size: int | None) -> str:
    """The message refusing a pattern whose program is too large, saying what to simplify."""
    compiled = f"{size:,}" if size is not None else "too many"
    return (
        f"The pattern {shown(pattern)} is too complex to search: it compiles to {compiled} RE2 instructions, and at "
        f"most {MAX_PROGRAM_SIZE:,} are allowed. Simplify it: RE2 copies what a counted repetition repeats once per "
        f"count, so write large counts such as .{{0,500}} or [a-z]{{200}}, and counts nested in counts, as * or +; use "
        f"fewer alternatives and fewer broad classes such as \\pL, or \\w under (?i). Or search for one distinctive "
        f"part of it and read around the matching lines with `offset`."
    )


def shown(pattern: str) -> str:
    """The pattern as quoted back to the model, shortened if long."""
    if len(pattern) <= _SHOWN_PATTERN_CHARS:
        return repr(pattern)
    return f"{pattern[:_SHOWN_PATTERN_CHARS]!r}..."
