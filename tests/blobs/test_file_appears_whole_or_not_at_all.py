"""
A blob file appears under its final name whole or not at all: a writer killed halfway leaves nothing partial there.

A forked child writes a large blob with the file write hooked: it writes half the frame, tells the parent through a
pipe, and blocks. The parent looks while it is paused, then kills it with SIGKILL and looks again. Deterministic: the
pause is at the same byte every run, and nothing waits on a clock.
"""

import os
import random
import select
import signal
from pathlib import Path
from types import TracebackType
from typing import IO, Any, NoReturn

import pytest

from casstore import ContentAddressedToolResultStore, ReferenceNotFoundError
from casstore.maintenance.checks import verify
from tests.helpers import blake3_hex, create_store

CONTENT = random.Random(20261201).randbytes(256 * 1024)  # incompressible: the frame is about as large
DIGEST = blake3_hex(CONTENT)
REFERENCE = f"blake3/bin/{DIGEST[:2]}/{DIGEST[2:]}.bin"
PAUSED = b"paused\n"
PAUSE_TIMEOUT_SECONDS = 60.0


class _HalfThenBlock:
    """Stands in for the blob file `os.fdopen(fd, "wb")` returns: writes half of the first write, then blocks."""

    def __init__(self, file: IO[bytes], *, ready_fd: int, hold_fd: int) -> None:
        self._file = file
        self._ready_fd = ready_fd
        self._hold_fd = hold_fd

    def __enter__(self) -> "_HalfThenBlock":
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self._file.close()

    def fileno(self) -> int:
        return self._file.fileno()

    def flush(self) -> None:
        self._file.flush()

    def write(self, data: bytes) -> int:
        self._file.write(data[: len(data) // 2])
        self._file.flush()  # the half is in the file itself, where a reader of the file's name would see it
        os.write(self._ready_fd, PAUSED)
        os.read(self._hold_fd, 1)  # blocks: the parent never writes; it kills this process, or closes the pipe
        os._exit(3)  # released without a kill (the parent gave up): end without finishing the write


def _paused_writer(root: Path, *, ready_fd: int, hold_fd: int) -> NoReturn:
    """The child: write CONTENT with the blob file's bytes hooked. Never returns."""
    try:
        real_fdopen = os.fdopen

        def fdopen(fd: int, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
            file = real_fdopen(fd, mode, *args, **kwargs)
            return _HalfThenBlock(file, ready_fd=ready_fd, hold_fd=hold_fd) if mode == "wb" else file

        # `casstore.blobs.files` writes a blob file through `os.fdopen(fd, "wb")`; hooked in this process only, the
        # forked child.
        os.fdopen = fdopen
        with ContentAddressedToolResultStore(root, inline_max=0) as store:
            reference = store.write(key="large.bin", content=CONTENT)
        os.write(ready_fd, f"wrote {reference}\n".encode())  # the hook never let it get here
    finally:
        os._exit(4)


def _fork_paused_writer(root: Path) -> tuple[int, int, int]:
    """:returns: The child's pid, the read end of its 'paused' pipe, and the write end of the pipe it blocks on."""
    ready_read, ready_write = os.pipe()
    hold_read, hold_write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(ready_read)
        os.close(hold_write)
        _paused_writer(root, ready_fd=ready_write, hold_fd=hold_read)
    os.close(ready_write)
    os.close(hold_read)
    return pid, ready_read, hold_write


def _await_pause(pid: int, ready_fd: int) -> None:
    readable, _, _ = select.select([ready_fd], [], [], PAUSE_TIMEOUT_SECONDS)
    message = os.read(ready_fd, 4096) if readable else b""
    if message != PAUSED:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        pytest.fail(f"the child did not pause in the middle of the blob file's bytes; it said {message!r}")


def _files_in_fanout(root: Path) -> dict[str, int]:
    fanout = root / "blobs" / DIGEST[:2]
    return {path.name: path.stat().st_size for path in fanout.iterdir()} if fanout.is_dir() else {}


def test_a_writer_killed_halfway_through_a_blob_file_leaves_nothing_under_its_name(store_root: Path) -> None:
    create_store(store_root)  # the schema exists before the child runs
    final = store_root / "blobs" / DIGEST[:2] / f"{DIGEST[2:]}.zst"
    pid, ready_fd, hold_fd = _fork_paused_writer(store_root)
    try:
        _await_pause(pid, ready_fd)

        # Paused with half the frame written: the bytes are somewhere, but not under the blob's name.
        while_paused = _files_in_fanout(store_root)
        assert final.name not in while_paused, f"a partial blob file is under its final name: {while_paused}"
        with pytest.raises(FileNotFoundError):
            final.open("rb")
        partial = [name for name, size in while_paused.items() if name.startswith(".tmp-") and size > 0]
        assert partial, f"the child paused, but no half-written temporary file is there: {while_paused}"
        with ContentAddressedToolResultStore(store_root, inline_max=0) as reader, pytest.raises(ReferenceNotFoundError):
            reader.read(REFERENCE)
    finally:
        os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        os.close(ready_fd)
        os.close(hold_fd)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, f"the child ended on its own: {status}"

    # Killed: still nothing under the final name, and the store opens and knows nothing of the write.
    assert final.name not in _files_in_fanout(store_root)
    with ContentAddressedToolResultStore(store_root, inline_max=0) as store:
        with pytest.raises(ReferenceNotFoundError):
            store.read(REFERENCE)
        report = verify(store)
        assert report.ok and report.blobs_checked == 0, report
        # The same content written again is stored whole and reads back.
        assert store.write(key="large.bin", content=CONTENT) == REFERENCE
        assert store.read(REFERENCE) == CONTENT
        assert final.is_file()
        assert verify(store).ok
    with ContentAddressedToolResultStore(store_root, inline_max=0) as reopened:
        assert reopened.read(REFERENCE) == CONTENT
