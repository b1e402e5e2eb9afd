"""The `casstore` command (being split into one module per command group; all of it is in `options` for now)."""

from casstore.cli.options import (
    DURATION,
    EXIT_FAILURE,
    EXIT_ORPHANS_ONLY,
    EXIT_USAGE,
    SIZE,
    SIZE_UNITS,
    StoreLocation,
    _when,
    cli,
    main,
    parse_duration,
    parse_size,
    resolve_location,
)

__all__ = [
    "DURATION",
    "EXIT_FAILURE",
    "EXIT_ORPHANS_ONLY",
    "EXIT_USAGE",
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
