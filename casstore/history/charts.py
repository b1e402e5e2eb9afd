"""
SVG charts drawn by casstore itself, for `casstore report`: a timeline of ranges, vertical and horizontal bars, and
lines over time, each with a title, labelled axes and units.

Why its own and not a charting library: the report must be one file that opens with no network and runs nothing, so
the charts must be plain SVG in the page (no JavaScript library, no fonts or styles fetched), and four kinds of chart
are a few hundred lines; a library shipped inside the package would be more code to vet than that, and most of them
draw with JavaScript in the browser. Drawing here also keeps every text that came from a tool under one escaping
rule: everything that is not a number passes through `escape` before it is part of the markup.

The functions take plain numbers, times and labels (of casstore they use only `printable`), and return SVG markup
as a string. Each drawn datum is an element of class `mark` (with `data-kind`), holding a `<title>` a browser shows on
hover.
"""

import html
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from casstore.printable import visible

WIDTH = 720
_LEFT, _RIGHT, _TOP, _BOTTOM = 86, 20, 46, 56
BEFORE_COLOUR = "#d95f02"
AFTER_COLOUR = "#1b9e77"
TARGET_COLOUR = "#7570b3"
WINDOW_COLOUR = "#c51b7d"
BAR_COLOUR = "#4c78a8"
SERIES_COLOURS = ("#4c78a8", "#f58518", "#54a24b", "#b279a2", "#e45756")
_AXIS = "#555"
_GRID = "#ddd"
# Labels longer than this are cut in the picture (with an ellipsis); the whole text is in the mark's `<title>`.
LABEL_CHARS = 28


def escape(text: object) -> str:
    """
    :returns: `text` safe as element content and as a quoted attribute value, in HTML and in SVG: its control and bidi
        characters shown as escapes (`casstore.printable.visible`: `\\x1b`, `\\u202e`, which no parser chokes on,
        drops or turns around), then its markup characters as references.
    """
    return html.escape(visible(str(text)), quote=True)


def number(value: float) -> str:
    """:returns: `value` exactly as a data attribute holds it: a whole number without a point, else two decimals."""
    return str(int(value)) if float(value).is_integer() else f"{value:.2f}"


def short(text: str, limit: int = LABEL_CHARS) -> str:
    """:returns: `text`, cut to `limit` characters with an ellipsis if longer (escape it afterwards)."""
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


@dataclass(frozen=True, slots=True)
class Range:
    """One mark of a timeline: a value before and after, at a time, against a target (and a limit, if known)."""

    at: datetime
    before: float
    after: float
    target: float
    window: float | None
    tooltip: str
    kind: str = "compaction"
    low: float | None = None
    high: float | None = None


@dataclass(frozen=True, slots=True)
class Bar:
    """One bar: its label, its value and what a hover shows."""

    label: str
    value: float
    tooltip: str
    kind: str = "bar"


@dataclass(frozen=True, slots=True)
class Series:
    """One line over time: a name (for the legend) and its points."""

    name: str
    points: Sequence[tuple[datetime, float]]


def nice_ticks(high: float, count: int = 5) -> list[float]:
    """:returns: Round tick values from 0 to at least `high` (about `count` of them)."""
    if high <= 0:
        return [0.0, 1.0]
    raw = high / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    return [step * i for i in range(math.ceil(high / step - 1e-9) + 1)]


def format_count(value: float) -> str:
    """:returns: A count as people read it: `950`, `12.5k`, `3.2M`."""
    size = abs(value)
    if size >= 1e9:
        return f"{value / 1e9:.1f}G"
    if size >= 1e6:
        return f"{value / 1e6:.1f}M"
    if size >= 1e4:
        return f"{value / 1e3:.0f}k"
    if size >= 1e3:
        return f"{value / 1e3:.1f}k"
    return f"{value:.0f}"


