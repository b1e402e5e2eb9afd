"""
The on-disk pack of a trace: every write's content back to back in one file, plus a small index in memory.

`materialize` runs the generator once and writes the pack, so that a benchmark can replay the same trace many times,
slice by slice, without holding it in memory and without paying the generator's cost again. It counts the trace's
logical and unique bytes on the way; `PackedTrace.fingerprint` tells whether two traces are the same.
"""

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import blake3

from benchmarks.agent import generate
from benchmarks.corpus import Corpus
from benchmarks.trace_plan import ToolResult, TraceSize


@dataclass(frozen=True, slots=True)
class TraceStats:
    """What the trace holds, as the benchmark prints it first."""

    results: int
    writes: int
    logical_bytes: int
    unique_bytes: int
    unique_writes: int
    binary_writes: int
    size_p50: int
    size_p90: int
    size_p99: int
    size_max: int
    tools: dict[str, int]

    @property
    def duplicate_ratio(self) -> float:
        """Share of logical bytes that repeat content written before (`1 - unique / logical`)."""
        return 1 - self.unique_bytes / self.logical_bytes if self.logical_bytes else 0.0

    @property
    def duplicate_writes(self) -> int:
        """Writes whose content was written before."""
        return self.writes - self.unique_writes

    def to_dict(self) -> dict[str, object]:
        """:returns: The stats as plain JSON values."""
        return {
            "results": self.results,
            "writes": self.writes,
            "logical_bytes": self.logical_bytes,
            "unique_bytes": self.unique_bytes,
            "duplicate_ratio": round(self.duplicate_ratio, 4),
            "unique_writes": self.unique_writes,
            "duplicate_writes": self.duplicate_writes,
            "binary_writes": self.binary_writes,
            "write_size_bytes": {
                "p50": self.size_p50,
                "p90": self.size_p90,
                "p99": self.size_p99,
                "max": self.size_max,
            },
            "results_by_tool": self.tools,
        }

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> "TraceStats":
        """:returns: The stats back from what `to_dict` gave (as read from JSON)."""
        sizes = raw["write_size_bytes"]
        return cls(
            results=raw["results"],
            writes=raw["writes"],
            logical_bytes=raw["logical_bytes"],
            unique_bytes=raw["unique_bytes"],
            unique_writes=raw["unique_writes"],
            binary_writes=raw["binary_writes"],
            size_p50=sizes["p50"],
            size_p90=sizes["p90"],
            size_p99=sizes["p99"],
            size_max=sizes["max"],
            tools=raw["results_by_tool"],
        )


@dataclass(slots=True)
class PackedTrace:
    """
    A trace written once to disk: every write's key and content, replayable by slice.

    `keys[i]`, `offsets[i]`, `lengths[i]`, `is_text[i]`, `is_new[i]` and `result_of[i]` describe write `i`;
    `is_new[i]` is true when write `i` is the first with its content (and type), as a deduplicating store sees it.
    `tools[r]` and `call_ids[r]` describe result `r`.
    """

    path: Path
    size: str
    seed: int
    keys: list[str]
    offsets: list[int]
    lengths: list[int]
    is_text: list[bool]
    is_new: list[bool]
    result_of: list[int]
    tools: list[str]
    call_ids: list[str]
    fingerprint: str
    stats: TraceStats
    generation_seconds: float

    def __len__(self) -> int:
        return len(self.keys)

    def load(self, start: int, stop: int) -> list[tuple[str, str | bytes]]:
        """
        :returns: Writes `start` to `stop - 1` as `(key, content)`, text decoded to `str` as a tool returns it.
        """
        if start >= stop:
            return []
        with open(self.path, "rb") as file:
            file.seek(self.offsets[start])
            blob = file.read(self.offsets[stop - 1] + self.lengths[stop - 1] - self.offsets[start])
        base = self.offsets[start]
        loaded: list[tuple[str, str | bytes]] = []
        for index in range(start, stop):
            data = blob[self.offsets[index] - base : self.offsets[index] - base + self.lengths[index]]
            loaded.append((self.keys[index], data.decode("utf-8") if self.is_text[index] else data))
        return loaded

    def save_index(self, path: Path) -> None:
        """Write the index (everything but the content) as JSON, for a child process to `open_index`."""
        path.write_text(
            json.dumps(
                {
                    "path": str(self.path),
                    "size": self.size,
                    "seed": self.seed,
                    "keys": self.keys,
                    "offsets": self.offsets,
                    "lengths": self.lengths,
                    "is_text": self.is_text,
                    "is_new": self.is_new,
                    "result_of": self.result_of,
                    "tools": self.tools,
                    "call_ids": self.call_ids,
                    "fingerprint": self.fingerprint,
                    "stats": self.stats.to_dict(),
                    "generation_seconds": self.generation_seconds,
                }
            )
        )

    @classmethod
    def open_index(cls, path: Path) -> "PackedTrace":
        """Open a pack from an index written by `save_index`."""
        data = json.loads(path.read_text())
        return cls(
            path=Path(data["path"]),
            size=data["size"],
            seed=data["seed"],
            keys=data["keys"],
            offsets=data["offsets"],
            lengths=data["lengths"],
            is_text=data["is_text"],
            is_new=data["is_new"],
            result_of=data["result_of"],
            tools=data["tools"],
            call_ids=data["call_ids"],
            fingerprint=data["fingerprint"],
            stats=TraceStats.from_dict(data["stats"]),
            generation_seconds=data["generation_seconds"],
        )


