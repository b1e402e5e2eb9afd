"""Deterministic content and forked writer processes for the reliability tests."""

import hashlib
import json
import os
import select
import signal
import sys
import time
import traceback
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from casstore import ContentAddressedToolResultStore
from casstore.maintenance.checks import collect_garbage

WORDS = Path(__file__).read_text().split()


def content_for(seed: int, number: int) -> str | bytes:
    """
    Result `number` of a stream: small and large text, repeats of earlier results, and binary parts.

    The same (seed, number) always gives the same content, so a parent process can check what a killed child wrote.
    """
    if number % 5 == 4 and number > 0:
        return content_for(seed, number // 3)  # a repeat of an earlier result
    digest = hashlib.sha256(f"{seed}:{number}".encode()).digest()
    kind = digest[0] % 4
    if kind == 3:
        return digest * (1 + digest[1] * 40)  # binary, up to ~330 KB, poorly compressible at block level
    length = (40, 4_000, 120_000)[kind] + digest[2] * 50
    words = [WORDS[(digest[3] + i * 7 + number) % len(WORDS)] for i in range(length // 6)]
    return " ".join(words)


def fork_writer(
    root: Path,
    *,
    seed: int,
    count: int,
    namespace: str = "writer",
    gc_every: int = 0,
    inline_max: int = 8192,
) -> tuple[int, int]:
    """
    Fork a child that writes `count` results and reports `number reference` on a pipe after each write returns.

    :returns: The child's pid and the read end of the pipe.
    """
    pid, pipe_end = _fork_with_pipe()
    if pid:
        return pid, pipe_end
    status = 1
    try:
        _write_stream(
            root, pipe_end, seed=seed, count=count, namespace=namespace, gc_every=gc_every, inline_max=inline_max
        )
        status = 0
    except BaseException:
        traceback.print_exc()  # the test then fails with "ended on its own", and this says why
        sys.stderr.flush()
    finally:
        os._exit(status)


def _write_stream(
    root: Path, report: int, *, seed: int, count: int, namespace: str, gc_every: int, inline_max: int
) -> None:
    with ContentAddressedToolResultStore(root, namespace=namespace, inline_max=inline_max) as store:
        for number in range(count):
            reference = store.write(key=f"{number}_tool_call.txt", content=content_for(seed, number))
            os.write(report, f"{number} {reference}\n".encode())
            if gc_every and number % gc_every == gc_every - 1:
                with ContentAddressedToolResultStore(root, namespace="churn", inline_max=inline_max) as churn:
                    for other in range(max(0, number - gc_every), number):
                        churn.write(key="churn.txt", content=content_for(seed + 1, other))
                    collect_garbage(churn, namespace="churn", grace=timedelta(0))


def read_reports(read_end: int) -> list[tuple[int, str]]:
    """Everything a child reported before it ended; a last line cut by a kill is dropped."""
    chunks = []
    while chunk := os.read(read_end, 1 << 16):
        chunks.append(chunk)
    os.close(read_end)
    lines = b"".join(chunks).decode().split("\n")
    return [(int(number), reference) for number, reference in (line.split(" ") for line in lines[:-1])]


def kill_after(pid: int, seconds: float, sleep: Callable[[float], None]) -> int:
    """SIGKILL `pid` after `seconds`, reap it, and return its wait status."""
    sleep(seconds)
    os.kill(pid, signal.SIGKILL)
    return os.waitpid(pid, 0)[1]


def fork_job(job: Callable[[], dict[str, Any]]) -> tuple[int, int]:
    """
    Run `job` in a forked child, which reports its JSON result (or its traceback) on a pipe.

    :returns: The child's pid and the read end of the pipe, for `collect`.
    """
    pid, pipe_end = _fork_with_pipe()
    if pid:
        return pid, pipe_end
    try:
        outcome = job()
    except BaseException:
        outcome = {"crashed": traceback.format_exc()}
    os.write(pipe_end, json.dumps(outcome).encode())
    os._exit(0)


def _fork_with_pipe() -> tuple[int, int]:
    """:returns: In the parent, the child's pid and the pipe's read end; in the child, 0 and the pipe's write end."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    os.close(write_end if pid else read_end)
    return pid, read_end if pid else write_end


def collect(pid: int, read_end: int, *, timeout: float = 120.0) -> dict[str, Any]:
    """:returns: What the child of `fork_job` reported; fails the test if it crashed or hung past `timeout`."""
    chunks = []
    deadline = time.monotonic() + timeout
    while True:
        ready, _, _ = select.select([read_end], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            os.close(read_end)
            raise AssertionError(f"the forked child did not finish within {timeout} s")
        chunk = os.read(read_end, 1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(read_end)
    os.waitpid(pid, 0)
    outcome: dict[str, Any] = json.loads(b"".join(chunks))
    assert "crashed" not in outcome, outcome.get("crashed")
    return outcome


def run_forked(job: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Run `job` in a forked child (so resource limits and crashes stay there) and return what it reported."""
    return collect(*fork_job(job))


def forget_hints(store: ContentAddressedToolResultStore) -> None:
    """
    Make a store forget which blobs it stored or confirmed lately, as if `LAST_SEEN_RESOLUTION` had passed, so its
    next write of known content looks the blob up again (instead of sleeping for the resolution).
    """
    store.repository._core.blobs._hints._known.clear()
