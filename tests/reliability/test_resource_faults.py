"""Resource faults and large or odd content: clear errors, a consistent index, and bounded memory."""

import json
import os
import resource
import signal
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from haystack.dataclasses import ChatMessage, ToolCall
from haystack.token_counters import ApproximateTokenCounter

from casstore import ContentAddressedToolResultStore, StorageError
from casstore.compactor import DedupOffloadCompactor
from casstore.maintenance.checks import verify
from tests.helpers import blob_files, create_store, snapshot
from tests.reliability_helpers import run_forked


def _limit_file_size(limit: int) -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # get EFBIG instead of being killed
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))


def _conversation(result: str) -> list[ChatMessage]:
    call = ToolCall(tool_name="read_file", arguments={"path": "big.log"}, id="call_1")
    return [
        ChatMessage.from_user("read it"),
        ChatMessage.from_assistant(tool_calls=[call]),
        ChatMessage.from_tool(tool_result=result, origin=call),
        ChatMessage.from_assistant(tool_calls=[ToolCall(tool_name="read_file", arguments={}, id="call_2")]),
        ChatMessage.from_tool(tool_result="ok", origin=ToolCall(tool_name="read_file", arguments={}, id="call_2")),
    ]


def test_a_blob_file_too_large_for_the_file_size_limit(store_root: Path) -> None:
    big = os.urandom(1 << 20).hex()
    with ContentAddressedToolResultStore(store_root, inline_max=0) as store:
        kept = store.write(key="kept.txt", content="written before the fault\n" * 100)
    before = snapshot(store_root)

    def job() -> dict[str, Any]:
        _limit_file_size(256 * 1024)
        with ContentAddressedToolResultStore(store_root, inline_max=0) as store:
            try:
                store.write(key="big.log", content=big)
                error = None
            except StorageError as raised:
                error = str(raised)
            compacted = DedupOffloadCompactor(store, min_tokens=10).compact(
                _conversation(big), target_tokens=100, token_counter=ApproximateTokenCounter()
            )
        return {"error": error, "compacted": compacted is not None}

    outcome = run_forked(job)
    assert outcome["error"] and "Nothing of this write was recorded" in outcome["error"]
    assert outcome["compacted"] is False  # the result stayed in the conversation
    assert snapshot(store_root) == before  # no row, no blob, no temporary file left behind
    with ContentAddressedToolResultStore(store_root, inline_max=0) as store:
        assert store.read(kept) == "written before the fault\n" * 100
        reference = store.write(key="big.log", content=big)  # without the limit it works
        assert store.read(reference) == big
        assert verify(store).ok


def test_the_index_refusing_a_write(store_root: Path) -> None:
    with ContentAddressedToolResultStore(store_root) as store:
        store.write(key="first.txt", content="first")
    sizes = {path.name: path.stat().st_size for path in store_root.iterdir() if path.is_file()}

    def job() -> dict[str, Any]:
        _limit_file_size(max(sizes.values()))  # SQLite cannot grow index.db or its WAL any more
        with ContentAddressedToolResultStore(store_root) as store:
            errors = []
            for number in range(50):
                try:
                    store.write(key=f"{number}.txt", content=f"result {number}\n" * 300)
                except StorageError as raised:
                    errors.append(str(raised))
            # The same store, connection and all, works again once space is back: no transaction was left open.
            resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
            recovered = store.read(store.write(key="after.txt", content="after the fault")) == "after the fault"
        return {"errors": len(errors), "recovered": recovered}

    outcome = run_forked(job)
    assert outcome["errors"] > 0 and outcome["recovered"]
    with ContentAddressedToolResultStore(store_root) as store:
        assert verify(store).ok
        with closing(sqlite3.connect(store_root / "index.db")) as connection:
            written = connection.execute("SELECT count(*) FROM writes").fetchone()[0]
        assert written == 1 + 50 - outcome["errors"] + 1


@pytest.mark.parametrize(
    "content",
    ["", b"", b"\x00" * 100_000, "\x00" * 1000, "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 " * 5000, "\u200d\u0301\ufeff" * 2000, "e\u0301" * 9999],
    ids=["empty text", "empty bytes", "NUL bytes", "NUL text", "astral", "joiners and marks", "combining"],
)
def test_odd_content_round_trips(store: ContentAddressedToolResultStore, content: str | bytes) -> None:
    reference = store.write(key="odd.txt", content=content)
    assert store.read(reference) == content
    assert type(store.read(reference)) is type(content)


LARGE_PROBE = """
import json, os, resource, sys
from casstore import ContentAddressedToolResultStore
size = int(sys.argv[2])
content = os.urandom(size // 2).hex()  # text, compressible about 2x
with open("/proc/self/statm") as statm:  # resident now, not the peak of making the content
    baseline = int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
with ContentAddressedToolResultStore(sys.argv[1]) as store:
    reference = store.write(key="huge.json", content=content)
    after_write = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    equal = store.read(reference) == content
    after_read = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"equal": equal, "baseline": baseline, "write_peak": after_write, "read_peak": after_read}))
"""
LARGE_SIZE = 200 * 1024 * 1024


@pytest.mark.slow
def test_a_200_mb_result_round_trips_in_bounded_memory(store_root: Path) -> None:
    completed = subprocess.run(
        [sys.executable, "-c", LARGE_PROBE, str(store_root), str(LARGE_SIZE)],
        capture_output=True,
        text=True,
        check=True,
    )
    figures = json.loads(completed.stdout)
    assert figures["equal"]
    # Beyond the content itself (which the caller holds), the store needs its UTF-8 bytes and the frame to write,
    # and the frame, the bytes and the decoded text to read.
    write_extra = (figures["write_peak"] - figures["baseline"]) / LARGE_SIZE
    read_extra = (figures["read_peak"] - figures["baseline"]) / LARGE_SIZE
    print(f"200 MB result: peak RSS above the content itself: write {write_extra:.2f}x, read {read_extra:.2f}x")
    assert write_extra <= 2.0
    assert read_extra <= 3.0
    assert len(blob_files(store_root)) == 1


def test_the_parts_of_one_result_are_stored_together_or_not_at_all(store_root: Path) -> None:
    create_store(store_root)
    before = snapshot(store_root)
    small, large = "a small first part\n" * 10, os.urandom(1 << 20)

    def job() -> dict[str, Any]:
        _limit_file_size(256 * 1024)
        with ContentAddressedToolResultStore(store_root, inline_max=1024) as store:
            parts = [store.prepare_write(key="0.txt", content=small), store.prepare_write(key="1.png", content=large)]
            try:
                store.write_prepared_many(parts)
            except StorageError:
                return {"refused": True}
        return {"refused": False}

    assert run_forked(job) == {"refused": True}
    assert snapshot(store_root) == before  # not even the small part that fitted
