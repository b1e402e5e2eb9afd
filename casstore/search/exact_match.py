"""
How exactly a result holds a search's query: the grade that puts an exact identifier ahead of the longer ones it
begins or sits inside.

An agent searching for an error code, a ticket id, a function name or a hash wants the result holding that token
itself first, not one holding a longer token that merely starts with it (`alpha_ident_17` against `alpha_ident_170`).
So the query's text, its terms one after the other (any white space between them), is graded in each result:

- `EXACT_CASE`: it occurs as whole tokens, with the case as written;
- `EXACT`: it occurs as whole tokens in another case;
- `INSIDE`: it occurs only inside longer tokens (a prefix, a part of a word);
- `SCATTERED`: a query of several terms whose terms occur, but not one after the other.

A token is a run of letters, digits and `_ - . / :` (an identifier, a dotted path, a file path, a hash). A match is
whole when the characters on either side of it are not token characters, where its own edge is one (a term that
starts with `(` needs no boundary before it); `::` right before it separates it from what precedes (a pytest node id
`tests/test_io.py::test_case_3`, a Rust or C++ path `std::vector`); a `.` or `:` right after it counts as
punctuation, not as part of the token, when no token character follows it (the end of a sentence, `E1102: ...`).

The local store grades the texts it reads (`Grading.grade`); the shared store grades in PostgreSQL, on the folded
text it keeps (`Grading.postgres_patterns`, the same rules as PostgreSQL regular expressions, whose letters are the
database's locale's), and tells the case apart on the texts it reads for the hits it lists.
"""

import re
from collections.abc import Callable, Sequence

EXACT_CASE = 0
EXACT = 1
INSIDE = 2
SCATTERED = 3

# The punctuation that belongs to a token, beside letters and digits (and `_`, which `\w` holds).
_TOKEN_PUNCTUATION = "./:-"
_TOKEN = r"[\w./:-]"
# After a match: no token character, except `.` or `:` that no token character follows (they end a sentence then).
_TOKEN_AFTER = r"(?![\w/-]|[.:][\w./:-])"
# The same classes for PostgreSQL's regular expressions (`[[:alnum:]_]` is its `\w`).
_PG_TOKEN_CLASS = "[:alnum:]_./:-"
_PG_BEFORE = f"(^|[^{_PG_TOKEN_CLASS}]|::)"
_PG_AFTER = f"($|[^{_PG_TOKEN_CLASS}]|[.:]($|[^{_PG_TOKEN_CLASS}]))"
_PG_SPACE = "[[:space:]]+"
# Occurrences of a one-term query checked in Python before a regular expression looks on.
_FOUND_AT_MOST = 32


def _is_token_character(character: str) -> bool:
    return character.isalnum() or character == "_" or character in _TOKEN_PUNCTUATION


def _whole_pattern(terms: Sequence[str]) -> str:
    # The literal first and the boundary before it as a look-behind over it, so that `re` scans for the literal (ten
    # times faster on a long text than trying the look-behind at every position).
    first = terms[0]
    pattern = re.escape(first)
    if _is_token_character(first[0]):
        # No token character before it, or `::`.
        pattern += f"(?:(?<!{_TOKEN}.{{{len(first)}}})|(?<=::.{{{len(first)}}}))"
    pattern += "".join(r"\s+" + re.escape(term) for term in terms[1:])
    if _is_token_character(terms[-1][-1]):
        pattern += _TOKEN_AFTER
    return pattern


def _postgres_escaped(term: str) -> str:
    # In PostgreSQL's advanced regular expressions a backslash before a character that is not alphanumeric makes it
    # literal; letters and digits (and anything outside ASCII) stand for themselves.
    return "".join(
        f"\\{character}" if character.isascii() and not character.isalnum() else character for character in term
    )


