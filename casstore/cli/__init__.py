"""
The `casstore` command: a thin layer over the library (`casstore.history`, `casstore.maintenance`, `casstore.demo`).

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

The commands live in one module per group, each a thin layer over the library: `history` (stats, log, cat, report,
datasette-metadata), `maintenance` (verify, search-index, gc), `copying` (copy, relocate-blobs) and `demo`; `options`
holds what the command line means and `output` what the commands print.
"""

import logging
import sqlite3
import sys
from collections.abc import Sequence
from typing import Any

import click

from casstore.cli import copying, demo, history, maintenance
from casstore.cli.options import (
    DEFAULT_ROOT,
    DURATION,
    LINE_RANGE,
    NAMESPACE,
    REFERENCE,
    SIZE,
    SIZE_UNITS,
    StoreLocation,
    parse_duration,
    parse_size,
    resolve_location,
)
from casstore.cli.output import EXIT_FAILURE, EXIT_ORPHANS_ONLY, EXIT_USAGE, _when
from casstore.errors import CasStoreError

__all__ = [
    "DEFAULT_ROOT",
    "DURATION",
    "EXIT_FAILURE",
    "EXIT_ORPHANS_ONLY",
    "EXIT_USAGE",
    "LINE_RANGE",
    "NAMESPACE",
    "REFERENCE",
    "SIZE",
    "SIZE_UNITS",
    "StoreLocation",
    "_when",
    "cli",
    "main",
    "parse_duration",
    "parse_size",
    "resolve_location",
]


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


@click.group(cls=_OneLineErrors)
@click.version_option(package_name="casstore")
def cli() -> None:
    """Inspect, verify and clean up a casstore tool-result store, or run the demo agent."""


for _command in (
    history.stats,
    history.log,
    history.cat,
    maintenance.verify,
    maintenance.search_index,
    maintenance.gc,
    copying.copy,
    copying.relocate_blobs,
    history.report,
    history.datasette_metadata,
    demo.demo,
):
    cli.add_command(_command)


def main() -> None:
    """Entry point of the `casstore` console script."""
    # The connection pool logs each failed attempt to reconnect; the command reports the failure itself, in one line.
    logging.getLogger("psycopg.pool").addHandler(logging.NullHandler())
    cli.main()
