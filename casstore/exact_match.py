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
starts with `(` needs no boundary before it); a `.` or `:` right after it counts as punctuation, not as part of the
token, when no token character follows it (the end of a sentence, `E1102: ...`).

The local store grades the texts it reads (`Grading.grade`); the shared store grades in PostgreSQL, on the folded
text it keeps (`Grading.postgres_patterns`, the same rules as PostgreSQL regular expressions, whose letters are the
database's locale's), and tells the case apart on the texts it reads for the hits it lists.
"""

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

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
_PG_BEFORE = f"(^|[^{_PG_TOKEN_CLASS}])"
_PG_AFTER = f"($|[^{_PG_TOKEN_CLASS}]|[.:]($|[^{_PG_TOKEN_CLASS}]))"
_PG_SPACE = "[[:space:]]+"


def _is_token_character(character: str) -> bool:
    return character.isalnum() or character == "_" or character in _TOKEN_PUNCTUATION


def _whole_pattern(terms: Sequence[str]) -> str:
    # The literal first and the boundary before it as a look-behind over it, so that `re` scans for the literal (ten
    # times faster on a long text than trying the look-behind at every position).
    first = terms[0]
    pattern = re.escape(first)
    if _is_token_character(first[0]):
        pattern += f"(?<!{_TOKEN}.{{{len(first)}}})"
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


@dataclass(frozen=True, slots=True)
class Grading:
    """The patterns that grade results for one query's terms (see the module's docstring)."""

    terms: tuple[str, ...]
    whole_as_written: re.Pattern[str]
    whole_folded: re.Pattern[str]
    # The terms one after the other anywhere (folded), for a query of several terms.
    together_folded: re.Pattern[str] | None

    @classmethod
    def of(cls, terms: Sequence[str]) -> "Grading":
        """
        :param terms: The query's terms, as the model wrote them (each non-empty).
        :returns: The grading of results for them.
        """
        folded = [term.lower() for term in terms]
        together = re.compile(r"\s+".join(re.escape(term) for term in folded)) if len(terms) > 1 else None
        return cls(
            terms=tuple(terms),
            whole_as_written=re.compile(_whole_pattern(terms), re.DOTALL),
            whole_folded=re.compile(_whole_pattern(folded), re.DOTALL),
            together_folded=together,
        )

    def grade(self, text: str, lowered: str) -> int:
        """
        :param text: A result's text that holds at least one term.
        :param lowered: `text.lower()`, as the search compares.
        :returns: `EXACT_CASE`, `EXACT`, `INSIDE` or `SCATTERED`.
        """
        if self.whole_as_written.search(text):
            return EXACT_CASE
        return self.folded_grade(lowered)

    def folded_grade(self, lowered: str) -> int:
        """:returns: The grade of a text known only folded: `EXACT` at best (the case cannot be told)."""
        if self.whole_folded.search(lowered):
            return EXACT
        if self.together_folded is None or self.together_folded.search(lowered):
            return INSIDE  # one term: every hit holds it
        return SCATTERED

    def refined(self, grade: int, text: str) -> int:
        """:returns: `grade` (from `folded_grade` or PostgreSQL) with the case told apart on the text as written."""
        if grade == EXACT and self.whole_as_written.search(text):
            return EXACT_CASE
        return grade

    def postgres_patterns(self, fold: Callable[[str], str]) -> tuple[str, str | None]:
        """
        :param fold: How the engine folds a text and a term (`casstore.postgres_search.folded`).
        :returns: PostgreSQL regular expressions over a folded text: the terms whole (`EXACT`), and the terms one
            after the other anywhere (`INSIDE`; None for a single term, which every hit holds).
        """
        folded = [_postgres_escaped(fold(term)) for term in self.terms]
        joined = _PG_SPACE.join(folded)
        before = _PG_BEFORE if _is_token_character(self.terms[0][0]) else ""
        after = _PG_AFTER if _is_token_character(self.terms[-1][-1]) else ""
        return before + joined + after, (joined if len(self.terms) > 1 else None)