def format_bytes(value: float) -> str:
    """:returns: Bytes in binary units: `512 B`, `1.5 KiB`, `3.0 MiB`."""
    size = float(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(size) < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def _time_label(span: timedelta) -> Callable[[datetime], str]:
    if span <= timedelta(seconds=20):
        return lambda moment: moment.strftime("%H:%M:%S.%f")[:-4]
    if span <= timedelta(days=1):
        return lambda moment: moment.strftime("%H:%M:%S")
    if span <= timedelta(days=60):
        return lambda moment: moment.strftime("%m-%d %H:%M")
    return lambda moment: moment.strftime("%Y-%m-%d")


class _Frame:
    """A chart's canvas: its size, plot area, title and axes, and the marks drawn into it."""

    def __init__(self, *, title: str, height: int, width: int = WIDTH) -> None:
        self.width, self.height = width, height
        self.left, self.right = _LEFT, width - _RIGHT
        self.top, self.bottom = _TOP, height - _BOTTOM
        self.title = title
        self.parts: list[str] = []

    def add(self, markup: str) -> None:
        self.parts.append(markup)

    def svg(self, *, kind: str) -> str:
        title = escape(self.title)
        return (
            f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" data-chart="{escape(kind)}" role="img" '
            f'width="{self.width}" height="{self.height}" viewBox="0 0 {self.width} {self.height}" '
            f'font-family="system-ui, sans-serif" font-size="12">'
            f"<title>{title}</title>"
            f'<text x="{self.width / 2:.0f}" y="18" text-anchor="middle" font-size="15" font-weight="600">'
            f"{title}</text>" + "".join(self.parts) + "</svg>"
        )

    def y_axis(
        self, ticks: list[float], scale: Callable[[float], float], fmt: Callable[[float], str], label: str
    ) -> None:
        for tick in ticks:
            y = scale(tick)
            self.add(
                f'<line x1="{self.left}" x2="{self.right}" y1="{y:.1f}" y2="{y:.1f}" stroke="{_GRID}"/>'
                f'<text x="{self.left - 6}" y="{y + 4:.1f}" text-anchor="end" fill="{_AXIS}">{escape(fmt(tick))}</text>'
            )
        middle = (self.top + self.bottom) / 2
        self.add(
            f'<line x1="{self.left}" x2="{self.left}" y1="{self.top}" y2="{self.bottom}" stroke="{_AXIS}"/>'
            f'<text class="axis-label" transform="translate(14 {middle:.0f}) rotate(-90)" text-anchor="middle" '
            f'fill="{_AXIS}">{escape(label)}</text>'
        )

    def x_axis(self, ticks: list[tuple[float, str]], label: str) -> None:
        self.add(f'<line x1="{self.left}" x2="{self.right}" y1="{self.bottom}" y2="{self.bottom}" stroke="{_AXIS}"/>')
        for x, text in ticks:
            self.add(
                f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{self.bottom}" y2="{self.bottom + 4}" stroke="{_AXIS}"/>'
                f'<text x="{x:.1f}" y="{self.bottom + 17}" text-anchor="middle" fill="{_AXIS}">{escape(text)}</text>'
            )
        self.add(
            f'<text class="axis-label" x="{(self.left + self.right) / 2:.0f}" y="{self.height - 10}" '
            f'text-anchor="middle" fill="{_AXIS}">{escape(label)}</text>'
        )

    def legend(self, entries: Sequence[tuple[str, str, str]]) -> None:
        """Entries of `(label, colour, shape)`: shape `dot`, `ring`, `line` or `dash`."""
        x = self.left + 4.0
        y = self.top - 8
        for label, colour, shape in entries:
            if shape == "dot":
                swatch = f'<circle cx="{x + 5}" cy="{y - 4}" r="4" fill="{colour}"/>'
            elif shape == "ring":
                swatch = f'<circle cx="{x + 5}" cy="{y - 4}" r="4" fill="#fff" stroke="{colour}" stroke-width="2"/>'
            else:
                dash = ' stroke-dasharray="4 3"' if shape == "dash" else ""
                swatch = (
                    f'<line x1="{x}" x2="{x + 12}" y1="{y - 4}" y2="{y - 4}" stroke="{colour}" stroke-width="2"{dash}/>'
                )
            self.add(f'<g class="legend">{swatch}<text x="{x + 16}" y="{y}">{escape(label)}</text></g>')
            x += 24 + 6.5 * len(label)


def _time_scale(
    moments: Sequence[datetime], left: float, right: float
) -> tuple[Callable[[datetime], float], datetime, datetime]:
    first, last = min(moments), max(moments)
    if last - first < timedelta(milliseconds=100):
        first, last = first - timedelta(milliseconds=50), last + timedelta(milliseconds=50)
    pad = (last - first) * 0.03
    first, last = first - pad, last + pad
    span = (last - first).total_seconds()

    def scale(moment: datetime) -> float:
        return left + (moment - first).total_seconds() / span * (right - left)

    return scale, first, last


def _time_ticks(
    scale: Callable[[datetime], float], first: datetime, last: datetime, count: int = 5
) -> list[tuple[float, str]]:
    label = _time_label(last - first)
    step = (last - first) / count
    moments = [first + step * (i + 0.5) for i in range(count)]
    return [(scale(moment), label(moment)) for moment in moments]


def _value_scale(high: float, top: float, bottom: float) -> tuple[Callable[[float], float], list[float]]:
    ticks = nice_ticks(high)
    top_value = ticks[-1] or 1.0

    def scale(value: float) -> float:
        return bottom - value / top_value * (bottom - top)

    return scale, ticks


def timeline_chart(ranges: Sequence[Range], *, title: str, value_label: str) -> str:
    """
    :param ranges: One mark each, drawn at its time from `before` (a ring) to `after` (a dot), with a tick at its
        target; windows that are all the same are one dashed line, else a tick per mark.
    :returns: The chart.
    """
    frame = _Frame(title=title, height=340)
    windows = {mark.window for mark in ranges if mark.window is not None}
    high = max([*(mark.high or mark.before for mark in ranges), *windows, 1.0])
    y, ticks = _value_scale(high * 1.04, frame.top, frame.bottom)
    x, first, last = _time_scale([mark.at for mark in ranges], frame.left, frame.right)
    frame.y_axis(ticks, y, format_count, value_label)
    frame.x_axis(_time_ticks(x, first, last), "time (UTC)")
    shared_window = next(iter(windows)) if len(windows) == 1 else None
    if shared_window is not None:
        frame.add(
            f'<line class="window-line" x1="{frame.left}" x2="{frame.right}" y1="{y(shared_window):.1f}" '
            f'y2="{y(shared_window):.1f}" stroke="{WINDOW_COLOUR}" stroke-width="1.5" stroke-dasharray="6 4">'
            f"<title>context window: {format_count(shared_window)} tokens</title></line>"
        )
    tick = 5 if len(ranges) < 100 else 3
    for mark in ranges:
        at = x(mark.at)
        parts = [f"<title>{escape(mark.tooltip)}</title>"]
        if mark.high is not None and mark.low is not None:
            parts.append(
                f'<line x1="{at:.1f}" x2="{at:.1f}" y1="{y(mark.high):.1f}" y2="{y(mark.low):.1f}" stroke="#999"/>'
            )
        parts.append(
            f'<line x1="{at:.1f}" x2="{at:.1f}" y1="{y(mark.before):.1f}" y2="{y(mark.after):.1f}" '
            f'stroke="{_AXIS}" stroke-width="1.5"/>'
            f'<line x1="{at - tick:.1f}" x2="{at + tick:.1f}" y1="{y(mark.target):.1f}" y2="{y(mark.target):.1f}" '
            f'stroke="{TARGET_COLOUR}" stroke-width="2"/>'
        )
        if mark.window is not None and shared_window is None:
            parts.append(
                f'<line x1="{at - tick:.1f}" x2="{at + tick:.1f}" y1="{y(mark.window):.1f}" y2="{y(mark.window):.1f}" '
                f'stroke="{WINDOW_COLOUR}" stroke-width="2"/>'
            )
        radius = 3.5 if len(ranges) < 100 else 2
        parts.append(
            f'<circle cx="{at:.1f}" cy="{y(mark.before):.1f}" r="{radius}" fill="#fff" stroke="{BEFORE_COLOUR}" '
            f'stroke-width="1.5"/>'
            f'<circle cx="{at:.1f}" cy="{y(mark.after):.1f}" r="{radius}" fill="{AFTER_COLOUR}"/>'
        )
        frame.add(
            f'<g class="mark" data-kind="{escape(mark.kind)}" data-before="{number(mark.before)}" '
            f'data-after="{number(mark.after)}" '
            f'data-target="{number(mark.target)}">{"".join(parts)}</g>'
        )
    legend = [("before", BEFORE_COLOUR, "ring"), ("after", AFTER_COLOUR, "dot"), ("target", TARGET_COLOUR, "line")]
    if windows:
        legend.append(("context window", WINDOW_COLOUR, "dash" if shared_window is not None else "line"))
    frame.legend(legend)
    return frame.svg(kind="timeline")


def column_chart(
    bars: Sequence[Bar],
    *,
    title: str,
    value_label: str,
    category_label: str,
    fmt: Callable[[float], str] = format_count,
) -> str:
    """:returns: Vertical bars, one per entry, in the order given; at most about ten category labels are written."""
    frame = _Frame(title=title, height=320)
    y, ticks = _value_scale(max([bar.value for bar in bars] + [1.0]), frame.top, frame.bottom)
    frame.y_axis(ticks, y, fmt, value_label)
    band = (frame.right - frame.left) / max(len(bars), 1)
    every = max(1, math.ceil(len(bars) / 10))
    labels = [(frame.left + band * (i + 0.5), short(bar.label, 12)) for i, bar in enumerate(bars) if i % every == 0]
    frame.x_axis(labels, category_label)
    width = max(band * 0.8, 1.0)
    for i, bar in enumerate(bars):
        top = y(max(bar.value, 0))
        frame.add(
            f'<rect class="mark" data-kind="{escape(bar.kind)}" data-value="{number(bar.value)}" '
            f'x="{frame.left + band * i + (band - width) / 2:.2f}" '
            f'y="{top:.1f}" width="{width:.2f}" height="{frame.bottom - top:.1f}" fill="{BAR_COLOUR}">'
            f"<title>{escape(bar.tooltip)}</title></rect>"
        )
    return frame.svg(kind="columns")


def bar_chart(bars: Sequence[Bar], *, title: str, value_label: str, fmt: Callable[[float], str] = format_count) -> str:
    """:returns: Horizontal bars, one per entry, top to bottom in the order given, each labelled and valued."""
    row = 22
    height = _TOP + row * max(len(bars), 1) + _BOTTOM
    frame = _Frame(title=title, height=height)
    frame.left = 210
    high = max([bar.value for bar in bars] + [1.0])
    ticks = nice_ticks(high, count=4)
    span = ticks[-1] or 1.0

    def x(value: float) -> float:
        return frame.left + value / span * (frame.right - 60 - frame.left)

    for tick in ticks:
        frame.add(
            f'<line x1="{x(tick):.1f}" x2="{x(tick):.1f}" y1="{frame.top}" y2="{frame.bottom}" stroke="{_GRID}"/>'
        )
    frame.x_axis([(x(tick), fmt(tick)) for tick in ticks], value_label)
    for i, bar in enumerate(bars):
        top = frame.top + row * i + 3
        frame.add(
            f'<g class="mark" data-kind="{escape(bar.kind)}" data-value="{number(bar.value)}">'
            f"<title>{escape(bar.tooltip)}</title>"
            f'<text x="{frame.left - 8}" y="{top + 13}" text-anchor="end" font-size="11">'
            f"{escape(short(bar.label))}</text>"
            f'<rect x="{frame.left}" y="{top}" width="{max(x(bar.value) - frame.left, 1):.1f}" height="{row - 6}" '
            f'fill="{BAR_COLOUR}"/>'
            f'<text x="{x(bar.value) + 4:.1f}" y="{top + 13}" fill="{_AXIS}">{escape(fmt(bar.value))}</text></g>'
        )
    frame.add(f'<line x1="{frame.left}" x2="{frame.left}" y1="{frame.top}" y2="{frame.bottom}" stroke="{_AXIS}"/>')
    return frame.svg(kind="bars")


def line_chart(
    series: Sequence[Series], *, title: str, value_label: str, fmt: Callable[[float], str] = format_bytes
) -> str:
    """:returns: One line per series over time (points marked while there are few), with a legend."""
    frame = _Frame(title=title, height=340)
    moments = [moment for line in series for moment, _ in line.points]
    high = max([value for line in series for _, value in line.points] + [1.0])
    y, ticks = _value_scale(high * 1.02, frame.top, frame.bottom)
    x, first, last = _time_scale(moments, frame.left, frame.right)
    frame.y_axis(ticks, y, fmt, value_label)
    frame.x_axis(_time_ticks(x, first, last), "time (UTC)")
    legend = []
    for position, line in enumerate(series):
        colour = SERIES_COLOURS[position % len(SERIES_COLOURS)]
        dash = ' stroke-dasharray="6 4"' if position == len(series) - 1 and len(series) > 3 else ""
        path = " ".join(
            f"{'M' if i == 0 else 'L'}{x(moment):.1f},{y(value):.1f}" for i, (moment, value) in enumerate(line.points)
        )
        dots = ""
        if len(line.points) <= 60:
            dots = "".join(
                f'<circle cx="{x(moment):.1f}" cy="{y(value):.1f}" r="2.5" fill="{colour}"/>'
                for moment, value in line.points
            )
        last_value = line.points[-1][1] if line.points else 0
        frame.add(
            f'<g class="mark" data-kind="series" data-series="{escape(line.name)}" data-value="{number(last_value)}">'
            f"<title>{escape(line.name)}: {escape(fmt(last_value))} at the end</title>"
            f'<path d="{path}" fill="none" stroke="{colour}" stroke-width="2"{dash}/>{dots}</g>'
        )
        legend.append((line.name, colour, "dash" if dash else "line"))
    frame.legend(legend)
    return frame.svg(kind="lines")