def materialize(
    size: TraceSize,
    seed: int,
    directory: Path,
    corpus: Corpus | None = None,
    results: Iterator[ToolResult] | None = None,
) -> PackedTrace:
    """
    Generate the trace and write it to `directory/trace.pack`, counting its logical and unique bytes on the way.

    Memory stays small: each result is written out as soon as it is generated; only keys, offsets and digests stay.

    :param size: Which trace.
    :param seed: The seed.
    :param directory: Where the pack goes (an existing folder).
    :param corpus: The content to draw from; discovered on this machine by default.
    :param results: Results to pack instead of generating them (for tests).
    :returns: The packed trace.
    """
    started = time.perf_counter()
    path = directory / "trace.pack"
    keys: list[str] = []
    offsets: list[int] = []
    lengths: list[int] = []
    is_text: list[bool] = []
    is_new: list[bool] = []
    result_of: list[int] = []
    tools: list[str] = []
    call_ids: list[str] = []
    seen: set[bytes] = set()
    per_tool: dict[str, int] = {}
    unique_bytes = binary = 0
    fingerprint = blake3.blake3()
    offset = 0
    with open(path, "wb") as pack:
        for number, result in enumerate(results if results is not None else generate(size, seed, corpus)):
            tools.append(result.tool)
            call_ids.append(result.call_id)
            per_tool[result.tool] = per_tool.get(result.tool, 0) + 1
            for part in result.parts:
                text = isinstance(part.content, str)
                data = part.content.encode("utf-8") if isinstance(part.content, str) else part.content
                digest = blake3.blake3(data).digest()
                identity = (b"t" if text else b"b") + digest
                new = identity not in seen
                if new:
                    seen.add(identity)
                    unique_bytes += len(data)
                binary += not text
                fingerprint.update(part.key.encode() + b"\0" + identity)
                pack.write(data)
                keys.append(part.key)
                offsets.append(offset)
                lengths.append(len(data))
                is_text.append(text)
                is_new.append(new)
                result_of.append(number)
                offset += len(data)
    ordered = sorted(lengths)

    def quantile(fraction: float) -> int:
        return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] if ordered else 0

    stats = TraceStats(
        results=len(tools),
        writes=len(keys),
        logical_bytes=offset,
        unique_bytes=unique_bytes,
        unique_writes=sum(is_new),
        binary_writes=binary,
        size_p50=quantile(0.5),
        size_p90=quantile(0.9),
        size_p99=quantile(0.99),
        size_max=ordered[-1] if ordered else 0,
        tools=dict(sorted(per_tool.items())),
    )
    return PackedTrace(
        path=path,
        size=size.name,
        seed=seed,
        keys=keys,
        offsets=offsets,
        lengths=lengths,
        is_text=is_text,
        is_new=is_new,
        result_of=result_of,
        tools=tools,
        call_ids=call_ids,
        fingerprint=fingerprint.hexdigest()[:16],
        stats=stats,
        generation_seconds=time.perf_counter() - started,
    )
