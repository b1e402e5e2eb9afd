"""
The lines of a long text that match a regular expression, found in linear time and listed within a character cap.

Patterns run on RE2, which has no backtracking: matching takes time linear in the text whatever the pattern, so a
pattern from a prompt injection cannot stall the agent. Capture groups are off (they are what makes RE2 slow on long
matches), a pattern is matched within one line (`\\n` never matches; `^` and `$` match at line boundaries), and the
search stops at a deadline, saying where to go on from.

Linear is not cheap: one RE2 call costs up to the text's length times the size of the compiled program, when its DFA
gives up and it simulates the program. So the text is searched in chunks of whole lines sized from the program's size,
each costing a bounded amount of work, and the deadline is checked between chunks; a line longer than a chunk is
searched in overlapping pieces, and the answer says that a long match across two pieces may be missed. Patterns whose
program is too large are refused with a message saying what to simplify; their size is checked with little memory
for RE2, so that a huge program fails to compile quickly (`compactor.patterns`).
"""

import time
from dataclasses import dataclass
from typing import Any

from casstore.compactor.patterns import program_size, shown
from casstore.compactor.text_window import Position, line_count, locate

# The most matches one answer looks for, whatever `limit` says: more would not fit in the answer anyway.
MAX_MATCHES = 500
# Bytes times program instructions one RE2 call may search: some 40 ms at the slowest rate measured, about 20 ns per
# byte and instruction when the DFA gives up (calls measured at 50 ms at most, on a 2-core machine). The deadline,
# checked between calls, is overrun by about that much.
_WORK_PER_CALL = 2_000_000
# The bounds on how many bytes one RE2 call searches, whatever the program's size.
_MIN_CHUNK_BYTES = 512
_MAX_CHUNK_BYTES = 4 * 1024 * 1024
_ENCODING = "utf-8"
_ERRORS = "surrogatepass"
_NEWLINE = ord("\n")


