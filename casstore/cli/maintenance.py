"""The commands that check and clean up a store: `verify`, `search-index` and `gc`."""

import dataclasses
import sys
from datetime import timedelta

import click

from casstore.cli.options import (
    DURATION,
    NAMESPACE,
    SIZE,
    StoreLocation,
    _json_option,
    _location_options,
    _open,
    _require_namespace,
)
from casstore.cli.output import EXIT_FAILURE, EXIT_ORPHANS_ONLY, _duration_text, _print_json, _ProgressBar, _when
from casstore.errors import CasStoreError
from casstore.history.figures import format_bytes
from casstore.maintenance import checks as maintenance


@click.command()
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


def _print_verify_report(report: maintenance.VerifyReport) -> None:
    click.echo(f"{report.blobs_checked} blobs checked")
    for digest, message in report.corrupt:
        click.echo(f"corrupt  {digest}  {message}")
    for digest in report.missing:
        click.echo(f"missing  {digest}")
    for namespace, key in report.dangling_writes:
        click.echo(f"no blob  for key {key!r}  (written in namespace {namespace!r})")
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


@click.command("search-index")
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
                    indexed, skipped = store.repository.search.build(rebuild=rebuild, progress=bar.update)
            else:
                indexed, skipped = store.repository.search.build(rebuild=rebuild)
        except CasStoreError as error:
            raise click.ClickException(str(error)) from error
        size = store.repository.search.index_bytes()
    if as_json:
        _print_json({"indexed": indexed, "skipped": skipped, "index_bytes": size})
        return
    click.echo(f"indexed {indexed} results ({skipped} skipped: binary content that is not text, or unreadable)")
    click.echo(
        f"search index {format_bytes(size)}; writes of a store opened with search_index=True are indexed as they come"
    )


@click.command()
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
    help="Rebuild the index afterwards even if nothing was deleted: SQLite's VACUUM (which gc runs anyway once it "
    "deleted a blob; writers wait until it ends); on a shared store VACUUM FULL of the tables that hold content, so "
    "deleted rows' bytes leave PostgreSQL's files (readers and writers wait).",
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
    else:
        _print_gc_report(report, grace=_duration_text(grace))
    if report.old_pages_held:
        # Deleted means deleted: gc did its part, but the promise does not hold yet, and a script must be able to tell.
        raise click.ClickException(
            "another connection is still reading an older state of the index, so index.db keeps the pages it reads, "
            "deleted content included, until that read ends; end it (or wait for it), then run casstore gc again"
        )


_INDEX_SPACE = {
    "returned": "the space of what gc deletes goes back to the file system",
    "rebuilt": "rebuilt with VACUUM: no byte of what gc deleted stays in index.db",
    "kept-until-rebuilt": "freed pages stay inside index.db for later writes: this store predates auto_vacuum; run "
    "casstore gc --vacuum once to convert it",
    "reused-after-autovacuum": "PostgreSQL: autovacuum makes the deleted rows' space reusable; it is not given back",
    "vacuumed": "PostgreSQL: VACUUM FULL rewrote the tables that hold content without the deleted rows",
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
    if report.dictionaries_deleted:
        click.echo(f"  dictionaries deleted {report.dictionaries_deleted}")
    if report.bases_kept or report.dictionaries_kept:
        click.echo(
            f"  kept while needed   {report.bases_kept} deleted results kept as delta bases, "
            f"{report.dictionaries_kept} dictionaries trained on deleted results, used by kept blobs"
        )
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
