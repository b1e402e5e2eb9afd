"""
`casstore report`: the offload history as one self-contained HTML page of SVG charts, each beside a table of the
same numbers.

A client of the repository (`Repository.report_figures`, `Repository.blob_content` for previews), so it reports a
local store and a shared one alike. The page fetches nothing and runs nothing: no scripts, styles, fonts or images
from anywhere (its Content-Security-Policy forbids them too), and every text that came from a tool, a key, a
namespace or a content preview is escaped (`casstore.history.charts.escape`) before it is part of the markup.
"""

import contextlib
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from casstore.errors import CasStoreError
from casstore.history import charts
from casstore.history.charts import Bar, Range, Series, escape, format_bytes
from casstore.repository import ArchiveRow, HasRepository, ReportFigures, Repository, ResultRow, repository_of

__all__ = ["DEFAULT_REPORT_NAME", "SERIES_LIMIT", "ReportFile", "build_report", "write_report"]

DEFAULT_REPORT_NAME = "casstore-report.html"
# Marks per chart before time buckets take over (one per compaction up to this many).
SERIES_LIMIT = 500
# Rows of each ranking: repeated results, largest results, namespaces.
RANKING_ROWS = 20
NAMESPACE_ROWS = 200
# Previews are read through the store (verified) for results up to this size, and cut to this many characters.
PREVIEW_MAX_BYTES = 1 << 20
PREVIEW_CHARS = 160
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_TIMESTAMP_TEMPLATE = "0000-01-01 00:00:00.000"
_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"


@dataclass(frozen=True, slots=True)
class ReportFile:
    """A report written to disk: where, its size, and the figures it shows."""

    path: Path
    size: int
    figures: ReportFigures


def build_report(
    source: Repository | HasRepository, *, namespace: str | None = None, since: timedelta | None = None
) -> tuple[str, ReportFigures]:
    """
    :param source: The store, or its repository.
    :param namespace: Only this namespace's history (all namespaces when None).
    :param since: Only the history of this period before now (all history when None).
    :returns: The page, and the figures it shows.
    """
    repository = repository_of(source)
    figures = repository.report_figures(
        namespace=namespace,
        since=since,
        series_limit=SERIES_LIMIT,
        rows_limit=RANKING_ROWS,
        namespace_limit=NAMESPACE_ROWS,
    )
    previews = _previews(repository, figures)
    page = _Page(figures=figures, where=repository.description, previews=previews)
    return page.render(), figures


def write_report(
    source: Repository | HasRepository,
    *,
    path: Path,
    namespace: str | None = None,
    since: timedelta | None = None,
) -> ReportFile:
    """
    Write the report to `path`, whole or not at all (a temporary file beside it, then a rename).

    :param source: The store, or its repository.
    :param path: The HTML file to write; an existing file is replaced.
    :param namespace: Only this namespace's history (all namespaces when None).
    :param since: Only the history of this period before now (all history when None).
    :returns: Where the report is, its size, and the figures it shows.
    :raises CasStoreError: If `path` cannot be written (its folder is missing, or it is a folder); nothing is left.
    """
    page, figures = build_report(source, namespace=namespace, since=since)
    data = page.encode("utf-8")
    temporary = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        temporary.write_bytes(data)
        os.replace(temporary, path)
    except OSError as error:
        with contextlib.suppress(OSError):  # there may be no temporary file, nor a folder for one
            temporary.unlink()
        raise CasStoreError(
            f"Could not write the report to {path}: {error.strerror or error}. Choose another -o FILE."
        ) from error
    return ReportFile(path=path, size=len(data), figures=figures)


