"""
The `casstore` command: a thin layer over `casstore.history`, `casstore.maintenance` and `casstore.demo`.

Every subcommand takes `--root DIR` (default `$CASSTORE_ROOT`, else `./.casstore`). Every error is one line on stderr,
never a traceback, and the exit status says which kind it is, the same for every command (docs/cli.md):

- 0: done (`verify`: nothing damaged, no orphans);
- 1: bad input casstore checks itself (a malformed reference, line range or namespace, checked as the command line
  is parsed; no store at the root, an unknown namespace, a reference not in it, `--lines` past the end), and
  failures (a store or server that fails, damage found by `verify`, a `copy` that could not copy all);
- 2: usage errors, as click reports them: an unknown command or option, a missing argument, a value outside its
  range (`--limit 0`), a duration or size that is not one (`--since soon`, `--max-size 5XB`), `--root` together
  with `--index`/`--blobs`;
- 3: `verify` found orphans and nothing damaged.
"""

import dataclasses
import functools
import json
import logging
import os
import re
import sqlite3
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeAlias, TypeVar

import click

from casstore import history, maintenance
from casstore.copying import copy_store
from casstore.datasette import metadata
from casstore.errors import CasStoreError, InvalidReferenceError
from casstore.figures import format_bytes, format_ratio
from casstore.namespaces import check_namespace
from casstore.references import parse_reference
from casstore.report import DEFAULT_REPORT_NAME, write_report
from casstore.shared_store import BLOB_URL_VARIABLE, INDEX_URL_VARIABLE, SharedToolResultStore
from casstore.shared_store import relocate_blobs as relocate_shared_blobs
from casstore.store import INDEX_FILE_NAME, ContentAddressedToolResultStore, RepositoryToolResultStore

DEFAULT_ROOT = ".casstore"
_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*(s|m|h|d|w)", re.ASCII)
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
# Exit statuses (see the module docstring): bad input and failures, usage errors (click's), `verify`'s orphans.
EXIT_FAILURE = 1
EXIT_USAGE = click.UsageError.exit_code
EXIT_ORPHANS_ONLY = 3

F = TypeVar("F", bound=Callable[..., Any])


class _OneLineErrors(click.Group):
    """A group that turns every error into one line on stderr and a non-zero exit status."""

    def main(self, args: Sequence[str] | None = None, prog_name: str | None = None, **extra: Any) -> Any:  # type: ignore[override]
        try:
            return super().main(args=args, prog_name=prog_name or "casstore", standalone_mode=False, **extra)
        except click.exceptions.Exit as done:
            sys.exit(done.exit_code)
        except click.ClickException as error:
            click.echo(f"casstore: error: {error.format_message()}", err=True)
            sys.exit(error.exit_code)
        except (CasStoreError, sqlite3.Error, OSError) as error:
            click.echo(f"casstore: error: {error}", err=True)
            sys.exit(EXIT_FAILURE)
        except click.exceptions.Abort:
            click.echo("casstore: aborted", err=True)
            sys.exit(EXIT_FAILURE)


def parse_duration(text: str) -> timedelta:
    """
    :param text: A duration such as `30d`, `12h`, `90m`, `45s` or `2w`.
    :returns: The duration.
    :raises click.BadParameter: If `text` is not such a duration (the command reports it as a usage error, status 2).
    """
    match = _DURATION.fullmatch(text.strip())
    try:
        if match is not None:
            return timedelta(**{_UNITS[match[2]]: float(match[1])})
    except OverflowError:
        pass
    raise click.BadParameter(
        f"{text!r} is not a duration; use a number and a unit, such as 30d, 12h, 90m or 45s (at most 999999999d)."
    )


# Decimal units are powers of 1000, binary ones of 1024, spelled as the issue and `du --si`/`du -h` do.
SIZE_UNITS = {
    "B": 1,
    "KB": 10**3,
    "MB": 10**6,
    "GB": 10**9,
    "TB": 10**12,
    "KiB": 2**10,
    "MiB": 2**20,
    "GiB": 2**30,
    "TiB": 2**40,
}
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([A-Za-z]*)", re.ASCII)
_SIZE_FORMS = (
    "a number and a unit, such as 500MB, 2GiB, 1.5TB or 4096 (bytes): B, KB, MB, GB, TB (powers of 1000) or KiB, "
    "MiB, GiB, TiB (powers of 1024), spelled so"
)


