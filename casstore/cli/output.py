"""What a command prints (JSON, tables, progress bars, times and durations) and the exit statuses it ends with."""

import json
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

import click

from casstore.history.figures import format_bytes
from casstore.printable import visible

# Exit statuses (see the module docstring): bad input and failures, usage errors (click's), `verify`'s orphans.
EXIT_FAILURE = 1
EXIT_USAGE = click.UsageError.exit_code
EXIT_ORPHANS_ONLY = 3
# The widest a table's cell is shown: a longer value (a tool name of thousands of characters) is cut to its first
# characters and an ellipsis, so one value cannot widen every row of its table (`--json` gives it whole).
CELL_CHARS = 60


def _print_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2, default=str))


def _table(rows: list[dict[str, Any]], columns: list[str]) -> None:
    if not rows:
        click.echo("  (none)")
        return
    cells = [[_cell(row.get(column), column) for column in columns] for row in rows]
    widths = [max(len(column), *(len(line[i]) for line in cells)) for i, column in enumerate(columns)]
    click.echo("  " + "  ".join(column.ljust(width) for column, width in zip(columns, widths, strict=True)))
    for line in cells:
        click.echo("  " + "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)))


def _cell(value: Any, column: str) -> str:
    if value is None:
        return "-"
    if column.endswith("_bytes"):
        return format_bytes(value)
    # Cut before escaping, so a cell shows at most CELL_CHARS characters of the value, each as `visible` writes it.
    text = str(value)
    return visible(text) if len(text) <= CELL_CHARS else visible(text[: CELL_CHARS - 1]) + "\u2026"


class _ProgressBar:
    """A progress bar on stderr whose length is learned from the first `update(done, total)`."""

    def __init__(self, label: str) -> None:
        self._label = label
        self._bar: Any = None

    def update(self, done: int, total: int) -> None:
        if self._bar is None:
            self._bar = click.progressbar(length=total, label=self._label, file=sys.stderr).__enter__()
        self._bar.update(done - self._bar.pos)

    def __enter__(self) -> "_ProgressBar":
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._bar is not None:
            self._bar.__exit__(*exc_info)


def _duration_text(duration: timedelta) -> str:
    """A duration as the options spell it, in its largest whole unit: `1h`, `90m`, `0s`."""
    seconds = int(duration.total_seconds())
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if seconds and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _when(timestamp: str | None) -> str:
    """An index time (UTC) with how far ahead it is, such as `2026-12-01 12:30:05 UTC (in 59 min)`."""
    if timestamp is None:
        return "-"
    moment = datetime.fromisoformat(timestamp).replace(tzinfo=UTC)
    minutes = max(0, round((moment - datetime.now(UTC)).total_seconds() / 60))
    return f"{moment:%Y-%m-%d %H:%M:%S} UTC (in {minutes} min)"
