"""
The search tool's answer to the model: the hits best first, each distinct result once, with its reference, tool and
time when known, size, and its first matching lines with their numbers and a line of context (`render_answer`);
never longer than the tool's `max_chars`, and saying how many more results there were and why a search found
nothing.
"""

import re
from bisect import bisect_left, bisect_right

from casstore.compactor.binary_content import quoted
from casstore.compactor.text_window import line_count as count_lines
from casstore.repository import SearchHit, SearchOutcome

# Per hit: the matching lines listed at most, lines of context around each, and characters shown of one line.
_LINES_PER_HIT = 3

_CONTEXT = 1

_LINE_CHARS = 200


def render_answer(
    outcome: SearchOutcome, *, terms: list[str], notes: list[str], tool: str | None, max_chars: int, read_tool_name: str
) -> str:
    """
    :param terms: The terms searched.
    :param notes: What the query left out, said after the hits.
    :param tool: The tool whose results were searched, or None.
    :param read_tool_name: The read tool's registered name, which the answer tells the model to call.
    :returns: The answer, within `max_chars` (the hits that fit, best first, the rest counted).
    """
    searched = " ".join(f'"{term}"' if " " in term else term for term in terms)
    scope = f" among the results of {tool}" if tool else ""
    lines_notes = [f"Note: {note}." for note in notes]
    if outcome.pending:
        lines_notes.append(
            f"Note: {outcome.pending} result(s) written lately are not indexed yet and could not be searched; search "
            f"again in a moment."
        )
    if outcome.timed_out and not outcome.hits:
        return "\n".join(
            [
                f"The search for {_shown(searched)}{scope} took too long and was stopped; search for fewer or longer "
                f"terms.",
                *lines_notes,
            ]
        )
    if not outcome.hits:
        more = f" ({outcome.unreadable} could not be read)" if outcome.unreadable else ""
        return "\n".join([f"No offloaded result holds {_shown(searched)}{scope}{more}.", *lines_notes])
    blocks = [_block(position, hit) for position, hit in enumerate(outcome.hits, start=1)]
    shown: list[str] = []
    header = f"Results holding {_shown(searched)}{scope}, best first:"
    for block in blocks:
        footer = _footer(outcome, read_tool_name=read_tool_name, left_out=len(blocks) - len(shown) - 1)
        if len(header) + sum(len(b) + 2 for b in shown) + len(block) + 2 + len(footer) + 1 > max_chars - 200:
            break
        shown.append(block)
    if not shown:  # even the best hit's block is too long: its first lines, cut
        footer = _footer(outcome, read_tool_name=read_tool_name, left_out=len(blocks) - 1)
        room = max(100, max_chars - len(header) - len(footer) - 250)
        shown.append(blocks[0][:room] + " [cut]")
    footer = _footer(outcome, read_tool_name=read_tool_name, left_out=len(blocks) - len(shown))
    return "\n\n".join([header, *shown, "\n".join([footer, *lines_notes])])


def _footer(outcome: SearchOutcome, *, read_tool_name: str, left_out: int) -> str:
    more = outcome.more_hits + left_out
    parts = []
    if more:
        parts.append(f"{more} more result{'s' if more != 1 else ''} hold a term")
    if outcome.unread:
        parts.append(f"up to {outcome.unread} more may (not read: the search stops after the best-placed ones)")
    if outcome.timed_out:
        parts.append("the search stopped at its time limit")
    if outcome.unreadable:
        parts.append(f"{outcome.unreadable} result(s) could not be read (missing or damaged)")
    tail = f"Read one with {read_tool_name}(reference, offset=LINE)."
    if not parts:
        return f"That is every result that holds a term. {tail}"
    return f"{'; '.join(parts).capitalize()}: narrow the query or pass tool_name to see others. {tail}"


