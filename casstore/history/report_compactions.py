"""
The sections of `casstore report` about what compaction did: each compaction's conversation size before and after
(`timeline_section`), the tokens each saved (`savings_section`), per tool (`tools_section`), and what Haystack's
offload hook offloaded (`hook_section`). Each is a chart beside a table of the same numbers.
"""

from casstore.history import charts
from casstore.history.charts import Bar, Range, escape
from casstore.history.report_markup import amount, empty_section, moment, section, tabulate
from casstore.repository import ReportFigures

# The most of a tool's name the page shows, in tables and hovers (chart labels are cut shorter): a name of any length
# is one row of the table, not a page of it.
NAME_CHARS = 200


def timeline_section(figures: ReportFigures, *, series_limit: int) -> str:
    """
    :param series_limit: The most marks the figures hold before time buckets take over (for the intro).
    :returns: The compactions: the conversation's size before and after each (or each time bucket's means).
    """
    title = "Compactions: the conversation before and after"
    if not figures.timeline:
        return empty_section(
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
        at = moment(mark.first)
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
                    amount(mark.tokens_before),
                    amount(mark.tokens_after),
                    amount(mark.tokens_before - mark.tokens_after),
                    amount(mark.target_tokens),
                    amount(mark.context_window),
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
                    amount(mark.count),
                    amount(round(mark.tokens_before, 1)),
                    amount(mark.max_tokens_before),
                    amount(round(mark.tokens_after, 1)),
                    amount(mark.min_tokens_after),
                    amount(round(mark.target_tokens, 1)),
                    amount(None if mark.context_window is None else round(mark.context_window, 1)),
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
            f"{figures.compactions:,} compactions, more than {series_limit} marks can show apart: one mark per "
            f"{escape(bucket)}, from the largest conversation before to the smallest after (grey), with the "
            "mean before (ring) and after (dot) and the mean target (tick)."
        )
    chart = charts.timeline_chart(ranges, title="Conversation size at each compaction", value_label="tokens")
    return section("timeline", title, intro, chart, tabulate(heading, rows, numeric_from=2))


def savings_section(figures: ReportFigures) -> str:
    """:returns: The tokens each compaction's offloads saved (or each time bucket's sums)."""
    title = "Tokens saved per compaction"
    if not figures.savings:
        return empty_section("savings", title, "No tool results were offloaded here.")
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
                    amount(mark.results),
                    amount(mark.original_tokens),
                    amount(mark.saved_tokens),
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
                    amount(mark.compactions),
                    amount(mark.results),
                    amount(mark.original_tokens),
                    amount(mark.saved_tokens),
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
                amount(sum(m.results for m in figures.savings)),
                amount(sum(m.original_tokens for m in figures.savings)),
                amount(total),
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
                amount(sum(m.compactions for m in figures.savings)),
                amount(sum(m.results for m in figures.savings)),
                amount(sum(m.original_tokens for m in figures.savings)),
                amount(total),
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
    return section("savings", title, intro, chart, tabulate(heading, rows, numeric_from=numeric_from, total=True))


def tools_section(figures: ReportFigures) -> str:
    """:returns: The tokens offloading saved per tool."""
    title = "Tokens saved by tool"
    if not figures.tools:
        return empty_section("tools", title, "No tool results were offloaded here.")
    bars = [
        Bar(
            label=tool.tool_name,
            value=tool.saved_tokens,
            tooltip=f"{charts.short(tool.tool_name, NAME_CHARS)}: {tool.offloads} results offloaded, "
            f"{tool.saved_tokens:,} tokens saved",
            kind="tool",
        )
        for tool in figures.tools
    ]
    rows = [
        [
            charts.short(tool.tool_name, NAME_CHARS),
            amount(tool.offloads),
            amount(tool.compactions),
            amount(tool.original_tokens),
            amount(tool.saved_tokens),
        ]
        for tool in figures.tools
    ]
    others = figures.other_tools
    offloads = sum(tool.offloads for tool in figures.tools)
    original = sum(tool.original_tokens for tool in figures.tools)
    saved = sum(tool.saved_tokens for tool in figures.tools)
    if others is not None:
        label = f"{others.tools:,} other tools"
        tooltip = f"{label}: {others.offloads} results offloaded, {others.saved_tokens:,} tokens saved"
        bars.append(Bar(label=label, value=others.saved_tokens, tooltip=tooltip, kind="other-tools"))
        rows.append([label, amount(others.offloads), "", amount(others.original_tokens), amount(others.saved_tokens)])
        offloads += others.offloads
        original += others.original_tokens
        saved += others.saved_tokens
    rows.append(["total", amount(offloads), "", amount(original), amount(saved)])
    chart = charts.bar_chart(bars, title="Tokens saved by tool", value_label="tokens saved")
    table = tabulate(
        ["tool", "results offloaded", "compactions", "tokens before", "tokens saved"],
        rows,
        numeric_from=1,
        total=True,
    )
    intro = "Which tools filled the context: the tokens their offloaded results took, and what offloading saved."
    return section("tools", title, intro, chart, table)


def hook_section(figures: ReportFigures) -> str:
    """:returns: The results Haystack's offload hook offloaded per tool."""
    title = "Results the offload hook offloaded"
    tools = figures.hook_tools
    if not tools:
        return empty_section("hook", title, "Haystack's <code>ToolResultOffloadHook</code> offloaded nothing here.")
    unnamed = "(tool not told apart from its call id)"
    names = [unnamed if tool.tool_name is None else charts.short(tool.tool_name, NAME_CHARS) for tool in tools]
    bars = [
        Bar(label=name, value=tool.results, tooltip=f"{tool.results} results", kind="tool")
        for name, tool in zip(names, tools, strict=True)
    ]
    rows = [
        [name, amount(tool.results), amount(tool.parts), tool.first_offload, tool.last_offload]
        for name, tool in zip(names, tools, strict=True)
    ]
    results, parts = sum(tool.results for tool in tools), sum(tool.parts for tool in tools)
    others = figures.other_hook_tools
    if others is not None:
        label = f"{others.tools:,} other tools"
        bars.append(
            Bar(label=label, value=others.offloads, tooltip=f"{label}: {others.offloads} results", kind="other-tools")
        )
        rows.append([label, amount(others.offloads), amount(others.parts), "", ""])
        results, parts = results + others.offloads, parts + others.parts
    rows.append(["total", amount(results), amount(parts), "", ""])
    intro = (
        "What Haystack's <code>ToolResultOffloadHook</code> offloaded as each result arrived, per tool, from the "
        "keys it wrote (<code>writes</code>). The hook measures no tokens: its offloads count above, not here."
    )
    chart = charts.bar_chart(bars, title=title, value_label="results offloaded")
    heading = ["tool", "results offloaded", "parts written", "first (UTC)", "last (UTC)"]
    return section("hook", title, intro, chart, tabulate(heading, rows, numeric_from=1, numeric_to=3, total=True))
