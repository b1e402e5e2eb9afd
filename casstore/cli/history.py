"""The commands that show what a store holds: `stats`, `log`, `cat`, `report` and `datasette-metadata`."""

import dataclasses
import sys
from datetime import timedelta
from pathlib import Path

import click

from casstore.cli.options import (
    DURATION,
    LINE_RANGE,
    NAMESPACE,
    OUTPUT_FILE,
    REFERENCE,
    StoreLocation,
    _check_output_path,
    _describe,
    _json_option,
    _location_options,
    _open,
    _require_namespace,
    _store_files,
)
from casstore.cli.output import _print_json, _table
from casstore.history import stats as history
from casstore.history.datasette import metadata
from casstore.history.figures import format_bytes, format_ratio
from casstore.history.report import DEFAULT_REPORT_NAME, write_report
from casstore.output_file import is_standard_stream, write_file
from casstore.printable import visible


@click.command()
@_location_options
@click.option(
    "--namespace",
    type=NAMESPACE,
    help="Only this namespace: its writes, the blobs they reference, its ratios, and its rows.",
)
@_json_option
def stats(location: StoreLocation, namespace: str | None, as_json: bool) -> None:
    """
    Size, dedup and compression, and writes and offloads per namespace and tool: of the whole store, or with
    --namespace of that namespace alone (bytes on disk are the whole store's, shared by its namespaces).
    """
    with _open(location) as store:
        _require_namespace(store, namespace)
        figures = history.stats(store, namespace=namespace)
        where = _describe(location, store)
    if as_json:
        _print_json(dataclasses.asdict(figures))
        return
    if namespace is None:
        click.echo(f"store {where}: the whole store")
    else:
        click.echo(f"namespace {namespace} in store {where}: its writes and the blobs they reference")
    whose = "everything written" if namespace is None else "everything it wrote"
    deduplicated = "across namespaces" if figures.dedup_scope == "store" else "within each namespace only"
    click.echo(f"  dedup scope      {figures.dedup_scope}  (identical results stored once {deduplicated})")
    click.echo(f"  blobs            {figures.blobs}")
    click.echo(f"  writes           {figures.writes}")
    click.echo(f"  logical bytes    {format_bytes(figures.logical_bytes)}  ({whose})")
    click.echo(f"  unique bytes     {format_bytes(figures.unique_bytes)}  (each distinct result once)")
    click.echo(f"  stored bytes     {format_bytes(figures.stored_bytes)}  (compressed)")
    shared_by_all = "-  (the whole store's, shared by its namespaces: casstore stats without --namespace)"
    if location.shared is None:
        on_disk = "(index and blob files, as du counts)"
        click.echo(f"  bytes on disk    {_optional_bytes(figures.disk_bytes, on_disk, shared_by_all)}")
    else:
        in_tables = "(casstore's tables in PostgreSQL)"
        in_objects = "(the objects under the prefix)"
        click.echo(f"  index bytes      {_optional_bytes(figures.index_bytes, in_tables, shared_by_all)}")
        click.echo(f"  object bytes     {_optional_bytes(figures.blob_bytes, in_objects, shared_by_all)}")
    click.echo(f"  dedup ratio      {format_ratio(figures.dedup_ratio)}  (logical / unique bytes)")
    click.echo(f"  compression      {format_ratio(figures.compression_ratio)}  (unique / stored bytes)")
    click.echo("namespaces")
    _table(figures.namespaces, ["namespace", "writes", "distinct_results", "logical_bytes", "offloads", "saved_tokens"])
    click.echo("offloads per tool")
    _table(figures.tools, ["namespace", "tool_name", "offloads", "original_tokens", "saved_tokens"])


def _optional_bytes(count: int | None, meaning: str, absent: str) -> str:
    return absent if count is None else f"{format_bytes(count)}  {meaning}"


@click.command()
@_location_options
@click.option("--namespace", type=NAMESPACE, help="Only this namespace.")
@click.option("--tool", help="Only this tool.")
@click.option("--since", type=DURATION, help="Only offloads within this period, such as 2h or 7d.")
@click.option("--limit", type=click.IntRange(min=1), default=50, show_default=True, help="At most this many lines.")
@_json_option
def log(
    location: StoreLocation,
    namespace: str | None,
    tool: str | None,
    since: timedelta | None,
    limit: int,
    as_json: bool,
) -> None:
    """
    The offload history, newest first: one line per result the compactor or per part the hook offloaded, and per
    archive of the step archive.
    """
    period = since
    with _open(location) as store:
        _require_namespace(store, namespace)
        entries = history.offload_log(store, namespace=namespace, tool=tool, since=period, limit=limit)
        matching = (
            history.count_offloads(store, namespace=namespace, tool=tool, since=period)
            if len(entries) == limit
            else len(entries)
        )
    if matching > len(entries):
        # The count is of lines, offloads and archives alike, as --limit cuts them.
        click.echo(f"{matching - len(entries)} more lines match: raise --limit to see them", err=True)
    if as_json:
        _print_json([dataclasses.asdict(entry) for entry in entries])
        return
    for entry in entries:
        references = " ".join(visible(reference) for reference in entry.references)
        click.echo(f"{visible(entry.offloaded_at)}  {visible(entry.namespace)}  {_log_line(entry)}  {references}")
    if not entries:
        click.echo("no offloads match", err=True)