def _block(position: int, hit: SearchHit) -> str:
    text = hit.text
    lowered = _Lowered(text)
    # Counted as the read tool counts them (a final newline starts no line): every number shown is an offset it takes.
    line_count = count_lines(text)
    about = [
        f"tool {hit.tool_name}" if hit.tool_name else None,
        f"written {hit.written_at} UTC" if hit.written_at else None,
        f"{hit.size:,} bytes, {line_count:,} line{'s' if line_count != 1 else ''}",
        "holds " + ", ".join(_shown(term, 60) for term in hit.terms),
    ]
    out = [f"{position}. {quoted(hit.reference)} ({'; '.join(part for part in about if part)})"]
    # The first matching lines, found by searching the whole text (fast on a long one), not line by line.
    folded = [term.lower() for term in hit.terms]
    starts, more = _first_matching_lines(text, lowered, folded)
    if not starts:
        out.append("   (the match spans lines)")
        return "\n".join(out)
    last_shown = -1
    shown_end = 0  # where the text after the last line shown starts
    for number, start in starts:
        first = max(number - _CONTEXT, last_shown + 1)
        if last_shown >= 0 and first > last_shown + 1:
            out.append("   ...")
        for index in range(first, number + _CONTEXT + 1):
            if index >= line_count:
                break
            begin = _line_start(text, start, index - number)
            if begin < 0:
                continue
            end = text.find("\n", begin)
            end = len(text) if end < 0 else end
            # A line of context may hold a term too (only the first matching lines are looked for): it is marked so.
            marker = ":" if index == number or any(lowered.holds(term, begin, end) for term in folded) else "-"
            out.append(f"   {index + 1}{marker} {_excerpt(text[begin:end], folded)}".rstrip(" "))
            last_shown, shown_end = index, end + 1
    if more:  # counted again after the context shown, whose matches are marked already
        more = sum(lowered.count(term, shown_end) for term in folded)
    if more:
        out.append(f"   (and {more} more match(es) after line {last_shown + 1})")
    return "\n".join(out)


class _Lowered:
    """
    A text lower-cased as the search compares it (`str.lower`, which makes `İ` two characters, `i̇`), searched with
    positions in the text as written: a term is found in it exactly where the search found it, and its line is the
    line of the text.
    """

    __slots__ = ("_dots", "_expanded", "lowered")

    def __init__(self, text: str) -> None:
        self.lowered = text.lower()
        # `İ` is the one character whose lower case is longer (two characters): where each is in the text, and
        # where its second lower-case character (the combining dot) is in the lowered text.
        self._expanded = [] if len(self.lowered) == len(text) else [m.start() for m in re.finditer("İ", text)]
        self._dots = [position + number + 1 for number, position in enumerate(self._expanded)]

    def _lowered_at(self, position: int) -> int:
        return position + bisect_left(self._expanded, position)

    def _written_at(self, position: int) -> int:
        return position - bisect_right(self._dots, position)

    def find(self, term: str, start: int) -> int:
        """:returns: Where in the text the first match of `term` (lower-cased) from `start` is, or -1."""
        found = self.lowered.find(term, self._lowered_at(start))
        return found if found < 0 else self._written_at(found)

    def count(self, term: str, start: int) -> int:
        """:returns: How many matches of `term` (lower-cased) begin from `start` of the text."""
        return self.lowered.count(term, self._lowered_at(start))

    def holds(self, term: str, begin: int, end: int) -> bool:
        """:returns: Whether the text from `begin` to `end` holds `term` (lower-cased)."""
        return term in self.lowered[self._lowered_at(begin) : self._lowered_at(end)]


def _first_matching_lines(text: str, lowered: _Lowered, folded: list[str]) -> tuple[list[tuple[int, int]], int]:
    """:returns: `(line number from 0, start of line)` of the first matching lines, and how many matches follow."""
    found: list[tuple[int, int]] = []
    position = 0
    number = 0
    counted = 0
    while len(found) < _LINES_PER_HIT:
        hits = [index for index in (lowered.find(term, position) for term in folded) if index >= 0]
        if not hits:
            return found, 0
        at = min(hits)
        start = text.rfind("\n", 0, at) + 1
        number += text.count("\n", counted, start)
        counted = start
        found.append((number, start))
        end = text.find("\n", at)
        if end < 0:
            return found, 0
        position = end + 1
    more = sum(lowered.count(term, position) for term in folded)
    return found, more


def _line_start(text: str, start: int, offset: int) -> int:
    """:returns: Where the line `offset` lines from the one starting at `start` starts (-1 before the first)."""
    for _ in range(offset):
        end = text.find("\n", start)
        if end < 0:
            return -1
        start = end + 1
    for _ in range(-offset):
        if start == 0:
            return -1
        start = text.rfind("\n", 0, start - 1) + 1
    return start


def _excerpt(line: str, folded: list[str]) -> str:
    """A line, or the part of a long one around its first match, within `_LINE_CHARS`."""
    if len(line) <= _LINE_CHARS:
        return line
    lowered = _Lowered(line)
    found = [at for at in (lowered.find(term, 0) for term in folded) if at >= 0]
    start = max(0, min(found) - _LINE_CHARS // 4) if found else 0
    piece = line[start : start + _LINE_CHARS]
    return f"{'…' if start else ''}{piece}{'…' if start + _LINE_CHARS < len(line) else ''}"


def _shown(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit] + "…"
