"""
What compressing results against earlier versions (deltas) would save on disk: measured on the trace, not built.

casstore compresses each distinct result on its own, so the disk it needs is bounded below by the sum of those frames.
A store could go below that by compressing a result against an earlier, similar one (a file re-read after an edit, a
log that grew): zstd with the earlier content as a raw-content dictionary. This module measures what that would give
on the trace, so that the README's statement on the disk target rests on a figure anyone can reproduce.

The estimate is deliberately simple, as a store would have to be on its write path: the base is an earlier result
kept whole (never itself a delta, so a read would decompress at most two frames): the latest with the same first
`ANCHOR_BYTES` bytes, else the latest with the same last ones; the delta is kept only if it is clearly smaller.
Only the frames are counted (no index, no history), and the time is that of compression alone: a store would also
have to find, read and decompress the base.
"""

import time
from collections import OrderedDict
from dataclasses import asdict, dataclass

import zstandard

from benchmarks.trace_pack import PackedTrace

ANCHOR_BYTES = 256
# Below this, a result is too small for a base to pay for the look-up it would need.
MIN_DELTA_SIZE = 1024
# A delta must be under this share of the result's own frame to be worth a read of its base.
KEEP_BELOW = 0.7
# How many anchors (with the content behind each) are remembered: a store, too, would bound what it keeps for finding
# bases rather than remember every result.
MAX_ANCHORS = 8192
_SLICE = 1000


@dataclass
class DeltaEstimate:
    """The trace's new content, compressed alone and with deltas against earlier versions."""

    new_results: int = 0
    frame_bytes: int = 0
    delta_frame_bytes: int = 0
    deltas: int = 0
    delta_attempts: int = 0
    delta_seconds: float = 0.0

    def to_dict(self) -> dict[str, float]:
        """:returns: The figures, for the JSON."""
        return {name: float(value) for name, value in asdict(self).items()}


def estimate_deltas(trace: PackedTrace, *, level: int = 3) -> DeltaEstimate:
    """
    Compress each new result of `trace` alone and, where a base is found, against it.

    :param trace: The packed trace; only its new (first-seen) results are compressed.
    :param level: The zstd level, as the store uses.
    :returns: The byte totals, and how many results became deltas.
    """
    compressor = zstandard.ZstdCompressor(level=level, write_checksum=True, write_content_size=True)
    bases: OrderedDict[bytes, bytes] = OrderedDict()  # anchor -> the most recent whole result with it
    estimate = DeltaEstimate()
    for start in range(0, len(trace), _SLICE):
        stop = min(len(trace), start + _SLICE)
        for offset, (_, content) in enumerate(trace.load(start, stop)):
            if not trace.is_new[start + offset]:
                continue
            data = content.encode("utf-8") if isinstance(content, str) else content
            frame = len(compressor.compress(data))
            estimate.new_results += 1
            estimate.frame_bytes += frame
            estimate.delta_frame_bytes += _best_frame(data, frame, bases, estimate, level=level)
    return estimate


def _best_frame(
    data: bytes, frame: int, bases: OrderedDict[bytes, bytes], estimate: DeltaEstimate, *, level: int
) -> int:
    if len(data) < MIN_DELTA_SIZE:
        return frame
    anchors = (b"head:" + data[:ANCHOR_BYTES], b"tail:" + data[-ANCHOR_BYTES:])
    base = next((bases[anchor] for anchor in anchors if anchor in bases), None)
    if base is not None:
        estimate.delta_attempts += 1
        started = time.perf_counter()
        dictionary = zstandard.ZstdCompressionDict(base, dict_type=zstandard.DICT_TYPE_RAWCONTENT)
        delta = zstandard.ZstdCompressor(level=level, dict_data=dictionary, write_checksum=True).compress(data)
        estimate.delta_seconds += time.perf_counter() - started
        if zstandard.ZstdDecompressor(dict_data=dictionary).decompress(delta) != data:
            raise AssertionError("a delta did not decompress to its content")
        if len(delta) < frame * KEEP_BELOW:
            estimate.deltas += 1
            return len(delta)
    for anchor in anchors:  # only whole results become bases
        bases[anchor] = data
        bases.move_to_end(anchor)
    while len(bases) > MAX_ANCHORS:
        bases.popitem(last=False)
    return frame