def parse_size(text: str) -> int:
    """
    :param text: A size such as `500MB` (500 x 10^6 bytes), `2GiB` (2 x 2^30), `1.5 GB` or `4096` (bytes).
    :returns: The size in bytes (a fraction of a byte is dropped).
    :raises click.BadParameter: If `text` is not such a size.
    """
    match = _SIZE.fullmatch(text.strip())
    if match is None or (match[2] or "B") not in SIZE_UNITS:
        raise click.BadParameter(f"{text!r} is not a size; use {_SIZE_FORMS}.")
    return int(Decimal(match[1]) * SIZE_UNITS[match[2] or "B"])


class _BadValue(click.ClickException):
    """A value casstore checks itself, refused as the command line is parsed: bad input (exit status 1)."""


def _refuse(message: str, param: click.Parameter | None, ctx: click.Context | None) -> NoReturn:
    hint = param.get_error_hint(ctx) if param is not None and ctx is not None else "a value"
    raise _BadValue(f"Invalid value for {hint}: {message}")


# click's ParamType is generic in the click the project checks with, which its floor need not be: it is subscripted
# for the type checker only, never at run time.
if TYPE_CHECKING:
    _ParamType: TypeAlias = click.ParamType[Any, Any]
else:
    _ParamType = click.ParamType


class _Duration(_ParamType):
    """A duration option (`parse_duration`), checked as the command line is parsed; a usage error, status 2."""

    name = "duration"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> timedelta:
        if isinstance(value, timedelta):
            return value
        try:
            return parse_duration(str(value))
        except click.BadParameter as error:
            self.fail(error.message, param, ctx)


class _LineRange(_ParamType):
    """`A:B`, `A:` or `:B`, 1-based and inclusive, as `(first, last or None)`."""

    name = "A:B"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> tuple[int, int | None]:
        if isinstance(value, tuple):
            return value
        match = re.fullmatch(r"(\d*):(\d*)", str(value).strip())
        first = int(match[1]) if match is not None and match[1] else 1
        last = int(match[2]) if match is not None and match[2] else None
        if match is None or first < 1 or (last is not None and last < first):
            _refuse(f"takes A:B with 1-based line numbers and A <= B, such as 10:20; got {value!r}.", param, ctx)
        return first, last


class _Reference(_ParamType):
    """A reference as `write` returns it, checked for its form (not for being stored) as the line is parsed."""

    name = "reference"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        try:
            parse_reference(value)
        except InvalidReferenceError as error:
            _refuse(str(error), param, ctx)
        return str(value)


class _Namespace(_ParamType):
    """A namespace name a store accepts (whether the store has it is asked later)."""

    name = "namespace"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        try:
            check_namespace(value)
        except (TypeError, ValueError) as error:
            _refuse(str(error), param, ctx)
        return str(value)


class _Size(_ParamType):
    """A size (`parse_size`), such as 500MB or 2GiB, checked as the command line is parsed; a usage error, status 2."""

    name = "size"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        try:
            return parse_size(str(value))
        except click.BadParameter as error:
            self.fail(error.message, param, ctx)


DURATION, LINE_RANGE, REFERENCE, NAMESPACE, SIZE = _Duration(), _LineRange(), _Reference(), _Namespace(), _Size()


@dataclass(frozen=True)
class StoreLocation:
    """Which store a command opens: a local folder, or a shared store's index and blob URLs."""

    root: Path | None = None
    index_url: str | None = None
    blob_url: str | None = None

    @property
    def shared(self) -> tuple[str, str] | None:
        """:returns: `(index URL, blob URL)` for a shared store, None for a local one."""
        if self.index_url is None or self.blob_url is None:
            return None
        return self.index_url, self.blob_url


