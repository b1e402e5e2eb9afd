"""
Windows over a long text, in lines, that never exceed a character cap.

A line ends after each `\\n` (only `\\n` splits lines), and lines are numbered from 1. A window starts at line `offset`,
skipping its first `char_offset` characters, and holds whole lines up to `limit` lines or the cap, whichever comes
first. A line too long for the cap on its own is returned in parts, by characters.

A framed answer is exactly `header + "\\n" + body + "\\n" + footer`: the header and the footer are one line each, and
the body is an exact slice of the text. The footer names the arguments that fetch the next window, so concatenating
the bodies of the windows the footers lead to gives back the text exactly.
"""

from dataclasses import dataclass

# `header + "\n" + body + "\n" + footer`
_FRAME_SEPARATORS = 2


@dataclass(frozen=True, slots=True)
class Position:
    """A place in a text: line `line` (from 1), after skipping `char` characters of it."""

    line: int
    char: int = 0


class PositionError(ValueError):
    """`offset` or `char_offset` points past the end of the text; the message says what the valid range is."""


def line_count(text: str) -> int:
    """
    Count the lines of a text: a final `\\n` ends the last line rather than starting an empty one.

    :param text: The text.
    :returns: The number of lines; 0 for the empty text.
    """
    if not text:
        return 0
    return text.count("\n") + (0 if text.endswith("\n") else 1)


def locate(text: str, position: Position) -> int:
    """
    Turn a position into an index into `text`.

    :param text: The text.
    :param position: Where to start.
    :returns: The index of the first character at `position`.
    :raises PositionError: If the line or the character is past the end of the text.
    """
    total = line_count(text)
    if position.line > max(total, 1):
        raise PositionError(
            f"offset={position.line} is past the end: the result has {total} lines, so use an offset from 1 to "
            f"{max(total, 1)}."
        )
    # Splitting at most `line - 1` times leaves the text from the start of line `line` on as the last piece.
    start = len(text) - len(text.split("\n", position.line - 1)[-1]) if position.line > 1 else 0
    newline = text.find("\n", start)
    length = (len(text) if newline < 0 else newline) - start
    # A window may start at the `\n` that ends a line, so a part of a long line never has to end just before it.
    if position.char and position.char >= length + (newline >= 0):
        raise PositionError(
            f"char_offset={position.char} is past the end of line {position.line}, which has {length} characters; "
            f"use a char_offset from 0 to {max(length - 1, 0)}."
        )
    return start + position.char


def read_window(text: str, *, start: Position, limit: int | None, max_chars: int, tool_name: str) -> str:
    """
    Return one framed window of `text`.

    :param text: The whole text.
    :param start: Where the window starts.
    :param limit: The most lines to return, or None for as many as fit.
    :param max_chars: The cap on the whole answer, frame included.
    :param tool_name: The read tool's name, for the footer's instructions.
    :returns: `header + "\\n" + body + "\\n" + footer`, at most `max_chars` characters.
    :raises PositionError: If `start` is past the end of the text.
    """
    total = line_count(text)
    begin = locate(text, start)
    if not text:
        return _EMPTY
    budget = max_chars - _frame_reserve(text, tool_name)
    if budget < 1:
        raise ValueError(f"`max_chars` of {max_chars} leaves no room for text in the answer; raise it.")
    end, lines = begin, 0
    while end < len(text) and (limit is None or lines < limit):
        newline = text.find("\n", end, begin + budget)
        line_end = newline + 1 if newline >= 0 else min(len(text), begin + budget + 1)
        if line_end - begin > budget:
            break
        end, lines = line_end, lines + 1
    if lines == 0 and begin < len(text):
        # Not even the rest of one line fits: return as much of it as does.
        end = begin + budget
        header = _part_header(start, start.char + budget, total, _line_length(text, begin - start.char))
        footer = _more_footer(Position(start.line, start.char + budget), tool_name, total)
    else:
        last = start.line + max(lines, 1) - 1
        header = _lines_header(start, last, total)
        footer = _more_footer(Position(start.line + lines), tool_name, total) if end < len(text) else _END
    return f"{header}\n{text[begin:end]}\n{footer}"


def _line_length(text: str, line_start: int) -> int:
    end = text.find("\n", line_start)
    return (len(text) if end < 0 else end) - line_start


def _lines_header(start: Position, last: int, total: int) -> str:
    within = f", from character {start.char + 1} of line {start.line} on" if start.char else ""
    return f"[Lines {start.line}-{last} of {total}{within}.]"


def _part_header(start: Position, stop: int, total: int, length: int) -> str:
    return (
        f"[Line {start.line} of {total}, characters {start.char + 1}-{stop} of {length}: the line is too long to "
        f"return at once.]"
    )


def _more_footer(following: Position, tool_name: str, total: int) -> str:
    if following.char:
        return (
            f"[Not finished: call {tool_name} again with the same reference and offset={following.line}, "
            f"char_offset={following.char} for the rest of line {following.line}.]"
        )
    return (
        f"[Not finished: call {tool_name} again with the same reference and offset={following.line} for the next "
        f"lines ({total - following.line + 1} of {total} left).]"
    )


_END = "[End of the result.]"
_EMPTY = "[The result is empty: it has no lines.]"


def _frame_reserve(text: str, tool_name: str) -> int:
    """The longest header plus the longest footer a window of `text` can have, with the separators."""
    # No number in a frame exceeds the text's length (+ 1), so all nines of that many digits bound every number.
    big = int("9" * len(str(len(text) + 2)))
    headers = [
        _lines_header(Position(big, big), big, big),
        _part_header(Position(big, big), big, big, big),
    ]
    footers = [_more_footer(Position(big, big), tool_name, big), _more_footer(Position(big), tool_name, big), _END]
    return max(map(len, headers)) + max(map(len, footers)) + _FRAME_SEPARATORS