def _previews(repository: Repository, figures: ReportFigures) -> dict[str, str]:
    previews: dict[str, str] = {}
    for row in [*figures.repeated[:RANKING_ROWS], *figures.largest[:RANKING_ROWS]]:
        if row.digest in previews:
            continue
        if row.kind != "text":
            previews[row.digest] = f"(binary, {format_bytes(row.size)})"
        elif row.size > PREVIEW_MAX_BYTES:
            previews[row.digest] = f"(not read: larger than {format_bytes(PREVIEW_MAX_BYTES)})"
        else:
            try:
                text = repository.blob_content(row.digest).decode("utf-8", errors="replace")
            except CasStoreError as error:
                previews[row.digest] = f"(could not be read: {error})"
            else:
                text = text[: PREVIEW_CHARS * 4]  # enough for the preview, however large the result
                text = _CONTROL.sub(" ", text.replace("\r\n", "\n")).replace("\n", " \u23ce ")
                previews[row.digest] = charts.short(text, PREVIEW_CHARS)
    return previews


def _moment(stamp: str) -> datetime:
    """A timestamp or a bucket (a prefix of one) as the moment it starts."""
    return datetime.fromisoformat(stamp + _TIMESTAMP_TEMPLATE[len(stamp) :])


def _period(since: timedelta) -> str:
    seconds = int(since.total_seconds())
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{since.total_seconds():g}s"


def _n(value: float | None) -> str:
    if value is None:
        return "\u2013"
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.1f}"