def resolve_location(
    *, root: Path | None, index_url: str | None, blob_url: str | None, environ: Mapping[str, str]
) -> StoreLocation:
    """
    Decide which store a command opens. An explicit `--root` opens that folder (the URL variables are then ignored);
    explicit `--index` and `--blobs` open the shared store; with neither, `$CASSTORE_INDEX_URL` and
    `$CASSTORE_BLOB_URL` when set, else `$CASSTORE_ROOT`, else `./.casstore`.

    :raises click.UsageError: If both kinds are named explicitly, or only one of the two URLs is.
    """
    if root is not None and (index_url is not None or blob_url is not None):
        raise click.UsageError("--root names a local store and --index/--blobs a shared one: give one of them.")
    if root is not None:
        return StoreLocation(root=root)
    if index_url is not None or blob_url is not None:
        if index_url is None or blob_url is None:
            raise click.UsageError("a shared store needs both --index URL and --blobs URL.")
        return StoreLocation(index_url=index_url, blob_url=blob_url)
    index_url, blob_url = environ.get(INDEX_URL_VARIABLE) or None, environ.get(BLOB_URL_VARIABLE) or None
    if index_url is not None and blob_url is not None:
        return StoreLocation(index_url=index_url, blob_url=blob_url)
    if index_url is not None or blob_url is not None:
        missing = BLOB_URL_VARIABLE if blob_url is None else INDEX_URL_VARIABLE
        raise click.UsageError(
            f"{INDEX_URL_VARIABLE if blob_url is None else BLOB_URL_VARIABLE} is set but {missing} is not: a shared "
            f"store needs both (or pass --root for a local one)."
        )
    return StoreLocation(root=Path(environ.get("CASSTORE_ROOT") or DEFAULT_ROOT))


def _location_options(function: F) -> F:
    """Add `--root`, `--index` and `--blobs`, and hand the command the `location` they resolve to."""

    @functools.wraps(function)
    def with_location(*args: Any, root: Path | None, index: str | None, blobs: str | None, **kwargs: Any) -> Any:
        location = resolve_location(root=root, index_url=index, blob_url=blobs, environ=os.environ)
        return function(*args, location=location, **kwargs)

    options = [
        click.option(
            "--root",
            type=click.Path(file_okay=False, path_type=Path),
            default=None,
            help="A local store's folder (default: $CASSTORE_ROOT, else ./.casstore, unless the URL variables say).",
        ),
        click.option(
            "--index",
            metavar="URL",
            default=None,
            help=f"A shared store's PostgreSQL URL (default: ${INDEX_URL_VARIABLE}); goes with --blobs.",
        ),
        click.option(
            "--blobs",
            metavar="URL",
            default=None,
            help=f"A shared store's object-store URL, such as s3://bucket/prefix (default: ${BLOB_URL_VARIABLE}).",
        ),
    ]
    decorated: Any = with_location
    for option in reversed(options):
        decorated = option(decorated)
    return decorated  # type: ignore[no-any-return]


