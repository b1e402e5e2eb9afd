"""
`casstore report`: the offload history as one self-contained HTML page of SVG charts, each beside a table of the
same numbers.

A client of the repository (`repository.history.report_figures`, `repository.copies.blob_content` for previews),
so it reports a local store and a shared one alike. Here: what the report asks of the repository, the previews of
ranked results, and writing the file. The page is `casstore.history.report_page` (its frame and summary), made of
the sections of `report_compactions` and `report_storage`, from the markup of `report_markup`; it fetches nothing
and runs nothing, and escapes every text that came from a tool, a key, a namespace or a content preview.
"""

import re
from collections.abc import Collection
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from casstore.errors import CasStoreError
from casstore.history import charts
from casstore.history.charts import format_bytes
from casstore.history.report_page import render_page
from casstore.output_file import write_file
from casstore.repository import HasRepository, ReportFigures, Repository, repository_of

__all__ = ["DEFAULT_REPORT_NAME", "SERIES_LIMIT", "ReportFile", "build_report", "write_report"]

DEFAULT_REPORT_NAME = "casstore-report.html"
# Marks per chart before time buckets take over (one per compaction up to this many).
SERIES_LIMIT = 500
# Rows of each ranking: repeated results, largest results, namespaces.
RANKING_ROWS = 20
NAMESPACE_ROWS = 200
# Rows of each table of tools (the compactor's, the hook's); the rest are summed in one row.
TOOL_ROWS = 30
# Previews are read through the store (verified) for results up to this size, and cut to this many characters.
PREVIEW_MAX_BYTES = 1 << 20
PREVIEW_CHARS = 160
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


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
    figures = repository.history.report_figures(
        namespace=namespace,
        since=since,
        series_limit=SERIES_LIMIT,
        rows_limit=RANKING_ROWS,
        namespace_limit=NAMESPACE_ROWS,
        tool_limit=TOOL_ROWS,
    )
    previews = _previews(repository, figures)
    page = render_page(
        figures=figures,
        where=repository.description,
        previews=previews,
        series_limit=SERIES_LIMIT,
        ranking_rows=RANKING_ROWS,
        namespace_rows=NAMESPACE_ROWS,
    )
    return page, figures


def write_report(
    source: Repository | HasRepository,
    *,
    path: Path,
    namespace: str | None = None,
    since: timedelta | None = None,
    never: Collection[tuple[int, int]] = (),
) -> ReportFile:
    """
    Write the report to `path` as `output_file.write_file` does: an existing file in place (its owner, mode and links
    kept), a new one whole or not at all; a pipe, a terminal or `/dev/stdout` is written into, never replaced.

    :param source: The store, or its repository.
    :param path: The HTML file to write; an existing file is written over.
    :param namespace: Only this namespace's history (all namespaces when None).
    :param since: Only the history of this period before now (all history when None).
    :param never: Files never to write, by `(st_dev, st_ino)` (the store's own: `output_file.write_file`).
    :returns: Where the report is, its size, and the figures it shows.
    :raises CasStoreError: If `path` cannot be written (its folder is missing, or it is a folder); nothing is left.
    """
    page, figures = build_report(source, namespace=namespace, since=since)
    data = page.encode("utf-8")
    try:
        write_file(path, data, never=never)
    except OSError as error:
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
                text = repository.copies.blob_content(row.digest).decode("utf-8", errors="replace")
            except CasStoreError as error:
                previews[row.digest] = f"(could not be read: {error})"
            else:
                text = text[: PREVIEW_CHARS * 4]  # enough for the preview, however large the result
                text = _CONTROL.sub(" ", text.replace("\r\n", "\n")).replace("\n", " \u23ce ")
                previews[row.digest] = charts.short(text, PREVIEW_CHARS)
    return previews
