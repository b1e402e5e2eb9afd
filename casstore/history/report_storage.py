"""
The sections of `casstore report` about what was stored: bytes over time against Haystack's
`FileSystemToolResultStore` (`bytes_section`), the most repeated and the largest results with previews
(`results_section`), and the namespaces' activity (`namespaces_section`). Each is a chart beside a table of the same
numbers.
"""

from collections.abc import Callable, Sequence

from casstore.history import charts
from casstore.history.charts import Bar, Series, escape, format_bytes
from casstore.history.report_markup import amount, empty_section, moment, section, tabulate
from casstore.repository import ReportFigures, ResultRow


def bytes_section(figures: ReportFigures) -> str:
    """:returns: Bytes written over time: logical, unique, stored, and a file system store's estimate."""
    title = "Bytes over time"
    if not figures.bytes_over_time:
        return empty_section("bytes", title, "No tool results were written here.")
    points = figures.bytes_over_time
    moments = [moment(point.bucket) for point in points]
    series = [
        Series("logical", list(zip(moments, [p.logical_bytes for p in points], strict=True))),
        Series("unique", list(zip(moments, [p.unique_bytes for p in points], strict=True))),
        Series("stored", list(zip(moments, [p.stored_bytes for p in points], strict=True))),
        Series(
            "FileSystemToolResultStore (estimate)",
            list(zip(moments, [p.file_system_bytes for p in points], strict=True)),
        ),
    ]
    rows = [
        [
            point.bucket,
            amount(point.writes),
            amount(point.logical_bytes),
            amount(point.unique_bytes),
            amount(point.stored_bytes),
            amount(point.file_system_bytes),
        ]
        for point in points
    ]
    chart = charts.line_chart(series, title="Bytes written, cumulative", value_label="bytes (cumulative)")
    heading = [
        f"{figures.bytes_bucket} (UTC)",
        "writes",
        "logical bytes",
        "unique bytes",
        "stored bytes",
        "FileSystemToolResultStore bytes",
    ]
    intro = (
        f"Cumulative from the start of the period, one point per {escape(figures.bytes_bucket or '')}: every "
        "byte written (logical), each distinct result once (unique: it counts from its first write here), as "
        "stored after compression, and what Haystack's <code>FileSystemToolResultStore</code> would take for "
        "the same writes (one file each, in whole 4 KiB blocks as <code>du</code> counts them)."
    )
    return section("bytes", title, intro, chart, tabulate(heading, rows, numeric_from=1))


def results_section(
    name: str,
    title: str,
    results: Sequence[ResultRow],
    *,
    value: Callable[[ResultRow], int],
    value_label: str,
    empty: str,
    previews: dict[str, str],
) -> str:
    """
    :param name: `repeated` or `largest`: which ranking (its section's id and intro).
    :param value: What a result's bar shows.
    :param previews: A preview of each result's content, by digest.
    :returns: A ranking of distinct results.
    """
    if not results:
        return empty_section(name, title, empty)
    bars = [
        Bar(
            label=row.example_key,
            value=value(row),
            tooltip=(
                f"{row.example_key}: written {row.times_written} times, {row.size:,} bytes, "
                f"{row.bytes_saved:,} bytes saved"
            ),
            kind="result",
        )
        for row in results
    ]
    rows = [
        [
            row.example_key,
            amount(row.times_written),
            amount(row.size),
            amount(row.stored_size),
            amount(row.bytes_saved),
            previews.get(row.digest, ""),
        ]
        for row in results
    ]
    chart = charts.bar_chart(bars, title=title, value_label=value_label, fmt=format_bytes)
    heading = ["example key", "times written", "bytes", "stored bytes", "bytes saved", "preview"]
    intro = (
        "The same output stored once however often it came back: how often, and the bytes that storing it once "
        "saved (bytes \u00d7 (times \u2212 1))."
        if name == "repeated"
        else "The largest distinct results, with how often each was written."
    )
    table = tabulate(heading, rows, numeric_from=1, numeric_to=5, code={0, 5})
    return section(name, title, intro, chart, table)


def namespaces_section(figures: ReportFigures, *, limit: int) -> str:
    """:returns: The namespaces' activity, the busiest `limit` of them in the table."""
    title = "Namespaces"
    if not figures.namespaces:
        return empty_section("namespaces", title, "No namespace has any history here.")
    shown = figures.namespaces[:limit]
    bars = [
        Bar(
            label=row.namespace,
            value=row.writes,
            tooltip=f"{row.namespace}: {row.writes} writes, {row.offloads} offloads, {row.compactions} compactions",
            kind="namespace",
        )
        for row in shown[:30]
    ]
    rows = [
        [
            row.namespace,
            amount(row.writes),
            amount(row.logical_bytes),
            amount(row.offloads),
            amount(row.compactions),
            amount(row.saved_tokens),
            row.first_activity,
            row.last_activity,
        ]
        for row in shown
    ]
    more = figures.namespaces_total - len(shown)
    heading = [
        "namespace",
        "writes",
        "logical bytes",
        "offloads",
        "compactions",
        "tokens saved",
        "first activity (UTC)",
        "last activity (UTC)",
    ]
    intro = (
        f"{figures.namespaces_total:,} namespaces, most writes first"
        + (f"; the chart shows the first {len(bars)}" if len(bars) < len(shown) else "")
        + (f"; the table the first {len(shown)} (<code>casstore stats</code> lists all)" if more > 0 else "")
        + "."
    )
    chart = charts.bar_chart(bars, title="Writes per namespace", value_label="writes")
    return section("namespaces", title, intro, chart, tabulate(heading, rows, numeric_from=1, numeric_to=6, code={0}))
