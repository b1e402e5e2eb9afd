"""
What the demo checks of its store: that it can be written, before the run (`unwritable_reason`), and which writes
failed during it (`counting_failed_writes`), so that a run says why nothing was offloaded instead of guessing.
"""

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from casstore.disk import file_in_the_way

# The compactors' modules that write to the store: a write that fails leaves its result or steps in the conversation
# and is logged as a warning carrying the `error`, which is how the demo learns of it.
WRITING_LOGGERS = (
    "casstore.compactor.result_offload",
    "casstore.compactor.step_archive",
    "casstore.compactor.dedup_compactor",
)


class FailedWrites(logging.Handler):
    """Counts the compactors' warnings that the store failed a write (`WRITING_LOGGERS`), keeping the first error."""

    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)
        self.count = 0
        self.first: str | None = None

    def emit(self, record: logging.LogRecord) -> None:
        error = getattr(record, "error", None)
        if isinstance(error, BaseException):
            self.count += 1
            self.first = self.first or f"{type(error).__name__}: {error}"


@contextmanager
def counting_failed_writes() -> Iterator[FailedWrites]:
    """:returns: While the block runs, the count of the store's failed writes the compactors report, and the first."""
    failed = FailedWrites()
    loggers = [logging.getLogger(name) for name in WRITING_LOGGERS]
    for logger in loggers:
        logger.addHandler(failed)
    try:
        yield failed
    finally:
        for logger in loggers:
            logger.removeHandler(failed)


def unwritable_reason(root: Path) -> str | None:
    """
    :returns: Why no store can be made or written in `root`, as a one-line error that says what to do, or None: it
        is a file or under one, or the folder that holds it (or would) is read-only (read-only media, or this process
        may not write it). An existing store this process may not write, in a writable folder, its repository finds
        read-only when opened.
    """
    for path in (root, *root.parents):
        if not path.is_symlink():
            continue
        try:
            os.stat(path)
        except FileNotFoundError:
            what = "it is" if path == root else f"{path} is"
            return (
                f"The demo cannot make its store in {root}: {what} a link to {os.readlink(path)}, which does not "
                f"exist; make that folder, or choose another with --root."
            )
        except OSError as error:  # a loop of links, say
            return f"The demo cannot make its store in {root}: {path}: {error.strerror}; choose a folder with --root."
    in_the_way = file_in_the_way(root)
    if in_the_way is not None:
        return f"The demo cannot make its store in {root}: {in_the_way} is a file; choose a folder with --root."
    existing = root.absolute()
    while not existing.exists() and existing != existing.parent:  # the folder that would hold it
        existing = existing.parent
    if not os.access(existing, os.W_OK | os.X_OK):
        return (
            f"The demo cannot write its store in {root}: {existing} is read-only (read-only media, or this process "
            f"may not write it); choose a writable folder with --root, or make that one writable."
        )
    return None
