"""How much a folder takes on disk, counted as `du` counts it."""

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
    """:returns: Bytes on disk of a local store's index (`index.db` and its write-ahead log) and of its `blobs/`."""
    index = sum(disk_usage_of_file(root / name) for name in ("index.db", "index.db-wal", "index.db-shm"))
    return index, disk_usage(root) - index


def disk_usage_of_file(path: Path) -> int:
    """:returns: Bytes one file occupies on disk (0 if it does not exist)."""
    try:
        return os.lstat(path).st_blocks * 512
    except FileNotFoundError:
        return 0
