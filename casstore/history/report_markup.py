"""
The markup every section of `casstore report`'s page is made of: a section (a chart beside its table, or a message
when there is nothing to draw), a table whose every cell is escaped, and how numbers and times are written.
"""

from collections.abc import Sequence
from datetime import datetime, timedelta

from casstore.history.charts import escape

_TIMESTAMP_TEMPLATE = "0000-01-01 00:00:00.000"


def section(name: str, title: str, intro: str, chart: str, table: str) -> str:
    """:returns: A section of the page: its title and intro (markup), its chart beside its table."""
    return (
        f'<section id="{name}"><h2>{escape(title)}</h2><p class="intro">{intro}</p>'
        f'<div class="pair"><figure>{chart}</figure><div class="table-box">{table}</div></div></section>'
    )


def empty_section(name: str, title: str, message: str) -> str:
    """:returns: A section with nothing to draw: its title and why (markup)."""
    return f'<section id="{name}"><h2>{escape(title)}</h2><p class="empty">{message}</p></section>'


def tabulate(
    heading: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    numeric_from: int,
    numeric_to: int | None = None,
    total: bool = False,
    code: set[int] | None = None,
) -> str:
    """A table of text cells, every one escaped; columns from `numeric_from` (to `numeric_to`) right-aligned."""
    end = len(heading) if numeric_to is None else numeric_to
    code = code or set()

    def cell(tag: str, index: int, text: str) -> str:
        classes = ' class="num"' if numeric_from <= index < end else ""
        content = f"<code>{escape(text)}</code>" if index in code and text else escape(text)
        return f"<{tag}{classes}>{content}</{tag}>"

    head = "".join(cell("th", index, text) for index, text in enumerate(heading))
    body = []
    for number, row in enumerate(rows):
        row_class = ' class="total"' if total and number == len(rows) - 1 else ""
        body.append(f"<tr{row_class}>" + "".join(cell("td", index, text) for index, text in enumerate(row)) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def moment(stamp: str) -> datetime:
    """:returns: A timestamp or a bucket (a prefix of one) as the moment it starts."""
    return datetime.fromisoformat(stamp + _TIMESTAMP_TEMPLATE[len(stamp) :])


def period(since: timedelta) -> str:
    """:returns: A period as the command line spells it (`7d`, `12h`, `30m`, or seconds)."""
    seconds = int(since.total_seconds())
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{since.total_seconds():g}s"


def amount(value: float | None) -> str:
    """:returns: A figure for a table or a card: whole numbers with thousands separators, a dash for none."""
    if value is None:
        return "\u2013"
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.1f}"