def _json_option(function: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts instead of a table.")(function)


def _open(location: StoreLocation, namespace: str = "default") -> RepositoryToolResultStore:
    try:
        if location.shared is not None:
            index_url, blob_url = location.shared
            return SharedToolResultStore(index_url=index_url, blob_url=blob_url, namespace=namespace)
        root = location.root
        assert root is not None
        if not (root / INDEX_FILE_NAME).is_file():  # checked first: a store opened on nothing would read as empty
            raise click.ClickException(
                f"no casstore store at {root} (no {INDEX_FILE_NAME}): pass --root with a store's folder, or set "
                f"CASSTORE_ROOT (or {INDEX_URL_VARIABLE} and {BLOB_URL_VARIABLE} for a shared store); a store is "
                f"created by its first write, such as casstore demo."
            )
        return ContentAddressedToolResultStore(root, namespace=namespace)
    except ValueError as error:  # a namespace or a setting the store refuses
        raise click.ClickException(str(error)) from error


def _describe(location: StoreLocation, store: RepositoryToolResultStore) -> str:
    return str(location.root) if location.root is not None else store.repository.description


def _require_namespace(store: RepositoryToolResultStore, namespace: str | None) -> None:
    if namespace is not None and namespace not in history.namespaces(store):
        known = ", ".join(history.namespaces(store)) or "none yet"
        raise click.ClickException(f"unknown namespace {namespace!r} (known: {known}).")


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
    return format_bytes(value) if column.endswith("_bytes") else str(value)


@click.group(cls=_OneLineErrors)
@click.version_option(package_name="casstore")
def cli() -> None:
    """Inspect, verify and clean up a casstore tool-result store, or run the demo agent."""


@cli.command()
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


@cli.command()
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
    """The offload history, newest first: one line per result the compactor or per part the hook offloaded."""
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
        click.echo(f"{matching - len(entries)} more offloads match: raise --limit to see them", err=True)
    if as_json:
        _print_json([dataclasses.asdict(entry) for entry in entries])
        return
    for entry in entries:
        click.echo(f"{entry.offloaded_at}  {entry.namespace}  {_log_line(entry)}  {' '.join(entry.references)}")
    if not entries:
        click.echo("no offloads match", err=True)


def _log_line(entry: history.OffloadEntry) -> str:
    call = f"call={entry.tool_call_id or '-'}"
    if entry.source == "compactor":
        return f"{entry.tool_name}  {call}  saved {entry.saved_tokens}/{entry.original_tokens} tokens"
    # The hook's key may not tell its tool apart from its call id: then the key's stem says what was offloaded.
    what = entry.tool_name if entry.tool_name is not None else f"key={(entry.key or '').rpartition('.')[0]}"
    part = "" if entry.part is None else f"  part={entry.part}"
    return f"{what}  {call}{part}  hook, tokens -"


@cli.command()
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
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Write the content to a file.")
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
        output.write_bytes(data)
        return
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


@cli.command()
@_location_options
@_json_option
def verify(location: StoreLocation, as_json: bool) -> None:
    """
    Re-hash every blob; report corrupt and missing blobs, writes without blobs, and orphans. Exit status 0 when all is
    well, 1 when something is damaged, 3 when the only findings are orphans (which `casstore gc` removes).
    """
    with _open(location) as store:
        if not as_json and sys.stderr.isatty():
            with _ProgressBar("verifying") as bar:
                report = maintenance.verify(store, progress=bar.update)
        else:
            report = maintenance.verify(store)
    if as_json:
        _print_json({**dataclasses.asdict(report), "ok": report.ok, "clean": report.clean})
    else:
        _print_verify_report(report)
    if not report.ok:
        sys.exit(EXIT_FAILURE)
    if not report.clean:
        sys.exit(EXIT_ORPHANS_ONLY)


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


def _print_verify_report(report: maintenance.VerifyReport) -> None:
    click.echo(f"{report.blobs_checked} blobs checked")
    for digest, message in report.corrupt:
        click.echo(f"corrupt  {digest}  {message}")
    for digest in report.missing:
        click.echo(f"missing  {digest}")
    for namespace, reference in report.dangling_writes:
        click.echo(f"no blob  {reference}  (written in namespace {namespace!r})")
    for write_id, key in report.writes_without_reference:
        click.echo(f"no reference  write {write_id}, key {key!r}: its namespace_references row is gone")
    if report.stray_files:
        click.echo(
            f"orphan   {report.stray_files} blob or temporary files ({format_bytes(report.stray_bytes)}) "
            "no row points at"
        )
    if report.stale_rows:
        click.echo(f"orphan   {report.stale_rows} rows of unreferenced blobs whose file is gone")
    if report.unreferenced_blobs:
        click.echo(
            f"{report.unreferenced_blobs} blobs no write references any more: gc deletes them after its grace period"
        )
    if report.search_documents_checked:
        click.echo(f"{report.search_documents_checked} search index documents checked")
    if report.search_mismatched:
        click.echo(
            f"search   {report.search_mismatched} search index documents do not match their blobs: "
            f"casstore search-index --rebuild repairs the index"
        )
    if report.search_stray_rows:
        click.echo(
            f"orphan   {report.search_stray_rows} search index rows of no document (matched by nothing; "
            f"casstore search-index --rebuild removes them)"
        )
    if not report.ok:
        click.echo("damaged: see 'Recovery' in casstore's docs/gc.md")
    else:
        click.echo("ok" if report.clean else "ok, but orphans: casstore gc removes those older than its grace period")


@cli.command("search-index")
@_location_options
@click.option(
    "--rebuild", is_flag=True, help="Drop the search index and build it again (after verify found it damaged)."
)
@_json_option
def search_index(location: StoreLocation, rebuild: bool, as_json: bool) -> None:
    """
    Turn the search index on and index every stored result not indexed yet, so the search tool finds it. Safe to run
    beside writers and to interrupt: what was indexed stays, and running it again goes on.
    """
    with _open(location) as store:
        try:
            if not as_json and sys.stderr.isatty():
                with _ProgressBar("indexing") as bar:
                    indexed, skipped = store.repository.build_search_index(rebuild=rebuild, progress=bar.update)
            else:
                indexed, skipped = store.repository.build_search_index(rebuild=rebuild)
        except CasStoreError as error:
            raise click.ClickException(str(error)) from error
        size = store.repository.search_index_bytes()
    if as_json:
        _print_json({"indexed": indexed, "skipped": skipped, "index_bytes": size})
        return
    click.echo(f"indexed {indexed} results ({skipped} skipped: binary content that is not text, or unreadable)")
    click.echo(
        f"search index {format_bytes(size)}; writes of a store opened with search_index=True are indexed as they come"
    )


@cli.command()
@_location_options
@click.option(
    "--namespace",
    type=NAMESPACE,
    help="Forget every write and offload of this namespace (with --older-than or --max-size: only its writes count).",
)
@click.option("--older-than", type=DURATION, help="Forget writes and offloads older than this, such as 30d.")
@click.option(
    "--max-size",
    type=SIZE,
    metavar="SIZE",
    help="Then forget the oldest writes until the blobs the rest need take at most SIZE stored bytes, such as 500MB "
    "(10^6) or 2GiB (2^30).",
)
@click.option(
    "--grace",
    type=DURATION,
    default="1h",
    show_default=True,
    help="Keep unreferenced blobs seen, and stray files modified, this recently (0s: none; safe beside writers).",
)
@click.option(
    "--vacuum",
    is_flag=True,
    help="Rebuild the index afterwards: SQLite's VACUUM, which converts a store made before casstore set auto_vacuum "
    "so that every later gc returns space (writers wait until it ends); on a shared store VACUUM ANALYZE, beside "
    "writers.",
)
@click.option("--dry-run", is_flag=True, help="Say what would go and estimate the sizes after; change nothing.")
@_json_option
def gc(
    location: StoreLocation,
    namespace: str | None,
    older_than: timedelta | None,
    max_size: int | None,
    grace: timedelta,
    vacuum: bool,
    dry_run: bool,
    as_json: bool,
) -> None:
    """
    Forget old writes or a namespace (or the oldest writes beyond --max-size), then delete blobs nothing references
    and stray files, and give the space back to the file system.
    """
    age, grace_period = older_than, grace
    with _open(location) as store:
        _require_namespace(store, namespace)
        report = maintenance.collect_garbage(
            store,
            namespace=namespace,
            older_than=age,
            grace=grace_period,
            max_size=max_size,
            vacuum=vacuum,
            dry_run=dry_run,
        )
    if as_json:
        totals = {"disk_bytes_before": report.disk_bytes_before, "disk_bytes_after": report.disk_bytes_after}
        _print_json({**dataclasses.asdict(report), **totals})
        return
    _print_gc_report(report, grace=_duration_text(grace))


_INDEX_SPACE = {
    "returned": "the space of what gc deletes goes back to the file system",
    "rebuilt": "rebuilt with VACUUM",
    "kept-until-rebuilt": "freed pages stay inside index.db for later writes: this store predates auto_vacuum; run "
    "casstore gc --vacuum once to convert it",
    "reused-after-autovacuum": "PostgreSQL: autovacuum makes the deleted rows' space reusable; it is not given back",
    "vacuumed": "PostgreSQL: VACUUM made the deleted rows' space reusable",
}


def _print_gc_report(report: maintenance.GarbageReport, *, grace: str) -> None:
    dry_run = report.dry_run
    verb = "would" if dry_run else "did"
    after = "after (estimated)" if dry_run else "after"
    click.echo(
        f"{'dry run: ' if dry_run else ''}gc {verb} forget {report.writes_forgotten} writes "
        f"and {report.offloads_forgotten} offloads"
    )
    click.echo(f"  blobs deleted       {report.blobs_deleted} ({format_bytes(report.blob_bytes_freed)})")
    click.echo(f"  stray files removed {report.stray_files_removed} ({format_bytes(report.stray_bytes_freed)})")
    click.echo(
        f"  index               {format_bytes(report.index_bytes_before)} before, "
        f"{format_bytes(report.index_bytes_after)} {after}  ({_INDEX_SPACE[report.index_space]})"
    )
    click.echo(
        f"  blobs kept outside  {format_bytes(report.blob_bytes_before)} before, "
        f"{format_bytes(report.blob_bytes_after)} {after}"
    )
    click.echo(
        f"  on disk             {format_bytes(report.disk_bytes_before)} before, "
        f"{format_bytes(report.disk_bytes_after)} {after}"
    )
    if report.blobs_waiting:
        click.echo(
            f"  waiting             {report.blobs_waiting} unreferenced blobs "
            f"({format_bytes(report.waiting_bytes)}) seen "
            f"within the grace period ({grace}): collectable from {_when(report.collectable_from)}"
        )
    if report.max_size is not None:
        needed = report.needed_bytes_after or 0
        line = (
            f"  max size            {format_bytes(report.max_size)}: the blobs still needed take "
            f"{format_bytes(needed)} "
            f"({format_bytes(report.needed_bytes_before or 0)} before)"
        )
        if report.over_max_size:
            line += (
                f"; {format_bytes(report.over_max_size)} over, as forgotten blobs wait out the grace period "
                f"(run gc again after it, or pass a shorter --grace)"
            )
        click.echo(line)


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


@cli.command()
@click.option(
    "--root",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="The local store to copy from.",
)
@click.option("--to-index", "to_index", metavar="URL", required=True, help="The shared store's PostgreSQL URL.")
@click.option(
    "--to-blobs", "to_blobs", metavar="URL", required=True, help="The shared store's object-store URL (s3://...)."
)
@_json_option
def copy(root: Path, to_index: str, to_blobs: str, as_json: bool) -> None:
    """
    Copy a local store into a shared one: every blob, write and offload, with namespaces and times. Run again, it adds
    nothing; interrupted and run again, it finishes. Exit status 1 if a source blob could not be read (the rest is
    copied).
    """
    with (
        _open(StoreLocation(root=root)) as source,
        _open(StoreLocation(index_url=to_index, blob_url=to_blobs)) as target,
    ):
        report = copy_store(source, target)
    if as_json:
        _print_json({**dataclasses.asdict(report), "complete": report.complete})
    else:
        click.echo(
            f"copied {report.blobs_copied} blobs ({format_bytes(report.blob_bytes_copied)}), "
            f"{report.writes_copied} writes, {report.offloads_copied} offloads and {report.compactions_copied} "
            f"compactions from {root} to {target.repository.description}"
        )
        for digest in report.unreadable_blobs:
            click.echo(f"not copied  blob {digest}: it does not verify in the source (see casstore verify)")
        if report.writes_skipped:
            click.echo(f"not copied  {report.writes_skipped} writes of those blobs")
    if not report.complete:
        sys.exit(EXIT_FAILURE)


@cli.command("relocate-blobs")
@click.option(
    "--index", metavar="URL", default=None, help=f"The shared store's PostgreSQL URL (default: ${INDEX_URL_VARIABLE})."
)
@click.option("--blobs", metavar="URL", required=True, help="Where its blob objects are now, such as s3://bucket/new.")
def relocate_blobs(index: str | None, blobs: str) -> None:
    """Record that a shared store's blobs were moved (copied with their marker) to a new location."""
    index = index or os.environ.get(INDEX_URL_VARIABLE) or None
    if index is None:
        raise click.UsageError(f"relocate-blobs needs the shared store's --index URL (or ${INDEX_URL_VARIABLE}).")
    try:
        before = relocate_shared_blobs(index_url=index, blob_url=blobs)
    except ValueError as error:  # a URL refused, or a location without this store's marker and blobs
        raise click.ClickException(str(error)) from error
    click.echo(f"The store's blobs are now recorded at {blobs} (they were at {before}).")


@cli.command()
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
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path(DEFAULT_REPORT_NAME),
    show_default=True,
    help="The HTML file to write (replaced whole if it exists).",
)
def report(location: StoreLocation, namespace: str | None, since: timedelta | None, output: Path) -> None:
    """Write the history as one self-contained HTML page of charts and tables, and print its path."""
    period = since
    _check_report_path(output)
    with _open(location) as store:
        written = write_report(store, path=output, namespace=namespace, since=period)
    if written.figures.empty:
        click.echo("nothing matches: the page says so", err=True)
    click.echo(f"wrote {output} ({format_bytes(written.size)}): open it in a browser")


