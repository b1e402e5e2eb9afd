"""
Peak memory of each store while it writes the whole trace, each in a child process of its own.

A child imports both stores (so both pay the same imports), opens the packed trace's index, notes its resident set
size, then writes every result of the trace into a fresh store, chunk by chunk, exactly as the timed run does. It
reports the kernel's peak resident set size over the write phase (`VmHWM`, reset through `/proc/self/clear_refs`
just before the first write; `ru_maxrss` where that is not possible), which sees SQLite's and zstd's C allocations
that `tracemalloc` would miss, and how much that peak rose above the resident size before the first write. The trace's
content is read from the pack with plain reads, not mapped, so page cache never counts as the child's memory.

Run as `python -m benchmarks.memory INDEX_JSON STORE ROOT [INLINE_MAX]`; prints one JSON line.
"""

import gc
import json
import resource
import subprocess
import sys
from pathlib import Path


def _status_kib(field: str) -> int:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _reset_peak() -> bool:
    """Reset the kernel's peak RSS (`VmHWM`) of this process; Linux only. :returns: Whether it worked."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return _status_kib("VmHWM") > 0


def child(
    index_path: Path, store_name: str, root: Path, inline_max: int | None, chunk_writes: int = 256
) -> dict[str, int | bool]:
    """
    Write the whole trace into one store and measure this process's memory.

    :returns: `peak_rss_bytes`, `rss_before_bytes` and `growth_bytes` (peak minus the size before writing).
    """
    from benchmarks.measure import close_store, open_store
    from benchmarks.trace import PackedTrace

    trace = PackedTrace.open_index(index_path)
    store = open_store(store_name, root, inline_max=inline_max)
    gc.collect()
    # Forget the peak of the set-up (imports, the index's JSON) so the peak below is the write phase's own.
    reset = _reset_peak()
    before_kib = _status_kib("VmRSS")
    try:
        for start in range(0, len(trace), chunk_writes):
            for key, content in trace.load(start, min(len(trace), start + chunk_writes)):
                store.write(key=key, content=content)
    finally:
        close_store(store)
    peak_kib = _status_kib("VmHWM") if reset else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "peak_rss_bytes": peak_kib * 1024,
        "peak_is_write_phase": reset,
        "rss_before_bytes": before_kib * 1024,
        "growth_bytes": max(0, peak_kib - before_kib) * 1024,
    }


def measure(index_path: Path, store_name: str, root: Path, inline_max: int | None = None) -> dict[str, int | bool]:
    """
    Run `child` in a new Python process and return what it measured.

    :raises RuntimeError: If the child fails.
    """
    command = [sys.executable, "-m", "benchmarks.memory", str(index_path), store_name, str(root)]
    if inline_max is not None:
        command.append(str(inline_max))
    completed = subprocess.run(
        command, capture_output=True, text=True, check=False, cwd=Path(__file__).resolve().parent.parent
    )
    if completed.returncode != 0:
        raise RuntimeError(f"The memory child for {store_name} failed:\n{completed.stderr[-2000:]}")
    result: dict[str, int | bool] = json.loads(completed.stdout.strip().splitlines()[-1])
    return result


def main(arguments: list[str]) -> None:
    """The child's entry point."""
    # Both stores' modules are imported whichever store is measured, so imports weigh the same on both sides.
    import haystack.hooks.tool_result_offloading  # noqa: F401

    import casstore  # noqa: F401

    inline_max = int(arguments[3]) if len(arguments) > 3 else None
    print(json.dumps(child(Path(arguments[0]), arguments[1], Path(arguments[2]), inline_max)))


if __name__ == "__main__":
    main(sys.argv[1:])
