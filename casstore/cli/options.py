"""
What the `casstore` command line means: durations, sizes, references, namespaces and line ranges, checked as it is
parsed; which store `--root`, `--index` and `--blobs` name, and opening it; the options every command shares.
"""

import contextlib
import functools
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeAlias, TypeVar

import click

from casstore.disk import file_in_the_way
from casstore.errors import InvalidReferenceError
from casstore.history import stats as history
from casstore.namespaces import check_namespace
from casstore.references import parse_reference
from casstore.stores.local import INDEX_FILE_NAME, ContentAddressedToolResultStore, RepositoryToolResultStore
from casstore.stores.shared import BLOB_URL_VARIABLE, INDEX_URL_VARIABLE, SharedToolResultStore

DEFAULT_ROOT = ".casstore"
_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*(s|m|h|d|w)", re.ASCII)
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


F = TypeVar("F", bound=Callable[..., Any])


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


class _OutputFile(click.Path):
    """A file a command writes: not a folder, nor a name that ends in a separator (which says "a folder" too)."""

    def __init__(self) -> None:
        super().__init__(dir_okay=False, path_type=Path)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        # `Path` drops a trailing separator: `-o out/` would write a file named `out`.
        if isinstance(value, str) and value.endswith(("/", os.sep)):
            self.fail(f"{value!r} ends with a separator, which names a folder; name a file (in that folder) instead.")
        return super().convert(value, param, ctx)


DURATION, LINE_RANGE, REFERENCE, NAMESPACE, SIZE = _Duration(), _LineRange(), _Reference(), _Namespace(), _Size()
OUTPUT_FILE = _OutputFile()


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
            in_the_way = file_in_the_way(root)
            if in_the_way is not None:
                where = "a file" if in_the_way == root else f"under the file {in_the_way}"
                raise click.ClickException(
                    f"{root} is {where}, not a store's folder: pass --root with a store's folder."
                )
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


def _check_output_path(path: Path, location: StoreLocation) -> None:
    folder = path.parent if str(path.parent) else Path(".")
    if path.is_dir() or not folder.is_dir():
        raise click.ClickException(
            f"cannot write to {path}: {'it is a folder' if path.is_dir() else f'no folder {folder}'}; "
            f"choose another file."
        )
    if location.root is not None and _inside_store(path, location.root):
        raise click.ClickException(
            f"cannot write to {path}: it is inside the store at {location.root} (or one of its files), which that "
            f"would damage; choose a file outside it."
        )


def _store_files(location: StoreLocation) -> set[tuple[int, int]]:
    """:returns: The local store's index files by `(st_dev, st_ino)`, which no output may be written over."""
    return set() if location.root is None else _index_files(location.root)


def _index_files(root: Path) -> set[tuple[int, int]]:
    found = set()
    for name in (INDEX_FILE_NAME, f"{INDEX_FILE_NAME}-wal", f"{INDEX_FILE_NAME}-shm"):
        with contextlib.suppress(OSError):
            status = os.stat(root / name)
            found.add((status.st_dev, status.st_ino))
    return found


def _inside_store(path: Path, root: Path) -> bool:
    """:returns: Whether `path` is in the store's folder, or another name (a link) of one of its files."""
    store = Path(os.path.realpath(root))
    written = Path(os.path.realpath(path))
    if written == store or store in written.parents:
        return True
    try:
        status = os.stat(path)
    except OSError:
        return False
    return (status.st_dev, status.st_ino) in _index_files(store)
