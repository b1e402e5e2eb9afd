"""
`python -m benchmarks.dedup_scope`: what a namespace learns about another by timing its own writes, under each dedup
scope, and what `namespace` scope costs (docs/dedup-scope.md). On demand; nothing here runs in the test suite but its
smoke test.

    python -m benchmarks.dedup_scope                        # the guessing experiment, both scopes
    python -m benchmarks.dedup_scope --cost --size medium   # disk and write p50 of a trace split among namespaces

The experiment: in one local store, namespace `alice` holds `--secrets` results made from a template with a secret
value in it (`salary of employee N: <hex>`). Namespace `mallory` writes `--guesses` candidates, half of them contents
alice holds and half contents nobody holds, in random order, and times each `write()` (one call at a time). The
threshold is the midpoint of the two kinds' median times; a guess is called "alice holds it" when its write took less.
The one-shot guess accuracy is the share of guesses called right: near 100% when writes of held content are
measurably faster (`store` scope), near 50% (a coin) when they are not (`namespace` scope).

The cost: the trace (`benchmarks.trace`, `--size`) is written by `--namespaces` agents, result `i` by namespace
`(i // --block) % --namespaces`, under each scope: bytes on disk (as `du` counts), blob rows, and write p50.

Bounded: every loop runs a fixed number of times.
"""

import argparse
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SCOPES = ("store", "namespace")
TEMPLATE = "salary of employee {employee}: {secret}\nposition: engineer\ndepartment: storage\nreviewed: yes\n"


def _secret_contents(count: int, rng: random.Random) -> list[str]:
    return [TEMPLATE.format(employee=index, secret=rng.getrandbits(64).to_bytes(8).hex()) for index in range(count)]