class _Page:
    def __init__(self, *, figures: ReportFigures, where: str, previews: dict[str, str]) -> None:
        self.figures = figures
        self.where = where
        self.previews = previews

    # The page.

    def render(self) -> str:
        figures = self.figures
        sections = [
            self._timeline(),
            self._savings(),
            self._tools(),
            self._hook(),
            self._archives(),
            self._bytes(),
            self._results(
                "repeated",
                "Results that came back most often",
                figures.repeated[:RANKING_ROWS],
                value=lambda row: row.bytes_saved,
                value_label="bytes saved by storing it once",
                empty="No result was written more than once here.",
            ),
            self._results(
                "largest",
                "Largest results",
                figures.largest[:RANKING_ROWS],
                value=lambda row: row.size,
                value_label="size of the result (bytes)",
                empty="No results were written here.",
            ),
            self._namespaces(),
        ]
        title = "casstore report" + (f": {figures.scope.namespace}" if figures.scope.namespace is not None else "")
        return (
            "<!DOCTYPE html>\n"
            '<html lang="en"><head><meta charset="utf-8">'
            f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            '<meta name="referrer" content="no-referrer">'
            f"<title>{escape(title)}</title><style>{_STYLE}</style></head><body>"
            f"<header><h1>{escape(title)}</h1>{self._scope()}</header>"
            f"<main>{self._summary()}{''.join(sections)}</main>"
            "<footer>Written by <code>casstore report</code>. Every chart is drawn from the table beside it; the "
            "page loads nothing and runs no script.</footer>"
            "</body></html>\n"
        )

    def _scope(self) -> str:
        scope = self.figures.scope
        namespaces = (
            "all namespaces" if scope.namespace is None else f"namespace <code>{escape(scope.namespace)}</code>"
        )
        period = "all history" if scope.since is None else f"the last {escape(_period(scope.since))}"
        return (
            f'<p class="scope">Store <code>{escape(self.where)}</code> \u00b7 {namespaces} \u00b7 {period} \u00b7 '
            f"written {escape(self.figures.now[:19])} UTC</p>"
        )

    def _summary(self) -> str:
        figures = self.figures
        if figures.empty:
            return f'<section id="nothing" class="nothing"><h2>Nothing to show</h2><p>{self._nothing()}</p></section>'
        last = figures.bytes_over_time[-1] if figures.bytes_over_time else None
        offloads = sum(tool.offloads for tool in figures.tools)
        saved = sum(tool.saved_tokens for tool in figures.tools)
        cards = [
            ("writes", _n(last.writes if last else 0)),
            ("logical bytes", format_bytes(last.logical_bytes if last else 0)),
            ("unique bytes", format_bytes(last.unique_bytes if last else 0)),
            ("stored bytes", format_bytes(last.stored_bytes if last else 0)),
            ("FileSystemToolResultStore", format_bytes(last.file_system_bytes if last else 0)),
            ("compactions", _n(figures.compactions)),
            ("results offloaded", _n(offloads)),
            ("tokens saved", _n(saved)),
            ("offloaded by the hook", _n(sum(tool.results for tool in figures.hook_tools))),
        ]
        items = "".join(f"<div><dt>{escape(label)}</dt><dd>{escape(value)}</dd></div>" for label, value in cards)
        return f'<section id="summary"><dl class="cards">{items}</dl></section>'

    def _nothing(self) -> str:
        scope = self.figures.scope
        if scope.namespace is not None and scope.namespace not in self.figures.known_namespaces:
            known = ", ".join(f"<code>{escape(name)}</code>" for name in self.figures.known_namespaces)
            return f"This store has no history in namespace <code>{escape(scope.namespace)}</code>. " + (
                f"Its namespaces: {known}." if known else "It holds nothing yet."
            )
        if scope.since is not None:
            return (
                f"Nothing was written, offloaded or compacted in the last {escape(_period(scope.since))}. Run "
                "<code>casstore report</code> without <code>--since</code> for all history."
            )
        return (
            "This store is empty: nothing has been written yet. Point an agent at it (a "
            "<code>ContentAddressedToolResultStore</code> with <code>DedupOffloadCompactor</code>), or run "
            "<code>casstore demo</code>, then report again."
        )

    @staticmethod
    def _section(name: str, title: str, intro: str, chart: str, table: str) -> str:
        return (
            f'<section id="{name}"><h2>{escape(title)}</h2><p class="intro">{intro}</p>'
            f'<div class="pair"><figure>{chart}</figure><div class="table-box">{table}</div></div></section>'
        )

    @staticmethod
    def _empty(name: str, title: str, message: str) -> str:
        return f'<section id="{name}"><h2>{escape(title)}</h2><p class="empty">{message}</p></section>'

    # The sections.

    def _timeline(self) -> str:
        figures = self.figures
        title = "Compactions: the conversation before and after"
        if not figures.timeline:
            return self._empty(
                "timeline",
                title,
                "No compactions recorded here. <code>DedupOffloadCompactor</code> records each <code>compact</code> "
                "call that finds the conversation over its target (stores written before casstore recorded "
                "compactions have only their offloads, below).",
            )
        bucket = figures.compaction_bucket
        ranges = []
        rows = []
        for mark in figures.timeline:
            at = _moment(mark.first)
            if bucket is None:
                tooltip = (
                    f"{mark.first} UTC, namespace {mark.namespace}: {mark.tokens_before:,.0f} -> "
                    f"{mark.tokens_after:,.0f} tokens (target {mark.target_tokens:,.0f}"
                    + (f", window {mark.context_window:,.0f})" if mark.context_window is not None else ")")
                )
                rows.append(
                    [
                        mark.first,
                        mark.namespace,
                        _n(mark.tokens_before),
                        _n(mark.tokens_after),
                        _n(mark.tokens_before - mark.tokens_after),
                        _n(mark.target_tokens),
                        _n(mark.context_window),
                    ]
                )
            else:
                tooltip = (
                    f"{mark.first} to {mark.last} UTC: {mark.count} compactions, mean {mark.tokens_before:,.0f} -> "
                    f"{mark.tokens_after:,.0f} tokens (most before {mark.max_tokens_before:,}, least after "
                    f"{mark.min_tokens_after:,}; mean target {mark.target_tokens:,.0f})"
                )
                rows.append(
                    [
                        mark.first,
                        mark.last,
                        _n(mark.count),
                        _n(round(mark.tokens_before, 1)),
                        _n(mark.max_tokens_before),
                        _n(round(mark.tokens_after, 1)),
                        _n(mark.min_tokens_after),
                        _n(round(mark.target_tokens, 1)),
                        _n(None if mark.context_window is None else round(mark.context_window, 1)),
                    ]
                )
            ranges.append(
                Range(
                    at=at,
                    before=mark.tokens_before,
                    after=mark.tokens_after,
                    target=mark.target_tokens,
                    window=mark.context_window,
                    tooltip=tooltip,
                    kind="compaction" if bucket is None else "bucket",
                    high=None if bucket is None else mark.max_tokens_before,
                    low=None if bucket is None else mark.min_tokens_after,
                )
            )
        if bucket is None:
            heading = ["time (UTC)", "namespace", "tokens before", "tokens after", "saved", "target", "window"]
            intro = (
                f"Each of the {figures.compactions:,} compactions is one mark: the conversation's size in tokens when "
                "the compaction began (ring) and when it ended (dot), and the target it was asked to reach (tick); "
                "the model's context window is drawn where the compactor was told it. A mark whose ring and dot "
                "meet found nothing it could offload."
            )
        else:
            heading = [
                "from (UTC)",
                "to (UTC)",
                "compactions",
                "mean before",
                "most before",
                "mean after",
                "least after",
                "mean target",
                "mean window",
            ]
            intro = (
                f"{figures.compactions:,} compactions, more than {SERIES_LIMIT} marks can show apart: one mark per "
                f"{escape(bucket)}, from the largest conversation before to the smallest after (grey), with the "
                "mean before (ring) and after (dot) and the mean target (tick)."
            )
        chart = charts.timeline_chart(ranges, title="Conversation size at each compaction", value_label="tokens")
        return self._section("timeline", title, intro, chart, _table(heading, rows, numeric_from=2))

    def _savings(self) -> str:
        figures = self.figures
        title = "Tokens saved per compaction"
        if not figures.savings:
            return self._empty("savings", title, "No tool results were offloaded here.")
        bucket = figures.saving_bucket
        total = sum(mark.saved_tokens for mark in figures.savings)
        bars = []
        rows = []
        for number, mark in enumerate(figures.savings, start=1):
            if bucket is None:
                label = f"#{number}"
                tooltip = (
                    f"compaction {number} at {mark.first} UTC (namespace {mark.namespace}): {mark.results} results "
                    f"offloaded, {mark.saved_tokens:,} of {mark.original_tokens:,} tokens saved"
                )
                rows.append(
                    [
                        str(number),
                        mark.first,
                        mark.namespace,
                        _n(mark.results),
                        _n(mark.original_tokens),
                        _n(mark.saved_tokens),
                    ]
                )
            else:
                label = mark.first[:16]
                tooltip = (
                    f"{mark.first} to {mark.last} UTC: {mark.compactions} compactions, {mark.results} results, "
                    f"{mark.saved_tokens:,} tokens saved"
                )
                rows.append(
                    [
                        mark.first,
                        mark.last,
                        _n(mark.compactions),
                        _n(mark.results),
                        _n(mark.original_tokens),
                        _n(mark.saved_tokens),
                    ]
                )
            bars.append(Bar(label=label, value=mark.saved_tokens, tooltip=tooltip, kind="saving"))
        if bucket is None:
            heading = ["#", "time (UTC)", "namespace", "results offloaded", "tokens before", "tokens saved"]
            rows.append(
                [
                    "total",
                    "",
                    "",
                    _n(sum(m.results for m in figures.savings)),
                    _n(sum(m.original_tokens for m in figures.savings)),
                    _n(total),
                ]
            )
            category = "compaction, in time order"
            numeric_from = 3
        else:
            heading = ["from (UTC)", "to (UTC)", "compactions", "results offloaded", "tokens before", "tokens saved"]
            rows.append(
                [
                    "total",
                    "",
                    _n(sum(m.compactions for m in figures.savings)),
                    _n(sum(m.results for m in figures.savings)),
                    _n(sum(m.original_tokens for m in figures.savings)),
                    _n(total),
                ]
            )
            category = f"time (UTC), one bar per {bucket}"
            numeric_from = 2
        intro = (
            f"{total:,} tokens saved in all: what each compaction's offloads took out of the conversation (the tokens "
            "of each tool result, less those of the reference that replaced it)."
        )
        chart = charts.column_chart(
            bars, title="Tokens saved per compaction", value_label="tokens saved", category_label=category
        )
        return self._section(
            "savings", title, intro, chart, _table(heading, rows, numeric_from=numeric_from, total=True)
        )

    def _tools(self) -> str:
        figures = self.figures
        title = "Tokens saved by tool"
        if not figures.tools:
            return self._empty("tools", title, "No tool results were offloaded here.")
        bars = [
            Bar(
                label=tool.tool_name,
                value=tool.saved_tokens,
                tooltip=f"{tool.tool_name}: {tool.offloads} results offloaded, {tool.saved_tokens:,} tokens saved",
                kind="tool",
            )
            for tool in figures.tools
        ]
        rows = [
            [tool.tool_name, _n(tool.offloads), _n(tool.compactions), _n(tool.original_tokens), _n(tool.saved_tokens)]
            for tool in figures.tools
        ]
        rows.append(
            [
                "total",
                _n(sum(tool.offloads for tool in figures.tools)),
                "",
                _n(sum(tool.original_tokens for tool in figures.tools)),
                _n(sum(tool.saved_tokens for tool in figures.tools)),
            ]
        )
        chart = charts.bar_chart(bars, title="Tokens saved by tool", value_label="tokens saved")
        table = _table(
            ["tool", "results offloaded", "compactions", "tokens before", "tokens saved"],
            rows,
            numeric_from=1,
            total=True,
        )
        intro = "Which tools filled the context: the tokens their offloaded results took, and what offloading saved."
        return self._section("tools", title, intro, chart, table)

    def _hook(self) -> str:
        title = "Results the offload hook offloaded"
        tools = self.figures.hook_tools
        if not tools:
            return self._empty("hook", title, "Haystack's <code>ToolResultOffloadHook</code> offloaded nothing here.")
        unnamed = "(tool not told apart from its call id)"
        bars = [
            Bar(label=tool.tool_name or unnamed, value=tool.results, tooltip=f"{tool.results} results", kind="tool")
            for tool in tools
        ]
        rows = [
            [tool.tool_name or unnamed, _n(tool.results), _n(tool.parts), tool.first_offload, tool.last_offload]
            for tool in tools
        ]
        rows.append(["total", _n(sum(tool.results for tool in tools)), _n(sum(tool.parts for tool in tools)), "", ""])
        intro = (
            "What Haystack's <code>ToolResultOffloadHook</code> offloaded as each result arrived, per tool, from the "
            "keys it wrote (<code>writes</code>). The hook measures no tokens: its offloads count above, not here."
        )
        chart = charts.bar_chart(bars, title=title, value_label="results offloaded")
        heading = ["tool", "results offloaded", "parts written", "first (UTC)", "last (UTC)"]
        return self._section(
            "hook", title, intro, chart, _table(heading, rows, numeric_from=1, numeric_to=3, total=True)
        )

    def _archives(self) -> str:
        title = "Steps archived"
        figures = self.figures
        if not figures.archives:
            return self._empty("archives", title, "<code>StepArchiveCompactor</code> archived no steps here.")

        def steps(row: ArchiveRow) -> str:
            if row.first_step is None:
                return f"{row.messages} messages"
            return (
                f"steps {row.first_step}-{row.last_step}"
                if row.first_step != row.last_step
                else f"step {row.first_step}"
            )

        oldest_first = list(reversed(figures.archives))
        bars = [
            Bar(
                label=steps(row),
                value=row.saved_tokens,
                tooltip=f"{row.archived_at} UTC ({row.namespace}): {steps(row)}, {row.messages} messages, "
                f"{row.saved_tokens:,} tokens out of the conversation",
                kind="archive",
            )
            for row in oldest_first
        ]
        rows = [
            [
                row.archived_at,
                row.namespace,
                steps(row),
                _n(row.messages),
                _n(row.original_tokens),
                _n(row.saved_tokens),
                row.reference,
            ]
            for row in figures.archives
        ]
        shown = (
            f"the newest {len(figures.archives):,} of {figures.archives_total:,}"
            if figures.archives_total > len(figures.archives)
            else f"all {figures.archives_total:,}"
        )
        intro = (
            f"What <code>StepArchiveCompactor</code> took out of the conversation and wrote to the store as one "
            f"transcript each ({shown}, from <code>archives</code>): the model reads a transcript back by its "
            "reference, which the note left in the conversation names."
        )
        chart = charts.bar_chart(bars, title="Tokens each archive took out", value_label="tokens")
        heading = ["archived (UTC)", "namespace", "steps", "messages", "tokens", "tokens saved", "transcript"]
        return self._section(
            "archives", title, intro, chart, _table(heading, rows, numeric_from=3, numeric_to=6, code={6})
        )

    def _bytes(self) -> str:
        figures = self.figures
        title = "Bytes over time"
        if not figures.bytes_over_time:
            return self._empty("bytes", title, "No tool results were written here.")
        points = figures.bytes_over_time
        moments = [_moment(point.bucket) for point in points]
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
                _n(point.writes),
                _n(point.logical_bytes),
                _n(point.unique_bytes),
                _n(point.stored_bytes),
                _n(point.file_system_bytes),
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
        return self._section("bytes", title, intro, chart, _table(heading, rows, numeric_from=1))

    def _results(
        self,
        name: str,
        title: str,
        results: Sequence[ResultRow],
        *,
        value: Callable[[ResultRow], int],
        value_label: str,
        empty: str,
    ) -> str:
        if not results:
            return self._empty(name, title, empty)
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
                _n(row.times_written),
                _n(row.size),
                _n(row.stored_size),
                _n(row.bytes_saved),
                self.previews.get(row.digest, ""),
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
        table = _table(heading, rows, numeric_from=1, numeric_to=5, code={0, 5})
        return self._section(name, title, intro, chart, table)

    def _namespaces(self) -> str:
        figures = self.figures
        title = "Namespaces"
        if not figures.namespaces:
            return self._empty("namespaces", title, "No namespace has any history here.")
        shown = figures.namespaces[:NAMESPACE_ROWS]
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
                _n(row.writes),
                _n(row.logical_bytes),
                _n(row.offloads),
                _n(row.compactions),
                _n(row.saved_tokens),
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
        return self._section(
            "namespaces", title, intro, chart, _table(heading, rows, numeric_from=1, numeric_to=6, code={0})
        )


