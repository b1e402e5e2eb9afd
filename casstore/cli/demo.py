"""The `demo` command: the scripted agent over a real folder, with its summary and report."""

import os
from pathlib import Path

import click

from casstore.cli.options import (
    NAMESPACE,
    OUTPUT_FILE,
    StoreLocation,
    _check_output_path,
    _json_option,
    _location_options,
    _open,
    _store_files,
)
from casstore.cli.output import _print_json
from casstore.history.report import DEFAULT_REPORT_NAME, write_report
from casstore.stores.local import INDEX_FILE_NAME
from casstore.stores.shared import BLOB_URL_VARIABLE, INDEX_URL_VARIABLE


@click.command()
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
    type=OUTPUT_FILE,
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
    from casstore.demo.session import (  # the agent stack, only now
        DemoArgumentError,
        print_progress,
        print_summary,
        run_demo,
        shared_store_flags,
    )

    _check_output_path(report_path, location)  # before the run, not after it
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
    # A run that offloaded nothing created no local store (the summary says so): there is no history to report. Nor
    # is there when the store failed writes: what it holds is not the run, and writing the report may fail alike.
    report_written: Path | None = None
    if not summary.failed_write_attempts and (summary.shared or (Path(summary.root) / INDEX_FILE_NAME).exists()):
        with _open(location) as store:
            never = _store_files(location)
            report_written = write_report(store, path=report_path, namespace=summary.namespace, never=never).path
    if as_json:
        _print_json({**summary.to_json(), "report": None if report_written is None else str(report_written)})
    else:
        named_by_variables = location.shared == (os.environ.get(INDEX_URL_VARIABLE), os.environ.get(BLOB_URL_VARIABLE))
        flags = None if location.shared is None or named_by_variables else shared_store_flags(*location.shared)
        print_summary(summary, store_flags=flags)
        if report_written is not None:
            click.echo(f"The run's report, charts and tables: {report_written} (open it in a browser)")
    if summary.failed_write_attempts:
        raise click.ClickException(
            f"the store failed {summary.failed_write_attempts} attempts to write, so no report was written; the first "
            f"error: {summary.first_failure or 'not known'}"
        )
