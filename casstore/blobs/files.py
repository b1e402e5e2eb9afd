"""
The directory of blob files: `<root>/blobs/<2 hex>/<62 hex>.zst`, written atomically, never followed through links.

Every operation goes through a file descriptor of the `blobs` directory opened once, then opens the fan-out folder and
the file with `O_NOFOLLOW`. A symlink planted anywhere inside the store (a fan-out folder or a blob file pointing
outside it) is refused instead of followed, so no read or write ever leaves the store.
"""

import contextlib
import errno
import os
import secrets
import stat
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from casstore.errors import CasStoreError, StoreClosedError
from casstore.references import is_digest

_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_BLOB_SUFFIX = ".zst"
TEMPORARY_PREFIX = ".tmp-"


_WRITE_ATTEMPTS = 5


class _TemporaryFileRemovedError(FileNotFoundError):
    """The temporary file of a blob write vanished before its rename."""


class UnsafeBlobPathError(OSError):
    """A blob path inside the store is a symlink or not a regular file or folder."""


@dataclass(frozen=True, slots=True)
class BlobFile:
    """A file found in the blob directory: a blob (with its digest) or a leftover temporary file (digest `None`)."""

    digest: str | None
    size: int
    mtime: float
    fanout: str
    name: str


class BlobDirectory:
    """File operations on the blob directory, all relative to one open directory descriptor."""

    # What the index's `blobs.stored_in` says of a blob kept here.
    stored_in = "file"
    # A file can vanish under its row (a person, a crash of gc between removing the file and committing), so a write
    # that finds the row still checks the file; see `BlobStore.confirm`.
    rows_imply_presence = False

    def __init__(self, path: Path, *, durable: bool, lazy: bool = False) -> None:
        """
        Open (creating if needed) the blob directory.

        :param path: The `blobs` folder.
        :param durable: Fsync each blob file and its folder before the write is reported done.
        :param lazy: If the folder does not exist, create it (and its parents) only when the first blob file is
            written; until then every blob reads as missing and there are no files to list.
        :raises CasStoreError: If `path` is a symlink or not a folder.
        """
        self.path = path
        self.durable = durable
        self._fd: int | None = None
        self._closed = False
        self._opening = threading.Lock()
        if lazy and not os.path.lexists(path):
            return
        try:
            self._open(create=True)
        except OSError as error:
            raise CasStoreError(
                f"Cannot open the blob folder {path} ({error.strerror}). It must be a real folder, not a symlink."
            ) from error

    def _open(self, *, create: bool) -> int:
        """
        :returns: The folder's descriptor, opened now if need be (the folder created first if `create`).
        :raises FileNotFoundError: If the folder does not exist and not `create`: no blob file was written yet.
        :raises UnsafeBlobPathError: If it is a symlink or not a folder.
        """
        with self._opening:
            if self._closed:
                raise StoreClosedError("This casstore store is closed; open a new ContentAddressedToolResultStore.")
            if self._fd is not None:
                return self._fd
            if create and not os.path.lexists(self.path):
                self.path.mkdir(parents=True, exist_ok=True)
                if self.durable:
                    _fsync_directory(self.path.parent)
            self._fd = _open_no_follow(str(self.path), _DIRECTORY_FLAGS, dir_fd=None)
            return self._fd

    @property
    def _root(self) -> int:
        fd = self._fd
        return fd if fd is not None else self._open(create=False)

    def close(self) -> None:
        """Close the directory descriptor."""
        with self._opening:
            self._closed = True
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def read(self, digest: str) -> bytes:
        """
        :returns: The bytes of the blob file for `digest`.
        :raises FileNotFoundError: If there is no such file.
        :raises UnsafeBlobPathError: If the file or its folder is a symlink or not a regular file.
        """
        fanout_fd = self._open_fanout(digest, create=False)
        try:
            fd = _open_no_follow(_file_name(digest), os.O_RDONLY, dir_fd=fanout_fd)
        finally:
            os.close(fanout_fd)
        with os.fdopen(fd, "rb") as file:
            if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
                raise UnsafeBlobPathError(errno.EINVAL, "not a regular file", _file_name(digest))
            return file.read()

    def write(self, digest: str, frame: bytes) -> None:
        """
        Write the blob file for `digest` atomically: a temporary file in the same folder, then a rename over the name.

        A crash leaves either no file, the whole file, or a `.tmp-` file that `gc` removes later. If `gc` removes the
        temporary file before the rename (possible only with a grace period shorter than the write), the write starts
        over.
        """
        for _attempt in range(_WRITE_ATTEMPTS - 1):
            with contextlib.suppress(_TemporaryFileRemovedError):
                return self._write_once(digest, frame)
        return self._write_once(digest, frame)

    def _write_once(self, digest: str, frame: bytes) -> None:
        fanout_fd = self._open_fanout(digest, create=True)
        try:
            temporary = f"{TEMPORARY_PREFIX}{secrets.token_hex(8)}"
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open(temporary, flags, 0o644, dir_fd=fanout_fd)
            try:
                with os.fdopen(fd, "wb") as file:
                    file.write(frame)
                    if self.durable:
                        file.flush()
                        os.fsync(file.fileno())
                try:
                    os.replace(temporary, _file_name(digest), src_dir_fd=fanout_fd, dst_dir_fd=fanout_fd)
                except FileNotFoundError as error:
                    raise _TemporaryFileRemovedError(str(error)) from error
            except BaseException:
                _unlink_quietly(temporary, dir_fd=fanout_fd)
                raise
            if self.durable:
                os.fsync(fanout_fd)
        finally:
            os.close(fanout_fd)

    def exists(self, digest: str) -> bool:
        """:returns: Whether a regular blob file for `digest` is in place."""
        if not is_digest(digest):
            return False  # a digest damaged by hand names no file of this folder
        try:
            fanout_fd = self._open_fanout(digest, create=False)
        except OSError:
            return False
        try:
            status = os.stat(_file_name(digest), dir_fd=fanout_fd, follow_symlinks=False)
        except OSError:
            return False
        finally:
            os.close(fanout_fd)
        return stat.S_ISREG(status.st_mode)

    def remove(self, digest: str | None, *, fanout: str | None = None, name: str | None = None) -> None:
        """Remove the blob file for `digest`, or a file by fan-out folder and name; a missing file is not an error."""
        if digest is not None and not is_digest(digest):
            return  # a digest damaged by hand names no file of this folder
        fanout = fanout or (digest[:2] if digest else None)
        name = name or (_file_name(digest) if digest else None)
        if fanout is None or name is None:
            raise ValueError("Name a digest, or a fan-out folder and a file name.")
        try:
            fanout_fd = _open_no_follow(fanout, _DIRECTORY_FLAGS, dir_fd=self._root)
        except FileNotFoundError:
            return
        try:
            _unlink_quietly(name, dir_fd=fanout_fd)
            if self.durable:
                os.fsync(fanout_fd)
        finally:
            os.close(fanout_fd)

    def replace(self, digest: str, frame: bytes) -> None:
        """Write the blob file for `digest` whatever is there (every write of a file replaces it atomically)."""
        self.write(digest, frame)

    def remove_stray(self, blob_file: BlobFile) -> None:
        """Remove a file `files` listed (a blob file or a leftover temporary file); a missing file is not an error."""
        self.remove(None, fanout=blob_file.fanout, name=blob_file.name)

    def files(self) -> Iterator[BlobFile]:
        """Yield every blob file and leftover temporary file; anything else in the folder is left alone."""
        try:
            root = self._root
        except FileNotFoundError:
            return  # no blob file was ever written
        for fanout in sorted(os.listdir(root)):
            if len(fanout) != 2 or not _is_hex(fanout):
                continue
            try:
                fanout_fd = _open_no_follow(fanout, _DIRECTORY_FLAGS, dir_fd=root)
            except OSError:
                continue
            try:
                yield from _files_in(fanout, fanout_fd)
            finally:
                os.close(fanout_fd)

    def _open_fanout(self, digest: str, *, create: bool) -> int:
        if not is_digest(digest):
            # A digest damaged by hand in the index ('..', '/', NUL): never a path, nor a way out of the folder.
            raise ValueError(f"A blob digest is 64 lowercase hex digits, not {digest!r}.")
        fanout = digest[:2]
        root = self._fd if self._fd is not None else self._open(create=create)
        try:
            return _open_no_follow(fanout, _DIRECTORY_FLAGS, dir_fd=root)
        except FileNotFoundError:
            if not create:
                raise
        with contextlib.suppress(FileExistsError):  # another writer made it first
            os.mkdir(fanout, mode=0o755, dir_fd=root)
            if self.durable:  # the new folder's entry must survive power loss as much as the file in it
                os.fsync(root)
        return _open_no_follow(fanout, _DIRECTORY_FLAGS, dir_fd=root)


