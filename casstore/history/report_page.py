"""
The page of `casstore report`: its frame (head, Content-Security-Policy, style, header, footer), the summary cards
or why there is nothing to show, and its sections in order (`casstore.history.report_compactions`,
`casstore.history.report_storage`).

The page fetches nothing and runs nothing: no scripts, styles, fonts or images from anywhere (its
Content-Security-Policy forbids them too), and every text that came from a tool, a key, a namespace or a content
preview is escaped (`casstore.history.charts.escape`) before it is part of the markup.
"""

from casstore.history.charts import escape, format_bytes
from casstore.history.report_archives import archives_section
from casstore.history.report_compactions import hook_section, savings_section, timeline_section, tools_section
from casstore.history.report_markup import amount, period
from casstore.history.report_storage import bytes_section, namespaces_section, results_section
from casstore.repository import ReportFigures

_CSP = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"


def render_page(
    *,
    figures: ReportFigures,
    where: str,
    previews: dict[str, str],
    series_limit: int,
    ranking_rows: int,
    namespace_rows: int,
) -> str:
    """
    :param figures: What the page shows.
    :param where: The store, for the page's header (no password).
    :param previews: A preview of each ranked result's content, by digest.
    :param series_limit: The most marks per series before time buckets take over.
    :param ranking_rows: Rows of each ranking of results (the most repeated, the largest).
    :param namespace_rows: Rows of the namespaces' table.
    :returns: The whole page.
    """
    sections = [
        timeline_section(figures, series_limit=series_limit),
        savings_section(figures),
        tools_section(figures),
        hook_section(figures),
        archives_section(figures),
        bytes_section(figures),
        results_section(
            "repeated",
            "Results that came back most often",
            figures.repeated[:ranking_rows],
            value=lambda row: row.bytes_saved,
            value_label="bytes saved by storing it once",
            empty="No result was written more than once here.",
            previews=previews,
        ),
        results_section(
            "largest",
            "Largest results",
            figures.largest[:ranking_rows],
            value=lambda row: row.size,
            value_label="size of the result (bytes)",
            empty="No results were written here.",
            previews=previews,
        ),
        namespaces_section(figures, limit=namespace_rows),
    ]
    title = "casstore report" + (f": {figures.scope.namespace}" if figures.scope.namespace is not None else "")
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="referrer" content="no-referrer">'
        f"<title>{escape(title)}</title><style>{_STYLE}</style></head><body>"
        f"<header><h1>{escape(title)}</h1>{_scope(figures, where)}</header>"
        f"<main>{_summary(figures)}{''.join(sections)}</main>"
        "<footer>Written by <code>casstore report</code>. Every chart is drawn from the table beside it; the "
        "page loads nothing and runs no script.</footer>"
        "</body></html>\n"
    )


def _scope(figures: ReportFigures, where: str) -> str:
    scope = figures.scope
    namespaces = "all namespaces" if scope.namespace is None else f"namespace <code>{escape(scope.namespace)}</code>"
    span = "all history" if scope.since is None else f"the last {escape(period(scope.since))}"
    return (
        f'<p class="scope">Store <code>{escape(where)}</code> \u00b7 {namespaces} \u00b7 {span} \u00b7 '
        f"written {escape(figures.now[:19])} UTC</p>"
    )


def _summary(figures: ReportFigures) -> str:
    if figures.empty:
        return f'<section id="nothing" class="nothing"><h2>Nothing to show</h2><p>{_nothing(figures)}</p></section>'
    last = figures.bytes_over_time[-1] if figures.bytes_over_time else None
    others, other_hook = figures.other_tools, figures.other_hook_tools
    offloads = sum(tool.offloads for tool in figures.tools) + (others.offloads if others else 0)
    saved = sum(tool.saved_tokens for tool in figures.tools) + (others.saved_tokens if others else 0)
    hooked = sum(tool.results for tool in figures.hook_tools) + (other_hook.offloads if other_hook else 0)
    cards = [
        ("writes", amount(last.writes if last else 0)),
        ("logical bytes", format_bytes(last.logical_bytes if last else 0)),
        ("unique bytes", format_bytes(last.unique_bytes if last else 0)),
        ("stored bytes", format_bytes(last.stored_bytes if last else 0)),
        ("FileSystemToolResultStore", format_bytes(last.file_system_bytes if last else 0)),
        ("compactions", amount(figures.compactions)),
        ("results offloaded", amount(offloads)),
        ("tokens saved", amount(saved)),
        ("offloaded by the hook", amount(hooked)),
    ]
    items = "".join(f"<div><dt>{escape(label)}</dt><dd>{escape(value)}</dd></div>" for label, value in cards)
    return f'<section id="summary"><dl class="cards">{items}</dl></section>'


def _nothing(figures: ReportFigures) -> str:
    scope = figures.scope
    if scope.namespace is not None and scope.namespace not in figures.known_namespaces:
        known = ", ".join(f"<code>{escape(name)}</code>" for name in figures.known_namespaces)
        return f"This store has no history in namespace <code>{escape(scope.namespace)}</code>. " + (
            f"Its namespaces: {known}." if known else "It holds nothing yet."
        )
    if scope.since is not None:
        return (
            f"Nothing was written, offloaded or compacted in the last {escape(period(scope.since))}. Run "
            "<code>casstore report</code> without <code>--since</code> for all history."
        )
    return (
        "This store is empty: nothing has been written yet. Point an agent at it (a "
        "<code>ContentAddressedToolResultStore</code> with <code>DedupOffloadCompactor</code>), or run "
        "<code>casstore demo</code>, then report again."
    )


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
