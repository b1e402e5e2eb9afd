"""
What the model passes to the search tool, checked: its query split into the terms searched (`parse_query`: words
and "quoted phrases", each a case-insensitive substring, never an engine's query syntax), its `tool_name` and its
`limit`. An unusable argument raises `ArgumentError`, whose message the tool hands the model.
"""

import re

from casstore.repository import MIN_TERM_CHARS

# The query's terms searched at most, and the characters of one term; a longer query is cut, and the answer says so.
MAX_TERMS = 32

MAX_TERM_CHARS = 500

MAX_QUERY_CHARS = 20_000
# The most digits of a number written as a string that are converted (Python converts at most 4,300).
_MAX_DIGITS = 4_000
_TOO_LONG = 10**_MAX_DIGITS

TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")

# A quoted phrase, or a run of anything but white space.
_TERM = re.compile(r'"([^"]*)"|(\S+)')

# Left off a bare word's ends: quotes and list punctuation the model may copy along with it.
_WORD_EDGES = "'`\",;"


class ArgumentError(ValueError):
    """An argument the model passed is unusable; the message says which and why."""


def parse_query(query: object) -> tuple[list[str], list[str]]:
    """
    Split a query into the terms searched: "quoted phrases" whole, other words at white space, each as written
    (case does not matter), duplicates once.

    :returns: The terms, and notes on what was left out (terms too short, beyond the limits).
    :raises ArgumentError: If the query is not a string or leaves no term to search.
    """
    if not isinstance(query, str):
        raise ArgumentError(f'`query` must be a string of words or "quoted phrases", got {query!r:.60}.')
    # Text a store can hold: no NUL, no lone surrogate (JSON can carry one).
    text = query[:MAX_QUERY_CHARS].replace("\x00", " ").encode("utf-8", "ignore").decode("utf-8")
    notes = []
    if len(query) > MAX_QUERY_CHARS:
        notes.append(f"the query was cut to its first {MAX_QUERY_CHARS:,} characters")
    terms: list[str] = []
    seen: set[str] = set()
    short: list[str] = []
    for match in _TERM.finditer(text):
        phrase, word = match.groups()
        term = phrase if phrase is not None else word.strip(_WORD_EDGES)
        if phrase is not None and not phrase.strip():
            continue
        if len(term) < MIN_TERM_CHARS:
            if term and term not in short:
                short.append(term)
            continue
        if len(term) > MAX_TERM_CHARS:
            term = term[:MAX_TERM_CHARS]
            notes.append(f"a term was cut to its first {MAX_TERM_CHARS} characters")
        if term.lower() in seen:
            continue
        seen.add(term.lower())
        terms.append(term)
    if short:
        listed = ", ".join(repr(term) for term in short[:5])
        notes.append(f"terms shorter than {MIN_TERM_CHARS} characters cannot be searched and were left out ({listed})")
    if len(terms) > MAX_TERMS:
        notes.append(f"only the first {MAX_TERMS} of {len(terms)} terms were searched")
        terms = terms[:MAX_TERMS]
    if not terms:
        reason = f" ({notes[-1]})" if notes else ""
        raise ArgumentError(
            f'nothing to search for{reason}. Pass words or "quoted phrases" of at least {MIN_TERM_CHARS} '
            f"characters, such as 'KeyError' or '\"def write\"'."
        )
    return terms, notes


def tool_name_argument(value: object) -> str | None:
    """
    :returns: The tool whose results to search, or None for all.
    :raises ArgumentError: If `value` is not a tool's name.
    """
    if value is None or value == "":
        return None
    if not isinstance(value, str) or not TOOL_NAME.fullmatch(value.strip()):
        raise ArgumentError(
            f"`tool_name` must be a tool's name (letters, digits, '_' or '-'), such as 'read_file'; got {value!r:.60}."
        )
    return value.strip()


def limit_argument(value: object, ceiling: int) -> int:
    """
    :returns: How many results to list: `value` as a whole number, at most `ceiling` (which is also the default).
    :raises ArgumentError: If `value` is not a whole number of at least 1.
    """
    if value is None:
        return ceiling
    if isinstance(value, str) and value.strip().isdecimal():
        digits = value.strip().lstrip("0") or "0"
        # More digits than Python converts (4,300) make a number over any ceiling.
        value = int(digits) if len(digits) <= _MAX_DIGITS else ceiling + 1
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        shown = "a number of over 4,000 digits" if isinstance(value, int) and value <= -_TOO_LONG else f"{value!r:.40}"
        raise ArgumentError(f"`limit` must be a whole number from 1 to {ceiling}, got {shown}.")
    return min(value, ceiling)
