"""The commands that move a store's contents: `copy` (a local store into a shared one) and `relocate-blobs`."""

import dataclasses
import os
import sys
from pathlib import Path

import click

from casstore.cli.options import StoreLocation, _json_option, _open
from casstore.cli.output import EXIT_FAILURE, _print_json
from casstore.history.figures import format_bytes
from casstore.maintenance.copying import copy_store
from casstore.repository.shared import relocate_blobs as relocate_shared_blobs
from casstore.stores.shared import INDEX_URL_VARIABLE


@click.command()
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
        try:
            report = copy_store(source, target)
        except ValueError as error:  # a target that hashes otherwise (its dedup scope): refused before any copy
            raise click.ClickException(str(error)) from error
    if as_json:
        _print_json({**dataclasses.asdict(report), "complete": report.complete})
    else:
        click.echo(
            f"copied {report.blobs_copied} blobs ({format_bytes(report.blob_bytes_copied)}), "
            f"{report.writes_copied} writes, {report.offloads_copied} offloads, {report.compactions_copied} "
            f"compactions and {report.archives_copied} archives from {root} to {target.repository.description}"
        )
        if report.dedup_scope_adopted is not None:
            click.echo(
                f"The target had no blobs and now hashes as the source does: dedup scope "
                f"{report.dedup_scope_adopted!r} and its secret "
                f"(open it with dedup_scope={report.dedup_scope_adopted!r} or None)."
            )
        for digest in report.unreadable_blobs:
            click.echo(f"not copied  blob {digest}: it does not verify in the source (see casstore verify)")
        if report.writes_skipped:
            click.echo(f"not copied  {report.writes_skipped} writes of those blobs")
    if not report.complete:
        sys.exit(EXIT_FAILURE)


@click.command("relocate-blobs")
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