def _table(
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


_STYLE = """
:root { color-scheme: light; }
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0 auto; padding: 16px 24px;
       max-width: 1560px; color: #222; background: #fff; }
h1 { font-size: 22px; margin: 4px 0; } h2 { font-size: 18px; margin: 28px 0 6px; border-top: 1px solid #ddd;
padding-top: 14px; }
.scope, .intro, footer { color: #555; font-size: 13px; max-width: 1100px; }
code { font-family: ui-monospace, "SFMono-Regular", Menlo, monospace; font-size: 12px; overflow-wrap: anywhere; }
.cards { display: flex; flex-wrap: wrap; gap: 10px; margin: 12px 0; }
.cards div { border: 1px solid #ddd; border-radius: 6px; padding: 8px 12px; min-width: 120px; }
.cards dt { font-size: 12px; color: #555; } .cards dd { margin: 2px 0 0; font-size: 18px; font-weight: 600; }
.pair { display: grid; grid-template-columns: minmax(0, 740px) minmax(0, 1fr); gap: 20px; align-items: start; }
@media (max-width: 1350px) { .pair { grid-template-columns: minmax(0, 1fr); } }
figure { margin: 0; } svg.chart { max-width: 100%; height: auto; }
.table-box { max-height: 420px; overflow: auto; border: 1px solid #eee; }
table { border-collapse: collapse; font-size: 12px; width: 100%; min-width: 560px; }
th, td { padding: 3px 8px; border-bottom: 1px solid #eee; text-align: left; vertical-align: top; }
th { position: sticky; top: 0; background: #f6f6f6; } .num { text-align: right; font-variant-numeric: tabular-nums; }
tr.total td { font-weight: 600; border-top: 1px solid #999; }
.empty, .nothing p { color: #555; background: #f7f7f7; padding: 10px 14px; border-radius: 6px; }
footer { margin: 32px 0 8px; }
"""