def guess_accuracy(*, scope: str, secrets: int, guesses: int, seed: int, workdir: Path) -> dict[str, Any]:
    """
    Run the experiment under `scope` in a fresh store under `workdir`.

    :returns: The accuracy, the median write time of each kind of guess in microseconds, and the counts.
    """
    from casstore import ContentAddressedToolResultStore

    rng = random.Random(seed)
    held = _secret_contents(secrets, rng)
    root = workdir / f"guess-{scope}"
    shutil.rmtree(root, ignore_errors=True)
    alice = ContentAddressedToolResultStore(root, namespace="alice", dedup_scope=scope)
    mallory = ContentAddressedToolResultStore(root, namespace="mallory")
    try:
        for index, content in enumerate(held):
            alice.write(key=f"{index}_payroll_call_{index}.txt", content=content)
        # Half the guesses alice holds (each once: a guess mallory repeated would be her own duplicate), half not.
        present = rng.sample(held, min(guesses // 2, len(held)))
        absent = [
            TEMPLATE.format(employee=-index - 1, secret=rng.getrandbits(64).to_bytes(8).hex())
            for index in range(len(present))
        ]
        candidates = [(content, True) for content in present] + [(content, False) for content in absent]
        rng.shuffle(candidates)
        for index in range(50):  # warm the write path on content of her own
            mallory.write(key=f"warm_{index}.txt", content=f"warm-up {index} {seed}")
        timed: list[tuple[int, bool]] = []
        for index, (content, is_held) in enumerate(candidates):
            started = time.perf_counter_ns()
            mallory.write(key=f"{index}_payroll_call_{index}.txt", content=content)
            timed.append((time.perf_counter_ns() - started, is_held))
    finally:
        alice.close()
        mallory.close()
    held_p50 = statistics.median(elapsed for elapsed, is_held in timed if is_held)
    new_p50 = statistics.median(elapsed for elapsed, is_held in timed if not is_held)
    threshold = (held_p50 + new_p50) / 2
    # "Held" is guessed for the faster side of the threshold, whichever side that is.
    faster_is_held = held_p50 <= new_p50
    right = sum(1 for elapsed, is_held in timed if ((elapsed < threshold) == faster_is_held) == is_held)
    return {
        "scope": scope,
        "guesses": len(timed),
        "accuracy": right / len(timed),
        "held_write_p50_us": held_p50 / 1e3,
        "new_write_p50_us": new_p50 / 1e3,
    }


def trace_cost(
    *, scope: str, size: str, seed: int, namespaces: int, block: int, results: int | None, workdir: Path
) -> dict[str, Any]:
    """
    Write the trace into a fresh store under `scope`, split among `namespaces` namespaces.

    :returns: Bytes on disk, blob rows, writes, and the write p50 in microseconds.
    """
    from benchmarks.trace import SIZES, materialize
    from casstore import ContentAddressedToolResultStore
    from casstore.disk import disk_usage

    pack_folder = workdir / f"trace-{size}-{seed}"
    if (pack_folder / "trace.index").exists():
        from benchmarks.trace import PackedTrace

        packed = PackedTrace.open_index(pack_folder / "trace.index")
    else:
        pack_folder.mkdir(parents=True, exist_ok=True)
        packed = materialize(SIZES[size], seed, pack_folder)
        packed.save_index(pack_folder / "trace.index")
    count = len(packed) if results is None else min(results, len(packed))
    root = workdir / f"cost-{scope}"
    shutil.rmtree(root, ignore_errors=True)  # a fresh store each run, the trace's pack kept
    stores = [
        ContentAddressedToolResultStore(root, namespace=f"agent-{index}", dedup_scope=scope)
        for index in range(namespaces)
    ]
    times: list[int] = []
    try:
        for start in range(0, count, 1000):
            for offset, (key, content) in enumerate(packed.load(start, min(start + 1000, count))):
                store = stores[((start + offset) // block) % namespaces]
                started = time.perf_counter_ns()
                store.write(key=key, content=content)
                times.append(time.perf_counter_ns() - started)
        counts = stores[0].repository.history.encoding_counts()
    finally:
        for store in stores:
            store.close()
    return {
        "scope": scope,
        "writes": len(times),
        "blobs": counts["plain"] + counts["dictionary"] + counts["delta"],
        "disk_bytes": disk_usage(root),
        "write_p50_us": statistics.median(times) / 1e3 if times else None,
    }


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.dedup_scope", description=__doc__.split("\n\n")[0])
    parser.add_argument("--secrets", type=int, default=300, help="results alice holds (default: 300)")
    parser.add_argument("--guesses", type=int, default=600, help="mallory's timed guesses, half held (default: 600)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cost", action="store_true", help="measure the trace's disk and write p50 instead")
    parser.add_argument("--size", default="small", help="with --cost: the trace (small, medium, scale)")
    parser.add_argument("--results", type=int, default=None, help="with --cost: only the first N results")
    parser.add_argument("--namespaces", type=int, default=4, help="with --cost: agents sharing the store (default: 4)")
    parser.add_argument("--block", type=int, default=500, help="with --cost: results per agent turn (default: 500)")
    parser.add_argument("--workdir", type=Path, default=None, help="folder for the stores (default: a temp folder)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    return parser


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the experiment or the cost measurement; print the figures. :returns: them, by scope."""
    options = _parser().parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="casstore-scope-") as temporary:
        workdir = options.workdir or Path(temporary)
        figures: dict[str, Any] = {}
        for scope in SCOPES:
            if options.cost:
                figures[scope] = trace_cost(
                    scope=scope,
                    size=options.size,
                    seed=options.seed,
                    namespaces=options.namespaces,
                    block=options.block,
                    results=options.results,
                    workdir=workdir,
                )
            else:
                figures[scope] = guess_accuracy(
                    scope=scope, secrets=options.secrets, guesses=options.guesses, seed=options.seed, workdir=workdir
                )
    if options.json:
        print(json.dumps(figures, indent=2))
    else:
        for scope, found in figures.items():
            if options.cost:
                print(
                    f"dedup_scope={scope:<9}  {found['writes']:,} writes  {found['blobs']:,} blobs  "
                    f"{found['disk_bytes'] / 1e6:.1f} MB on disk  write p50 {found['write_p50_us']:.0f} us"
                )
            else:
                print(
                    f"dedup_scope={scope:<9}  one-shot guess accuracy {found['accuracy']:.1%} of {found['guesses']}  "
                    f"(write p50: held {found['held_write_p50_us']:.0f} us, new {found['new_write_p50_us']:.0f} us)"
                )
    return figures


if __name__ == "__main__":
    main(sys.argv[1:])
