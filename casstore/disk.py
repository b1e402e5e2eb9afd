"""A local store's folder on disk: how much it takes (counted as `du` counts it), and a file in the way of making it."""

import os
from pathlib import Path


def disk_usage(root: Path) -> int:
    """:returns: Bytes the folder occupies on disk (allocated blocks, as `du` counts), every file below it included."""
    total = 0
    for directory, _, files in os.walk(root):
        for name in files:
            try:
                total += os.lstat(os.path.join(directory, name)).st_blocks * 512
            except FileNotFoundError:
                continue
    return total


def local_footprint(root: Path) -> tuple[int, int]:
    """
    :returns: Bytes on disk of a local store's index (`index.db` and its write-ahead log) and of its `blobs/`.

    `index.db-shm` is not counted: SQLite makes it for as long as a connection is open (the one that asks this
    question, too) and removes it with the last, so counting it would make the store look larger than `du` finds it
    once nothing has it open. The write-ahead log is counted: while a writer holds the store open, it holds data.
    """
    index = sum(disk_usage_of_file(root / name) for name in ("index.db", "index.db-wal"))
    return index, disk_usage(root) - index - disk_usage_of_file(root / "index.db-shm")


def disk_usage_of_file(path: Path) -> int:
    """:returns: Bytes one file occupies on disk (0 if it does not exist)."""
    try:
        return os.lstat(path).st_blocks * 512
    except FileNotFoundError:
        return 0


def file_in_the_way(folder: Path) -> Path | None:
    """:returns: The file that stands where `folder`, or a folder above it, is (or would be made); None if none does."""
    return next((path for path in (folder, *folder.absolute().parents) if path.exists() and not path.is_dir()), None)