def _chunk_bytes(regex: Any) -> int:
    """How many bytes one RE2 call searches, so that its cost stays about `_WORK_PER_CALL` whatever the pattern."""
    return max(_MIN_CHUNK_BYTES, min(_MAX_CHUNK_BYTES, _WORK_PER_CALL // max(program_size(regex), 1)))


@dataclass(frozen=True, slots=True)
class _Hit:
    """A match: its line (number, start and end index in the text) and where in the line it starts and ends."""

    line: int
    line_start: int
    line_end: int
    start: int
    end: int
    # Where the next search starts if this hit is not listed: its line, or the match itself within a long line.
    resume: Position


@dataclass(frozen=True, slots=True)
class _Found:
    hits: list[_Hit]
    # Where the listing goes on from (after the last hit or where the deadline struck), or None when it is complete.
    resume: Position | None
    timed_out: bool
    # Whether a line longer than a chunk was searched in overlapping pieces, so a long match across two may be missed.
    split: bool


class _Cursor:
    """Walks forward through the UTF-8 bytes of a text, keeping track of the line and the index in the text."""

    def __init__(self, data: bytes, *, byte: int, char: int, line: int, line_start: int) -> None:
        self.data, self.byte, self.char, self.line, self.line_start = data, byte, char, line, line_start

    def advance(self, byte: int) -> None:
        chunk = self.data[self.byte : byte]
        newlines = chunk.count(b"\n")
        if newlines:
            last = chunk.rfind(b"\n") + 1
            self.line += newlines
            self.line_start = self.char + len(chunk[:last].decode(_ENCODING, _ERRORS))
            self.char = self.line_start + len(chunk[last:].decode(_ENCODING, _ERRORS))
        else:
            self.char += len(chunk.decode(_ENCODING, _ERRORS))
        self.byte = byte

    @property
    def position(self) -> Position:
        return Position(self.line, self.char - self.line_start)


def search(
    text: str,
    *,
    regex: Any,
    pattern: str,
    start: Position,
    limit: int,
    context: int,
    max_chars: int,
    deadline_seconds: float,
    tool_name: str,
) -> str:
    """
    List the lines of `text` that match, from `start` on, with line numbers and context, within `max_chars`.

    :param text: The whole text.
    :param regex: The compiled pattern (`compile_pattern`).
    :param pattern: The pattern as the model wrote it, for the answer's header.
    :param start: Where the search starts.
    :param limit: The most matches to list.
    :param context: Lines of context to show before and after each matching line.
    :param max_chars: The cap on the whole answer.
    :param deadline_seconds: How long to search before answering with what was found.
    :param tool_name: The read tool's name, for the footer's instructions.
    :returns: The answer for the model.
    :raises PositionError: If `start` is past the end of the text.
    """
    total = line_count(text)
    begin = locate(text, start)
    where = f"from line {start.line}" + (f", character {start.char + 1}," if start.char else "")
    header = (
        f"[Lines matching {shown(pattern)} {where} on, of {total}. 'N: text' is a matching line, 'N- text' a line "
        f"of context, 'N@C: ...text...' a match at character offset C of line N, which is too long to show whole.]"
    )
    big = int("9" * len(str(len(text) + 2)))
    footers = [
        _footer(Position(big, big), tool_name, timed_out=flag, seconds=deadline_seconds) for flag in (True, False)
    ]
    chunk = _chunk_bytes(regex)
    note = _split_note(chunk)
    budget = max_chars - len(header) - max(map(len, footers)) - len(note) - 3
    if budget < 100:
        raise ValueError(f"`max_chars` of {max_chars} leaves no room for matches in the answer; raise it.")
    width = min(300, budget // 4)
    found = _find(
        text,
        regex,
        start=begin,
        line=start.line,
        limit=min(limit, MAX_MATCHES),
        width=width,
        seconds=deadline_seconds,
        chunk=chunk,
    )
    notes = f"\n{note}" if found.split else ""
    if not found.hits and found.resume is None:
        return f"[No line matches {shown(pattern)} {where} on; the result has {total} lines.]{notes}"
    body, listed = _render(text, found.hits, context=context, width=width, budget=budget, total=total)
    resume = found.hits[listed].resume if listed < len(found.hits) else found.resume
    timed_out = found.timed_out and listed == len(found.hits)
    footer = _footer(resume, tool_name, timed_out=timed_out, seconds=deadline_seconds)
    return f"{header}\n{body}{notes}\n{footer}"


def _find(
    text: str, regex: Any, *, start: int, line: int, limit: int, width: int, seconds: float, chunk: int
) -> _Found:
    """
    Find up to `limit` matches from index `start` on: the first of each line of at most `width` characters, which is
    shown whole, and every one in a longer line, which is shown around each match.

    Each RE2 call searches at most `chunk` bytes (`_chunk_end`), so the deadline is checked often enough.
    """
    deadline = time.monotonic() + seconds
    data = text.encode(_ENCODING, _ERRORS)
    line_start = text.rfind("\n", 0, start) + 1
    start_byte = len(text[:start].encode(_ENCODING, _ERRORS))
    cursor = _Cursor(data, byte=start_byte, char=start, line=line, line_start=line_start)
    position = start_byte
    hits: list[_Hit] = []
    searched = False  # at least one search runs, so every call makes progress
    split = False
    while position < len(data):
        if searched and time.monotonic() > deadline:
            cursor.advance(position)
            return _Found(hits, cursor.position, timed_out=True, split=split)
        chunk_end, following = _chunk_end(data, position, chunk)
        split = split or (chunk_end < len(data) and data[chunk_end] != _NEWLINE)
        match = regex.search(data, position, chunk_end)
        searched = True
        if match is None:
            if chunk_end >= len(data):
                return _Found(hits, None, timed_out=False, split=split)
            position = following
            continue
        match_start, match_end = match.span()
        cursor.advance(position)
        searched_from = cursor.char
        cursor.advance(match_start)
        begin = cursor.char
        if hits and hits[-1].line == cursor.line:
            line_end = hits[-1].line_end  # another match in the same long line
        else:
            newline = text.find("\n", begin)
            line_end = len(text) if newline < 0 else newline
        end = begin + len(data[match_start:match_end].decode(_ENCODING, _ERRORS))
        short = line_end - cursor.line_start <= width
        # A match in a short line is listed with its whole line, so going on from the line's start finds it again.
        from_line_start = short and searched_from <= cursor.line_start
        resume = Position(cursor.line, 0 if from_line_start else begin - cursor.line_start)
        hit = _Hit(cursor.line, cursor.line_start, line_end, begin, end, resume)
        if len(hits) == limit:
            return _Found(hits, hit.resume, timed_out=False, split=split)
        hits.append(hit)
        if short:
            next_line = data.find(b"\n", match_end)
            if next_line < 0:
                return _Found(hits, None, timed_out=False, split=split)
            position = next_line + 1
        else:
            # Matches inside the text shown around this one are visible there, so the search goes on after it.
            shown_end = _snippet(hit, width)[1]
            position = max(match_end, match_start + len(text[begin:shown_end].encode(_ENCODING, _ERRORS)))
            if position == match_start:
                position = _next_character(data, match_start)
    return _Found(hits, None, timed_out=False, split=split)


def _chunk_end(data: bytes, position: int, chunk: int) -> tuple[int, int]:
    """
    Where the chunk searched from `position` ends, and where the next one starts.

    :returns: The end of the last whole line within `chunk` bytes and the start of the next line; or, in a line longer
        than `chunk`, the end of a piece of it and a start a quarter of a chunk before that end, so that a match shorter
        than the overlap is found whole in one of the pieces. RE2 sees the text around a piece, so `^`, `$` and `\\b`
        do not match at its ends.
    """
    if position + chunk >= len(data):
        return len(data), len(data)
    newline = data.rfind(b"\n", position, position + chunk)
    if newline >= 0:
        return newline, newline + 1
    end = max(_character_start(data, position + chunk), _next_character(data, position))
    return end, max(_character_start(data, end - chunk // 4), _next_character(data, position))


def _render(text: str, hits: list[_Hit], *, context: int, width: int, budget: int, total: int) -> tuple[str, int]:
    """
    Lay out the hits grep-style, as many as fit in `budget` characters.

    :returns: The listing, and how many of the hits it shows.
    """
    blocks: list[str] = []
    used, last = 0, 0  # characters so far; the last line shown
    for index, hit in enumerate(hits):
        following = hits[index + 1].line if index + 1 < len(hits) else None
        rows, shown_until = _block(text, hit, context=context, width=width, last=last, following=following, total=total)
        if used + len(rows) + 1 > budget and blocks:
            return "\n".join(blocks), index
        if used + len(rows) + 1 > budget:
            # The first match does not fit with its context: show it alone.
            rows, shown_until = _block(text, hit, context=0, width=width, last=last, following=following, total=total)
        blocks.append(rows)
        used += len(rows) + 1
        last = shown_until
    return "\n".join(blocks), len(hits)


def _block(
    text: str, hit: _Hit, *, context: int, width: int, last: int, following: int | None, total: int
) -> tuple[str, int]:
    """One hit's rows: context before it (unless shown already), the match, and context after it."""
    rows: list[str] = []
    if hit.line > last:
        first = max(hit.line - context, last + 1, 1)
        if context and last and first > last + 1:
            rows.append("--")
        start = hit.line_start
        before: list[str] = []
        for number in range(hit.line - 1, first - 1, -1):
            end = start - 1
            start = text.rfind("\n", 0, end) + 1
            before.append(_row(number, "-", text[start : min(end, start + width + 1)], end - start, width))
        rows.extend(reversed(before))
    if hit.line_end - hit.line_start <= width:
        rows.append(f"{hit.line}: {text[hit.line_start : hit.line_end]}")
    else:
        begin, end = _snippet(hit, width)
        opening = "..." if begin > hit.line_start else ""
        closing = "..." if end < hit.line_end else ""
        rows.append(f"{hit.line}@{hit.start - hit.line_start}: {opening}{text[begin:end]}{closing}")
    shown_until = hit.line
    if following != hit.line:
        stop = min(hit.line + context, total, following - 1 if following is not None else total)
        start = hit.line_end + 1
        for number in range(hit.line + 1, stop + 1):
            newline = text.find("\n", start)
            end = len(text) if newline < 0 else newline
            rows.append(_row(number, "-", text[start : min(end, start + width + 1)], end - start, width))
            start = end + 1
        shown_until = max(shown_until, stop)
    return "\n".join(rows), shown_until


def _snippet(hit: _Hit, width: int) -> tuple[int, int]:
    """The part of a long line shown for a match in it: `width` characters, starting a little before the match."""
    begin = max(hit.line_start, min(hit.start - width // 3, hit.line_end - width))
    return begin, min(hit.line_end, begin + width)


def _row(number: int, mark: str, line: str, length: int, width: int) -> str:
    """A numbered line of context, cut to `width` characters."""
    if length <= width:
        return f"{number}{mark} {line}"
    return f"{number}{mark} {line[:width]}... [{length - width} more characters]"


def _footer(resume: Position | None, tool_name: str, *, timed_out: bool, seconds: float) -> str:
    if resume is None:
        return "[No more matches.]"
    arguments = f"offset={resume.line}" + (f", char_offset={resume.char}" if resume.char else "")
    if timed_out:
        return (
            f"[The search stopped after {seconds:g} seconds at line {resume.line}: call {tool_name} again with the "
            f"same reference and pattern and {arguments} to search on.]"
        )
    return f"[More matches follow: call {tool_name} again with the same reference and pattern and {arguments}.]"


def _split_note(chunk: int) -> str:
    """What the answer says when a line was searched in pieces."""
    return (
        f"[Lines longer than {chunk:,} bytes are searched in overlapping pieces: a match longer than {chunk // 4:,} "
        f"bytes that crosses from one piece to the next may be missed.]"
    )


def _character_start(data: bytes, index: int) -> int:
    """The index of the first byte of the UTF-8 character that the byte at `index` belongs to."""
    while index > 0 and 0x80 <= data[index] < 0xC0:
        index -= 1
    return index


def _next_character(data: bytes, index: int) -> int:
    """The index of the UTF-8 character after the one at `index`."""
    index += 1
    while index < len(data) and 0x80 <= data[index] < 0xC0:
        index += 1
    return index
