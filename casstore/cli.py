"""
The `casstore` command: a thin layer over `casstore.history`, `casstore.maintenance` and `casstore.demo`.

Every subcommand takes `--root DIR` (default `$CASSTORE_ROOT`, else `./.casstore`). Bad input (a missing root, a
malformed reference, an unknown namespace, a bad duration) ends with one line on stderr and exit status 1 (2 for a
usage error), never a traceback.
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
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import click

from casstore import history, maintenance
from casstore.copying import copy_store
from casstore.errors import CasStoreError
from casstore.references import parse_reference
from casstore.shared_store import BLOB_URL_VARIABLE, INDEX_URL_VARIABLE, SharedToolResultStore
from casstore.store import INDEX_FILE_NAME, ContentAddressedToolResultStore, RepositoryToolResultStore

DEFAULT_ROOT = ".casstore"
_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*(s|m|h|d|w)", re.ASCII)
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
# `verify`'s exit status when nothing is damaged but orphans were found (1 means damaged; click uses 2 for usage).
_ORPHANS_ONLY = 3

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
            sys.exit(1)
        except click.exceptions.Abort:
            click.echo("casstore: aborted", err=True)
            sys.exit(1)


def parse_duration(text: str) -> timedelta:
    """
    :param text: A duration such as `30d`, `12h`, `90m`, `45s` or `2w`.
    :returns: The duration.
    :raises click.ClickException: If `text` is not such a duration.
    """
    match = _DURATION.fullmatch(text.strip())
    try:
        if match is not None:
            return timedelta(**{_UNITS[match[2]]: float(match[1])})
    except OverflowError:
        pass
    raise click.ClickException(
        f"{text!r} is not a duration; use a number and a unit, such as 30d, 12h, 90m or 45s (at most 999999999d)."
    )


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
        if not (root / INDEX_FILE_NAME).is_file():
            raise click.ClickException(
                f"no casstore store at {root} (no {INDEX_FILE_NAME}); pass --root, or set CASSTORE_ROOT (or "
                f"{INDEX_URL_VARIABLE} and {BLOB_URL_VARIABLE} for a shared store)."
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
    cells = [[_cell(row.get(column)) for column in columns] for row in rows]
    widths = [max(len(column), *(len(line[i]) for line in cells)) for i, column in enumerate(columns)]
    click.echo("  " + "  ".join(column.ljust(width) for column, width in zip(columns, widths, strict=True)))
    for line in cells:
        click.echo("  " + "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)))


def _cell(value: Any) -> str:
    return "-" if value is None else str(value)


def _ratio(value: float | None) -> str:
    """A ratio as `2.45x`, or `-` when there is nothing to divide by (nothing stored yet)."""
    return "-" if value is None else f"{value:.2f}x"


def _bytes(count: int) -> str:
    size = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


@click.group(cls=_OneLineErrors)
@click.version_option(package_name="casstore")
def cli() -> None:
    """Inspect, verify and clean up a casstore tool-result store, or run the demo agent."""


@cli.command()
@_location_options
@click.option("--namespace", help="Only this namespace's rows in the per-namespace and per-tool tables.")
@_json_option
def stats(location: StoreLocation, namespace: str | None, as_json: bool) -> None:
    """Size, dedup and compression, and writes and offloads per namespace and tool."""
    with _open(location) as store:
        _require_namespace(store, namespace)
        figures = history.stats(store, namespace=namespace)
        where = _describe(location, store)
    if as_json:
        _print_json(dataclasses.asdict(figures))
        return
    click.echo(f"store {where}")
    click.echo(f"  blobs            {figures.blobs}")
    click.echo(f"  writes           {figures.writes}")
    click.echo(f"  logical bytes    {_bytes(figures.logical_bytes)}  (everything written)")
    click.echo(f"  unique bytes     {_bytes(figures.unique_bytes)}  (each distinct result once)")
    click.echo(f"  stored bytes     {_bytes(figures.stored_bytes)}  (compressed)")
    if location.shared is None:
        click.echo(f"  bytes on disk    {_bytes(figures.disk_bytes)}  (index and blob files, as du counts)")
    else:
        click.echo(f"  index bytes      {_bytes(figures.index_bytes)}  (casstore's tables in PostgreSQL)")
        click.echo(f"  object bytes     {_bytes(figures.blob_bytes)}  (the objects under the prefix)")
    click.echo(f"  dedup ratio      {_ratio(figures.dedup_ratio)}")
    click.echo(f"  compression      {_ratio(figures.compression_ratio)}")
    click.echo("namespaces")
    _table(figures.namespaces, ["namespace", "writes", "distinct_results", "logical_bytes", "offloads", "saved_tokens"])
    click.echo("offloads per tool")
    _table(figures.tools, ["namespace", "tool_name", "offloads", "original_tokens", "saved_tokens"])


@cli.command()
@_location_options
@click.option("--namespace", help="Only this namespace.")
@click.option("--tool", help="Only this tool.")
@click.option("--since", help="Only offloads within this period, such as 2h or 7d.")
@click.option("--limit", type=click.IntRange(min=1), default=50, show_default=True, help="At most this many lines.")
@_json_option
def log(
    location: StoreLocation, namespace: str | None, tool: str | None, since: str | None, limit: int, as_json: bool
) -> None:
    """The offload history, newest first: one line per offloaded tool result."""
    period = parse_duration(since) if since is not None else None
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
        click.echo(
            f"{entry.offloaded_at}  {entry.namespace}  {entry.tool_name}  call={entry.tool_call_id or '-'}  "
            f"saved {entry.saved_tokens}/{entry.original_tokens} tokens  {' '.join(entry.references)}"
        )
    if not entries:
        click.echo("no offloads match", err=True)


@cli.command()
@click.argument("reference")
@_location_options
@click.option(
    "--namespace",
    help="The namespace the reference was written in (default: the first namespace, by name, that holds it).",
)
@click.option("--lines", "line_range", help="Only lines A to B (1-based, inclusive), such as 10:20, 10: or :20.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Write the content to a file.")
def cat(
    reference: str, location: StoreLocation, namespace: str | None, line_range: str | None, output: Path | None
) -> None:
    """Print the content behind REFERENCE (binary only with -o or when stdout is not a terminal)."""
    parse_reference(reference)
    lines = _parse_line_range(line_range) if line_range is not None else None
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


def _parse_line_range(line_range: str) -> tuple[int, int | None]:
    match = re.fullmatch(r"(\d*):(\d*)", line_range.strip())
    first = int(match[1]) if match is not None and match[1] else 1
    last = int(match[2]) if match is not None and match[2] else None
    if match is None or first < 1 or (last is not None and last < first):
        raise click.ClickException(
            f"--lines takes A:B with 1-based line numbers and A <= B, such as 10:20; got {line_range!r}."
        )
    return first, last


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
        sys.exit(1)
    if not report.clean:
        sys.exit(_ORPHANS_ONLY)


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
    if report.stray_files:
        click.echo(
            f"orphan   {report.stray_files} blob or temporary files ({_bytes(report.stray_bytes)}) no row points at"
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
        click.echo("damaged: see 'Recovery' in the casstore README")
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
        if not store.repository.searchable:
            raise click.ClickException(
                "this store has no search index: only a local store (--root) has one; the shared store's search tool "
                "answers that it cannot search."
            )
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
    click.echo(f"search index {_bytes(size)}; writes of a store opened with search_index=True are indexed as they come")


@cli.command()
@_location_options
@click.option("--namespace", help="Forget every write and offload of this namespace.")
@click.option("--older-than", help="Forget writes and offloads older than this, such as 30d.")
@click.option("--grace", default="1h", show_default=True, help="Keep blobs seen, and files modified, this recently.")
@click.option("--dry-run", is_flag=True, help="Say what would go; change nothing.")
@_json_option
def gc(
    location: StoreLocation, namespace: str | None, older_than: str | None, grace: str, dry_run: bool, as_json: bool
) -> None:
    """Forget old writes or a namespace, then delete blobs nothing references and stray files."""
    age = parse_duration(older_than) if older_than is not None else None
    grace_period = parse_duration(grace)
    with _open(location) as store:
        _require_namespace(store, namespace)
        report = maintenance.collect_garbage(
            store, namespace=namespace, older_than=age, grace=grace_period, dry_run=dry_run
        )
    if as_json:
        _print_json(dataclasses.asdict(report))
        return
    verb = "would" if dry_run else "did"
    click.echo(
        f"{'dry run: ' if dry_run else ''}gc {verb} forget {report.writes_forgotten} writes "
        f"and {report.offloads_forgotten} offloads"
    )
    click.echo(f"  blobs deleted       {report.blobs_deleted} ({_bytes(report.blob_bytes_freed)})")
    click.echo(f"  stray files removed {report.stray_files_removed} ({_bytes(report.stray_bytes_freed)})")
    click.echo(
        f"  index               {_bytes(report.index_bytes_before)} before, {_bytes(report.index_bytes_after)} after"
    )
    click.echo(
        f"  blobs kept outside  {_bytes(report.blob_bytes_before)} before, {_bytes(report.blob_bytes_after)} after"
    )


@cli.command()
@click.option(
    "--root",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
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
            f"copied {report.blobs_copied} blobs ({_bytes(report.blob_bytes_copied)}), {report.writes_copied} writes "
            f"and {report.offloads_copied} offloads from {root} to {target.repository.description}"
        )
        for digest in report.unreadable_blobs:
            click.echo(f"not copied  blob {digest}: it does not verify in the source (see casstore verify)")
        if report.writes_skipped:
            click.echo(f"not copied  {report.writes_skipped} writes of those blobs")
    if not report.complete:
        sys.exit(1)


@cli.command()
@_location_options
@click.option("--steps", type=click.IntRange(min=1), default=None, help="Agent steps to run (default: 80).")
@click.option(
    "--corpus",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Folder the agent explores (default: the installed casstore package's source).",
)
@click.option("--namespace", help="The run's namespace (default: demo- and the UTC time, so each run is its own).")
@_json_option
def demo(location: StoreLocation, steps: int | None, corpus: Path | None, namespace: str | None, as_json: bool) -> None:
    """Run a scripted coding agent over a real folder with the store and compactor, then summarize."""
    from casstore.demo import DemoArgumentError, print_progress, print_summary, run_demo  # the agent stack, only now

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
    if as_json:
        ratios = {"dedup_ratio": summary.dedup_ratio, "compression_ratio": summary.compression_ratio}
        _print_json({**dataclasses.asdict(summary), **ratios})
    else:
        print_summary(summary)


def main() -> None:
    """Entry point of the `casstore` console script."""
    # The connection pool logs each failed attempt to reconnect; the command reports the failure itself, in one line.
    logging.getLogger("psycopg.pool").addHandler(logging.NullHandler())
    cli.main()


if __name__ == "__main__":
    main()