class _Whole:
    """
    Whether a text holds terms whole. One term (most queries) is found by `str.find`, its first occurrences checked
    in Python; past those, and for several terms, by a regular expression compiled on first use (compiling one costs
    more than a search that reads a few candidates).
    """

    __slots__ = ("_pattern", "terms")

    def __init__(self, terms: Sequence[str]) -> None:
        self.terms = tuple(terms)
        self._pattern: re.Pattern[str] | None = None

    def _compiled(self) -> re.Pattern[str]:
        if self._pattern is None:
            self._pattern = re.compile(_whole_pattern(self.terms), re.DOTALL)
        return self._pattern

    def search(self, text: str) -> bool:
        """:returns: Whether `text` holds the terms whole (see the module's docstring)."""
        if len(self.terms) > 1:
            return self._compiled().search(text) is not None
        term = self.terms[0]
        before, after = _is_token_character(term[0]), _is_token_character(term[-1])
        position = text.find(term)
        for _ in range(_FOUND_AT_MOST):
            if position < 0:
                return False
            end = position + len(term)
            if (not before or _starts_token(text, position)) and (not after or _ends_token(text, end)):
                return True
            position = text.find(term, position + 1)
        # Many occurrences inside longer tokens: the regular expression looks on from there (it sees what precedes).
        return position >= 0 and self._compiled().search(text, position) is not None


def _starts_token(text: str, start: int) -> bool:
    # Whether a match starting at `start` starts a token: nothing precedes, or no token character, or `::`.
    return start == 0 or not _is_token_character(text[start - 1]) or text.startswith("::", start - 2)


def _ends_token(text: str, end: int) -> bool:
    # Whether a match ending at `end` ends a token: nothing follows, or no token character, or a `.` or `:` that no
    # token character follows.
    if end == len(text) or not _is_token_character(text[end]):
        return True
    return text[end] in ".:" and (end + 1 == len(text) or not _is_token_character(text[end + 1]))


class Grading:
    """The grading of results for one query's terms (see the module's docstring)."""

    __slots__ = ("_as_written", "_folded", "_together", "terms")

    def __init__(self, terms: Sequence[str]) -> None:
        """
        :param terms: The query's terms, as the model wrote them (each non-empty).
        """
        self.terms = tuple(terms)
        folded = [term.lower() for term in terms]
        self._as_written = _Whole(terms)
        self._folded = _Whole(folded)
        # The terms one after the other anywhere (folded), for a query of several terms; compiled on first use.
        self._together: re.Pattern[str] | None = None

    @classmethod
    def of(cls, terms: Sequence[str]) -> "Grading":
        """:returns: The grading of results for `terms`."""
        return cls(terms)

    def grade(self, text: str, lowered: str) -> int:
        """
        :param text: A result's text that holds at least one term.
        :param lowered: `text.lower()`, as the search compares.
        :returns: `EXACT_CASE`, `EXACT`, `INSIDE` or `SCATTERED`.
        """
        if self._as_written.search(text):
            return EXACT_CASE
        if text == lowered and self._folded.terms == self.terms:
            # Nothing to fold: the folded terms are not whole in it either (the common case of a lower-case query).
            return self._apart_grade(lowered)
        return self.folded_grade(lowered)

    def folded_grade(self, lowered: str) -> int:
        """:returns: The grade of a text known only folded: `EXACT` at best (the case cannot be told)."""
        if self._folded.search(lowered):
            return EXACT
        return self._apart_grade(lowered)

    def _apart_grade(self, lowered: str) -> int:
        # `INSIDE` or `SCATTERED`, for a text that does not hold the terms whole.
        if len(self.terms) == 1:
            return INSIDE  # every hit holds its one term
        if self._together is None:
            self._together = re.compile(r"\s+".join(re.escape(term) for term in self._folded.terms))
        return INSIDE if self._together.search(lowered) else SCATTERED

    def refined(self, grade: int, text: str) -> int:
        """:returns: `grade` (from `folded_grade` or PostgreSQL) with the case told apart on the text as written."""
        if grade == EXACT and self._as_written.search(text):
            return EXACT_CASE
        return grade

    def postgres_patterns(self, fold: Callable[[str], str]) -> tuple[str, str | None]:
        """
        :param fold: How the engine folds a text and a term (`casstore.search.postgres.folded`).
        :returns: PostgreSQL regular expressions over a folded text: the terms whole (`EXACT`), and the terms one
            after the other anywhere (`INSIDE`; None for a single term, which every hit holds).
        """
        folded = [_postgres_escaped(fold(term)) for term in self.terms]
        joined = _PG_SPACE.join(folded)
        before = _PG_BEFORE if _is_token_character(self.terms[0][0]) else ""
        after = _PG_AFTER if _is_token_character(self.terms[-1][-1]) else ""
        return before + joined + after, (joined if len(self.terms) > 1 else None)
