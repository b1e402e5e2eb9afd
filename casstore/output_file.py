"""
Writing a file a person named (`casstore report -o FILE`, `casstore cat -o FILE`). The file is opened first and
everything after is decided on what was opened, never on the name again, so nothing can be swapped in between:

- this process's own descriptors (`/dev/stdout`, `/dev/stderr`, `/dev/fd/N`) are written to as they are (an
  appended log keeps its content);
- a pipe, a terminal or a device is written into (a pipe no process reads is an error at once, not a wait);
- an existing regular file is written in place, through the links that lead to it, keeping its owner, mode and
  other hard links (the content is whole in memory before the file is opened, so only a failing disk can cut it);
- a new file is made under a name no one can guess and renamed into place, so it appears whole or not at all.
"""

import contextlib
import errno
import fcntl
import os
import re
import secrets
import stat
import sys
from collections.abc import Collection
from pathlib import Path

__all__ = ["is_standard_stream", "write_file"]

_OWN_DESCRIPTOR = re.compile(r"/(?:dev/fd|proc/self/fd)/(\d+)")
_NAMED_STREAMS = {"/dev/stdout": 1, "/dev/stderr": 2}
_NO_HARD_LINKS = {errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EMLINK}


def is_standard_stream(path: Path) -> bool:
    """:returns: Whether `path` is where this process's standard output or error goes (`/dev/stdout`, say)."""
    if _own_descriptor(path) in (1, 2):
        return True
    try:
        named = _identity(os.stat(path))
    except OSError:
        return False
    return any(_descriptor_identity(descriptor) == named for descriptor in (1, 2))


def write_file(path: Path, data: bytes, *, never: Collection[tuple[int, int]] = ()) -> None:
    """
    Write `data` to `path` as this module's docstring says.

    :param never: Files never to write, by `(st_dev, st_ino)`: a store's own files, whatever name leads to them.
    :raises OSError: If it cannot be written (no folder, a folder, no permission, a pipe no process reads, one of
        `never`).
    """
    descriptor = _own_descriptor(path)
    if descriptor is not None:
        _write_to_own(descriptor, data, never)
        return
    try:
        # Not blocking: a pipe no process reads gives ENXIO at once. Not creating: a new file is made whole below.
        opened = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        _make(Path(os.path.realpath(path)), data)  # no file, or a link to none: the file it names
        return
    except OSError as error:
        if error.errno == errno.ENXIO:
            raise OSError(errno.ENXIO, "no process reads from it (or it is a socket)", str(path)) from None
        raise
    try:
        status = os.fstat(opened)
        if _identity(status) in never:
            raise OSError(errno.EPERM, "it is one of the store's own files", str(path))
        if stat.S_ISREG(status.st_mode):
            # A file this process has open already (a log the shell appends to, by any name) is written through the
            # descriptor it has: opened again, it would be written from its start.
            held = _held_descriptor(_identity(status), besides=opened)
            if held is not None:
                _write_to_own(held, data, never)
                return
            os.ftruncate(opened, 0)
        os.set_blocking(opened, True)
        _write_all(opened, data)
    finally:
        os.close(opened)


def _write_to_own(descriptor: int, data: bytes, never: Collection[tuple[int, int]]) -> None:
    if _descriptor_identity(descriptor) in never:
        raise OSError(errno.EPERM, "it is one of the store's own files", f"/dev/fd/{descriptor}")
    stream = {1: sys.stdout, 2: sys.stderr}.get(descriptor)
    if stream is not None:
        stream.flush()  # what was printed before the page comes before it
    _write_all(descriptor, data)


def _identity(status: os.stat_result) -> tuple[int, int]:
    return (status.st_dev, status.st_ino)


def _descriptor_identity(descriptor: int) -> tuple[int, int] | None:
    try:
        return _identity(os.fstat(descriptor))
    except OSError:
        return None


def _held_descriptor(identity: tuple[int, int], *, besides: int) -> int | None:
    try:
        listed = [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:  # no /proc: the standard streams at least
        listed = [1, 2]
    for descriptor in sorted(listed):
        if descriptor != besides and _descriptor_identity(descriptor) == identity:
            with contextlib.suppress(OSError):
                if fcntl.fcntl(descriptor, fcntl.F_GETFL) & os.O_ACCMODE in (os.O_WRONLY, os.O_RDWR):
                    return descriptor
    return None


def _own_descriptor(path: Path) -> int | None:
    # Opened again by name, a descriptor of this process would be another open file, at offset 0, not appending.
    text = os.path.normpath(str(path))
    named = _NAMED_STREAMS.get(text)
    if named is not None:
        return named
    found = _OWN_DESCRIPTOR.fullmatch(text)
    return int(found.group(1)) if found else None


def _write_all(descriptor: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(descriptor, view) :]


def _make(target: Path, data: bytes) -> None:
    # Made only if nothing is there (not through a link planted at its name), with the mode the umask gives.
    temporary = target.with_name(f".{target.name}.{secrets.token_hex(8)}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
    try:
        try:
            _write_all(descriptor, data)
        finally:
            os.close(descriptor)
        try:
            os.link(temporary, target)  # never over a file made meanwhile: that one is not ours to replace
        except OSError as error:
            if error.errno not in _NO_HARD_LINKS:
                raise
            os.replace(temporary, target)  # a file system without hard links
            return
    except BaseException:
        with contextlib.suppress(OSError):
            temporary.unlink()
        raise
    temporary.unlink()