def _files_in(fanout: str, fanout_fd: int) -> Iterator[BlobFile]:
    for name in sorted(os.listdir(fanout_fd)):
        try:
            status = os.stat(name, dir_fd=fanout_fd, follow_symlinks=False)
        except FileNotFoundError:
            continue  # removed while we looked
        if not stat.S_ISREG(status.st_mode):
            continue
        digest = _digest_of(fanout, name)
        if digest is None and not name.startswith(TEMPORARY_PREFIX):
            continue
        yield BlobFile(digest=digest, size=status.st_size, mtime=status.st_mtime, fanout=fanout, name=name)


def _fsync_directory(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _file_name(digest: str) -> str:
    return f"{digest[2:]}{_BLOB_SUFFIX}"


def _digest_of(fanout: str, name: str) -> str | None:
    stem = name.removesuffix(_BLOB_SUFFIX)
    if stem == name or len(stem) != 62 or not _is_hex(stem):
        return None
    return fanout + stem


def _is_hex(text: str) -> bool:
    return all(character in "0123456789abcdef" for character in text)


def _open_no_follow(name: str, flags: int, *, dir_fd: int | None) -> int:
    try:
        return os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.ENOTDIR):
            raise UnsafeBlobPathError(
                error.errno, "a symlink or not a folder where a blob path should be", name
            ) from error
        raise


def _unlink_quietly(name: str, *, dir_fd: int) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(name, dir_fd=dir_fd)
