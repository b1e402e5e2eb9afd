"""
Writing a file a person named (`casstore report -o FILE`). A regular file is replaced whole or not at all, as the
file the links leading to it name, with its permissions, and in place when it has other hard links; anything else
(a pipe, a terminal, a device, this process's own standard output or error) is written into, never replaced.
"""

import contextlib
import errno
import os
import secrets
import stat
import sys
from pathlib import Path

__all__ = ["is_standard_stream", "write_file"]


def is_standard_stream(path: Path) -> bool:
    """:returns: Whether `path` is where this process's standard output or error goes (`/dev/stdout`, say)."""
    return _standard_descriptor(path) is not None


def write_file(path: Path, data: bytes) -> None:
    """
    Write `data` to `path` as this module's docstring says.

    :raises OSError: If it cannot be written (no folder, a folder, no permission, a pipe no process reads); a regular
        file is then as it was, and no temporary file is left.
    """
    descriptor = _standard_descriptor(path)
    if descriptor is not None:
        # Renaming over it would replace the file the shell opened (a log appended to, say); writing to the
        # descriptor keeps its mode and position.
        (sys.stdout if descriptor == 1 else sys.stderr).flush()
        _write_all(descriptor, data)
        return
    try:
        status: os.stat_result | None = os.stat(path)  # follows links: what a write would reach
    except FileNotFoundError:
        status = None
    if status is not None and not stat.S_ISREG(status.st_mode):
        _write_into(path, data)
        return
    if status is not None and status.st_nlink > 1:
        # Its other names would keep the old content if a new file took this one's place.
        with open(path, "wb") as stream:
            stream.write(data)
        return
    if status is not None and not os.access(path, os.W_OK):
        raise PermissionError(errno.EACCES, "the file is not writable", str(path))
    _replace(Path(os.path.realpath(path)), data, None if status is None else stat.S_IMODE(status.st_mode))


def _standard_descriptor(path: Path) -> int | None:
    try:
        status = os.stat(path)
    except OSError:
        return None
    for descriptor in (1, 2):
        with contextlib.suppress(OSError):
            own = os.fstat(descriptor)
            if (own.st_dev, own.st_ino) == (status.st_dev, status.st_ino):
                return descriptor
    return None


def _write_into(path: Path, data: bytes) -> None:
    # Not blocking on the open: a pipe no process reads gives ENXIO at once instead of waiting forever.
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as error:
        if error.errno == errno.ENXIO:
            raise OSError(errno.ENXIO, "no process reads from it; start the reader first", str(path)) from None
        raise
    try:
        os.set_blocking(descriptor, True)
        _write_all(descriptor, data)
    finally:
        os.close(descriptor)


def _write_all(descriptor: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(descriptor, view) :]


def _replace(target: Path, data: bytes, mode: int | None) -> None:
    # The temporary file gets a name no one can guess and is made only if nothing is there (not through a link
    # planted at it); a new file gets the mode the umask gives, an existing one keeps its own.
    temporary = target.with_name(f".{target.name}.{secrets.token_hex(8)}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
    try:
        try:
            _write_all(descriptor, data)
            if mode is not None:
                os.fchmod(descriptor, mode)
        finally:
            os.close(descriptor)
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            temporary.unlink()
        raise
