"""
A child process for the learned encodings' kill tests: it writes (or collects) with one step made to stall, tells the
parent it reached that step by creating a marker file, and waits there to be killed with SIGKILL.

    python -m tests.learned_crash_child <root> <mode> <marker> <stall at>

`mode` is `training` (stall after a dictionary was trained, before it is stored), `storing-dictionary` (inside the
transaction that stores it), `delta` (inside the transaction of a write whose blob is a delta, its rows written) or
`gc` (inside gc's transaction, after it deleted a blob). Writers print `number<TAB>reference` once each write has
returned, flushed, so the parent knows what was reported before the kill.
"""

import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from casstore.blobs import learning
from tests.learned_results import listing, record

TRAIN_AFTER = 24


def content_for(number: int) -> str:
    """Write number `number` of a writer child: a new version of a listing (even) or a small record (odd)."""
    return listing(number // 2, seed=number % 3) if number % 2 == 0 else record(number)


def _stall(marker: Path) -> None:
    marker.write_text("here")
    time.sleep(120)
    raise SystemExit("not killed")


def _stall_on(owner: Any, name: str, *, marker: Path, at: int, when: Any = None) -> None:
    real = getattr(owner, name)
    calls = [0]

    def wrapped(*arguments: Any, **keywords: Any) -> Any:
        result = real(*arguments, **keywords)
        if when is None or when(*arguments, **keywords):
            calls[0] += 1
            if calls[0] >= at:
                _stall(marker)
        return result

    setattr(owner, name, wrapped)


def main() -> None:
    root, mode, marker, at = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3]), int(sys.argv[4])
    learning.TRAIN_AFTER = TRAIN_AFTER
    from casstore import ContentAddressedToolResultStore
    from casstore.blobs.catalog import BlobCatalog
    from casstore.blobs.collection import BlobCollection
    from casstore.maintenance.checks import collect_garbage

    if mode == "training":
        _stall_on(learning.Learner, "train", marker=marker, at=at)
    elif mode == "storing-dictionary":
        _stall_on(BlobCatalog, "record_dictionary", marker=marker, at=at)
    elif mode == "delta":
        _stall_on(
            BlobCatalog, "put", marker=marker, at=at, when=lambda _self, _work, staged, **_: staged.encoding == "delta"
        )
    elif mode == "gc":
        _stall_on(BlobCollection, "delete_if_collectable", marker=marker, at=at)
        with ContentAddressedToolResultStore(root) as store:
            collect_garbage(store, namespace="alice", grace=timedelta(0))
        return
    with ContentAddressedToolResultStore(root, namespace="writer") as store:
        for number in range(10_000):
            reference = store.write(
                key=f"{number}_tool{number % 2}_call_{number:016x}.txt", content=content_for(number)
            )
            print(f"{number}\t{reference}", flush=True)


if __name__ == "__main__":
    main()