def _check_report_path(path: Path) -> None:
    folder = path.parent if str(path.parent) else Path(".")
    if path.is_dir() or not folder.is_dir():
        raise click.ClickException(
            f"cannot write the report to {path}: {'it is a folder' if path.is_dir() else f'no folder {folder}'}; "
            f"choose another file."
        )


@cli.command("datasette-metadata")
def datasette_metadata() -> None:
    """
    Print Datasette metadata for an index.db: every table, view and column described, and the docs' questions as
    canned queries (casstore datasette-metadata > metadata.json; datasette index.db -m metadata.json).
    """
    _print_json(metadata())


@cli.command()
@_location_options
@click.option("--steps", type=click.IntRange(min=1), default=None, help="Agent steps to run (default: 80).")
@click.option(
    "--corpus",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Folder the agent explores (default: the installed casstore package's source).",
)
@click.option(
    "--namespace",
    type=NAMESPACE,
    help="The run's namespace (default: demo- and the UTC time, so each run is its own).",
)
@click.option(
    "--report",
    "report_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path(DEFAULT_REPORT_NAME),
    show_default=True,
    help="Where to write the HTML report of the run (as casstore report --namespace writes it).",
)
@_json_option
def demo(
    location: StoreLocation,
    steps: int | None,
    corpus: Path | None,
    namespace: str | None,
    report_path: Path,
    as_json: bool,
) -> None:
    """Run a scripted coding agent over a real folder with the store and compactor, summarize, and write a report."""
    from casstore.demo import (  # the agent stack, only now
        DemoArgumentError,
        print_progress,
        print_summary,
        run_demo,
        shared_store_flags,
    )

    _check_report_path(report_path)  # before the run, not after it
    try:  # a mistake in the arguments is one line; an error in the run itself stays a traceback
        summary = run_demo(
            root=location.root,
            shared=location.shared,
            steps=steps,
            corpus=corpus,
            namespace=namespace,
            progress=None if as_json else print_progress,
        )
    except DemoArgumentError as error:
        raise click.ClickException(str(error)) from error
    # A run that offloaded nothing created no local store (the summary says so): there is no history to report.
    report_written: Path | None = None
    if summary.shared or (Path(summary.root) / INDEX_FILE_NAME).exists():
        with _open(location) as store:
            report_written = write_report(store, path=report_path, namespace=summary.namespace).path
    if as_json:
        _print_json({**summary.to_json(), "report": None if report_written is None else str(report_written)})
    else:
        named_by_variables = location.shared == (os.environ.get(INDEX_URL_VARIABLE), os.environ.get(BLOB_URL_VARIABLE))
        flags = None if location.shared is None or named_by_variables else shared_store_flags(*location.shared)
        print_summary(summary, store_flags=flags)
        if report_written is not None:
            click.echo(f"The run's report, charts and tables: {report_written} (open it in a browser)")


def main() -> None:
    """Entry point of the `casstore` console script."""
    # The connection pool logs each failed attempt to reconnect; the command reports the failure itself, in one line.
    logging.getLogger("psycopg.pool").addHandler(logging.NullHandler())
    cli.main()


if __name__ == "__main__":
    main()
