"""The report's section on the step archive: what `StepArchiveCompactor` took out of the conversation."""

from casstore.history import charts
from casstore.history.charts import Bar
from casstore.history.report_markup import amount, empty_section, section, tabulate
from casstore.repository import ArchiveRow, ReportFigures


def _steps(row: ArchiveRow) -> str:
    if row.first_step is None:
        return f"{row.messages} messages"
    if row.first_step == row.last_step:
        return f"step {row.first_step}"
    return f"steps {row.first_step}-{row.last_step}"


def archives_section(figures: ReportFigures) -> str:
    """:returns: One bar per archive (the tokens it took out of the conversation), beside a table of the archives."""
    title = "Steps archived"
    if not figures.archives:
        return empty_section("archives", title, "<code>StepArchiveCompactor</code> archived no steps here.")
    bars = [
        Bar(
            label=_steps(row),
            value=row.saved_tokens,
            tooltip=f"{row.archived_at} UTC ({row.namespace}): {_steps(row)}, {row.messages} messages, "
            f"{row.saved_tokens:,} tokens out of the conversation",
            kind="archive",
        )
        for row in reversed(figures.archives)
    ]
    rows = [
        [
            row.archived_at,
            row.namespace,
            _steps(row),
            amount(row.messages),
            amount(row.original_tokens),
            amount(row.saved_tokens),
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
        f"What <code>StepArchiveCompactor</code> took out of the conversation and wrote to the store as one transcript "
        f"each ({shown}, from <code>archives</code>): the model reads a transcript back by its reference, which the "
        "note left in the conversation names."
    )
    chart = charts.bar_chart(bars, title="Tokens each archive took out", value_label="tokens")
    heading = ["archived (UTC)", "namespace", "steps", "messages", "tokens", "tokens saved", "transcript"]
    return section("archives", title, intro, chart, tabulate(heading, rows, numeric_from=3, numeric_to=6, code={6}))