def _log_line(entry: history.OffloadEntry) -> str:
    # Every value from the store is shown through `visible`: a tool name, call id or key holding a line break, a
    # carriage return or a terminal's escape sequence would otherwise forge, hide or act on lines of the log.
    # `-`: the call had no id; `?`: a hook's key that does not tell its call apart (shown by its stem, `key=`).
    unknown = entry.source == "hook" and entry.tool_name is None
    call = "call=?" if unknown else f"call={visible(entry.tool_call_id or '-')}"
    if entry.source == "compactor":
        return f"{visible(str(entry.tool_name))}  {call}  saved {entry.saved_tokens}/{entry.original_tokens} tokens"
    if entry.source == "archive":
        steps = "no steps" if entry.first_step is None else f"steps {entry.first_step}-{entry.last_step}"
        return (
            f"archive  {steps} ({entry.messages} messages)  saved {entry.saved_tokens}/{entry.original_tokens} tokens"
        )
    # The hook's key may not tell its tool apart from its call id: then the key's stem says what was offloaded.
    what = entry.tool_name if entry.tool_name is not None else f"key={(entry.key or '').rpartition('.')[0]}"
    what = visible(what)
    part = "" if entry.part is None else f"  part={entry.part}"
    return f"{what}  {call}{part}  hook, tokens -"


@click.command()
@click.argument("reference", type=REFERENCE)
@_location_options
@click.option(
    "--namespace",
    type=NAMESPACE,
    help="The namespace the reference was written in (default: the first namespace, by name, that holds it).",
)
@click.option(
    "--lines", "lines", type=LINE_RANGE, help="Only lines A to B (1-based, inclusive), such as 10:20, 10: or :20."
)
@click.option("-o", "--output", type=OUTPUT_FILE, help="Write the content to a file.")
def cat(
    reference: str,
    location: StoreLocation,
    namespace: str | None,
    lines: tuple[int, int | None] | None,
    output: Path | None,
) -> None:
    """Print the content behind REFERENCE (binary only with -o or when stdout is not a terminal)."""
    if namespace is None:
        with _open(location) as probe:
            holding = history.namespaces_holding(probe, reference)
        if not holding:
            raise click.ClickException(f"no namespace holds {reference}; see casstore log for references.")
        namespace = holding[0]
    with _open(location, namespace) as store:
        _require_namespace(store, namespace)
        content = store.read(reference)
    if lines is not None:
        if isinstance(content, bytes):
            raise click.ClickException("--lines works on text; this reference holds binary content.")
        content = _line_window(content, *lines, reference=reference)
    data = content.encode("utf-8") if isinstance(content, str) else content
    if output is not None:
        _check_output_path(output, location)
        try:
            write_file(output, data, never=_store_files(location))
        except OSError as error:
            raise click.ClickException(
                f"cannot write {output}: {error.strerror or error}; choose another file."
            ) from error
        return
    if sys.stdout is None:  # started with its standard output closed
        raise click.ClickException(f"standard output is closed: use -o FILE to write {reference}.")
    if isinstance(content, bytes) and sys.stdout.isatty():
        raise click.ClickException(
            f"{reference} holds {len(content)} bytes of binary content; use -o FILE or redirect stdout."
        )
    sys.stdout.flush()
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


def _line_window(text: str, first: int, last: int | None, *, reference: str) -> str:
    # Lines end at "\n" only, as in the read-back tool, so both number the lines of a result alike.
    pieces = text.split("\n")
    lines = [piece + "\n" for piece in pieces[:-1]] + ([pieces[-1]] if pieces[-1] else [])
    if first > len(lines):
        raise click.ClickException(
            f"{reference} has {len(lines)} lines; --lines {first}:{'' if last is None else last} starts past its end."
        )
    return "".join(lines[first - 1 : last])


@click.command()
@_location_options
@click.option("--namespace", type=NAMESPACE, help="Only this namespace's history (default: all namespaces).")
@click.option(
    "--since",
    type=DURATION,
    help="Only the history of this period before now, such as 7d or 12h (default: all history).",
)
@click.option(
    "-o",
    "--output",
    type=OUTPUT_FILE,
    default=Path(DEFAULT_REPORT_NAME),
    show_default=True,
    help="The HTML file to write (an existing one is written over; never a file of the store).",
)
def report(location: StoreLocation, namespace: str | None, since: timedelta | None, output: Path) -> None:
    """Write the history as one self-contained HTML page of charts and tables, and print its path."""
    period = since
    _check_output_path(output, location)
    with _open(location) as store:
        written = write_report(store, path=output, namespace=namespace, since=period, never=_store_files(location))
    if written.figures.empty:
        click.echo("nothing matches: the page says so", err=True)
    # Written to this command's own output (`-o /dev/stdout`), the page is not to be followed by this line.
    click.echo(f"wrote {output} ({format_bytes(written.size)}): open it in a browser", err=is_standard_stream(output))


@click.command("datasette-metadata")
def datasette_metadata() -> None:
    """
    Print Datasette metadata for an index.db: every table, view and column described, and the docs' questions as
    canned queries (casstore datasette-metadata > metadata.json; datasette index.db -m metadata.json).
    """
    _print_json(metadata())
