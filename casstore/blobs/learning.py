"""
What a repository learns from the results it stores, in memory and bounded: samples of small results per tool, for
training zstd dictionaries, and where an earlier version of a result is, for storing a new one as a delta.

Nothing here touches the index or a blob: `BlobEncoder` asks it which base or dictionary to try, and tells it what it
stored; the repository asks it whether a dictionary is due and trains one after the write that made it due, outside
any transaction (docs/compression.md says when and why). Every figure below was chosen with
`python -m benchmarks --size medium`; the page gives the run.
"""

import os
import random
import threading
import time
import weakref
import zlib
from collections import OrderedDict
from dataclasses import dataclass
from typing import NamedTuple

import zstandard

from casstore.blobs.groups import group_namespace

# A result's head or tail, hashed; under `namespace` dedup scope with the namespace's name (`LearnedState.anchors`).
Anchor = int | tuple[str, int]

# Deltas. Below MIN_DELTA_SIZE a result is too small for a base to pay for the look-up it needs; a base above
# MAX_BASE_SIZE costs more to load into zstd than a write should spend. A delta is kept only if its frame is under
# DELTA_KEEP_BELOW of the plain one's (it costs a read of its base). ANCHOR_BYTES of a result's head and of its tail
# find its base: the latest result with the same head, else with the same tail.
MIN_DELTA_SIZE = 1024
MAX_BASE_SIZE = 4 * 1024 * 1024
DELTA_KEEP_BELOW = 0.7
ANCHOR_BYTES = 256
MAX_ANCHORS = 16384
# How many deltas a read may have to go through: a delta's base is a whole result or a delta of depth below this.
MAX_DELTA_DEPTH = 1

# Dictionaries. Results of at most DICTIONARY_MAX_SIZE bytes are compressed with their tool's dictionary, and sampled
# for training it (a bigger result has enough to learn from by itself).
DICTIONARY_MAX_SIZE = 16 * 1024
DICTIONARY_SIZE = 16 * 1024
# The first dictionary of a tool is trained once this many of its small results were stored, a better one at each
# RETRAIN_FACTOR times as many, up to MAX_SAMPLES; a new one replaces the current one only if it compresses the latest
# HOLDOUT_SHARE of the samples to at most RETRAIN_GAIN of the current one's bytes.
TRAIN_AFTER = 96
RETRAIN_FACTOR = 4
MAX_SAMPLES = 1536
HOLDOUT_SHARE = 0.2
RETRAIN_GAIN = 0.95
# Any dictionary, the first one too, must also compress the held-out samples to at most PLAIN_GAIN of plain zstd's
# bytes: below that it does not pay for itself (a 16 KiB blob), nor for the cold tables every read of its frames goes
# through (on the medium trace a dictionary read took 1-2 us more than a plain one, about 1.15x). There, at 0.90, 8
# tools of 14 have one, and 2,309 new results are dictionary frames instead of 5,762 at 0.97: 0.15 MB more `du`, and
# read and new-write p50 of 1.11x-1.12x and 1.12x-1.16x of `learn=False` instead of 1.13x-1.19x and 1.15x-1.18x
# (docs/compression.md, "Keys by their stem, and fewer dictionaries").
PLAIN_GAIN = 0.90
# What the samples may hold in memory, per tool and in all; past it, a tool's new samples replace its oldest.
MAX_SAMPLE_BYTES_PER_TOOL = 1024 * 1024
MAX_SAMPLE_BYTES = 8 * 1024 * 1024
MAX_TOOLS = 64
# COVER's parameters, fixed: its search over them takes several times as long for a few percent (measured).
_COVER_K = 200
_COVER_D = 8
_TAIL = 1 << 32
# zstd reserves dictionary ids below 32768.
_FIRST_DICTIONARY_ID = 32768


class BaseCandidate(NamedTuple):
    """
    An earlier result a new one may be a delta against: its digest, how many deltas reading it goes through, its size,
    and the bytes its frame took (what estimates a near-copy's plain frame without making it). A tuple, not a
    dataclass: one is made for every new result of 1 KiB or more, and a frozen dataclass takes several times as long.
    """

    digest: str
    depth: int
    size: int = 0
    stored_size: int = 0
    namespace: str | None = None
    """Under `namespace` dedup scope, the namespace that stored it: only that namespace's writes may use it."""


@dataclass(frozen=True, slots=True)
class TrainingJob:
    """A dictionary due for `tool`: samples to train on, and the latest ones held out to judge it by."""

    tool: str
    training: list[bytes]
    holdout: list[bytes]
    current: str | None
    """The digest of the tool's dictionary in use, which the new one must beat; None for the first."""

    @property
    def samples(self) -> int:
        """:returns: How many results the job covers."""
        return len(self.training) + len(self.holdout)

    @property
    def sample_bytes(self) -> int:
        """:returns: Their bytes."""
        return sum(map(len, self.training)) + sum(map(len, self.holdout))


@dataclass(slots=True)
class _Tool:
    samples: list[bytes]
    sample_bytes: int = 0
    seen: int = 0
    trained_at: int = 0
    dictionary: str | None = None
    trainings: int = 0
    # `_due_at(self)`, kept up to date by `settle` whenever what it depends on changes: asked on every sample.
    due_at: int = 0
    # Whether samples are still kept (training may still run), kept up to date the same way.
    sampling: bool = True

    def settle(self) -> None:
        """Recompute `due_at` and `sampling` after `trained_at`, `dictionary` or `trainings` changed."""
        self.due_at = _due_at(self)
        self.sampling = self.trained_at < MAX_SAMPLES and self.trainings < 3


class Learner:
    """The samples and anchors of one repository object; safe to share between threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tools: dict[str, _Tool] = {}
        self._sample_bytes = 0
        # Whether a tool may be due for training: set by each sample and by `adopt`, cleared by `due` finding none.
        self._maybe_due = False
        # Anchors by their CRC (see `anchors`).
        self._anchors: OrderedDict[Anchor, BaseCandidate] = OrderedDict()
        # Figures for the benchmark: how often training ran and how long it took.
        self.trainings = 0
        self.training_seconds = 0.0

    # Deltas.

    @staticmethod
    def anchors(data: bytes, namespace: str | None = None) -> tuple[Anchor, Anchor] | None:
        """
        :param namespace: Under `namespace` dedup scope, the writing namespace: its anchors are its own.
        :returns: What finds a base for `data`, or a later result's base in it: its head and tail, hashed.
        """
        if not MIN_DELTA_SIZE <= len(data) <= MAX_BASE_SIZE:
            return None
        # CRC-32 in C costs a fraction of Python's own hash of the slice; heads and tails get keys of their own. A
        # collision only costs a delta that is tried and not kept.
        head, tail = zlib.crc32(data[:ANCHOR_BYTES]), _TAIL | zlib.crc32(data[-ANCHOR_BYTES:])
        if namespace is None:
            return head, tail
        # A namespace's anchors are keyed by its name too, so no content of one namespace, however crafted, finds
        # another's base: CRC-32 is linear, and a head made to collide with another namespace's would otherwise hide
        # the writer's own base, which would tell whether the other namespace holds that head.
        return (namespace, head), (namespace, tail)

    def base_for(self, anchors: tuple[Anchor, Anchor] | None) -> BaseCandidate | None:
        """:returns: The latest stored result with the same first (else last) `ANCHOR_BYTES`, if any."""
        if anchors is None:
            return None
        with self._lock:
            found = self._anchors.get(anchors[0])
            return found if found is not None else self._anchors.get(anchors[1])

    def stored(
        self,
        *,
        tool: str,
        digest: str,
        data: bytes,
        depth: int,
        anchors: tuple[Anchor, Anchor] | None,
        stored_size: int = 0,
        namespace: str | None = None,
    ) -> None:
        """
        Note a result just stored: a sample for its tool's dictionary if small, a base for later deltas if it may be.

        :param depth: How many deltas reading it goes through (0: it is no delta).
        :param anchors: `anchors(data)`.
        :param stored_size: The bytes of the frame it was stored as.
        :param namespace: Under `namespace` dedup scope, the namespace that stored it.
        """
        with self._lock:
            if len(data) <= DICTIONARY_MAX_SIZE:
                self._sample(tool, data)
            if depth < MAX_DELTA_DEPTH and anchors is not None:
                candidate = BaseCandidate(digest, depth, len(data), stored_size, namespace)
                table = self._anchors
                for anchor in anchors:
                    table[anchor] = candidate
                    table.move_to_end(anchor)
                while len(table) > MAX_ANCHORS:
                    table.popitem(last=False)

    # Dictionaries.

    def dictionary_of(self, tool: str) -> str | None:
        """:returns: The digest of the dictionary this repository uses for `tool`, if it has one."""
        entry = self._tools.get(tool)
        return None if entry is None else entry.dictionary

    def knows(self, tool: str) -> bool:
        """:returns: Whether `tool` has been seen (and its dictionary looked up) by this repository."""
        return tool in self._tools

    def adopt(self, tool: str, digest: str | None, *, samples: int = 0) -> None:
        """Use the dictionary `digest` for `tool` from now on (None: it has none), trained on `samples` results."""
        with self._lock:
            entry = self._entry(tool)
            if entry is None:
                return
            entry.dictionary = digest
            entry.trained_at = max(entry.trained_at, samples)
            entry.settle()
            self._maybe_due = True

    def due(self, namespace: str | None = None) -> TrainingJob | None:
        """
        :param namespace: Under `namespace` dedup scope, the namespace that just wrote: only its own groups are
            trained after its write, so no write's time depends on another namespace's samples.
        :returns: A training that is due (the first for a tool with enough samples, or a retraining), if any.
        """
        if not self._maybe_due:
            return None  # asked after every write: no tool reached its threshold since nothing was due last time
        with self._lock:
            self._maybe_due = False
            for tool, entry in self._tools.items():
                if not _is_due(entry):
                    continue
                if namespace is not None and group_namespace(tool) != namespace:
                    self._maybe_due = True  # due, for a write of its own namespace
                    continue
                entry.trained_at = entry.seen
                entry.trainings += 1
                entry.settle()
                samples = list(entry.samples)
                holdout = max(1, int(len(samples) * HOLDOUT_SHARE))
                cut = len(samples) - holdout
                self._maybe_due = True  # another tool may be due too
                return TrainingJob(tool, samples[:cut], samples[cut:], entry.dictionary)
        return None

    def train(self, job: TrainingJob, current: zstandard.ZstdCompressionDict | None) -> bytes | None:
        """
        Train a dictionary for `job`; bounded by `MAX_SAMPLE_BYTES_PER_TOOL` of samples.

        :param current: The tool's dictionary in use, if any: the new one must compress the held-out samples to at
            most `RETRAIN_GAIN` of its bytes. Any new one must compress them to at most `PLAIN_GAIN` of plain zstd's.
        :returns: The dictionary's content, or None if it would not pay (or zstd could not train one from these).
        """
        started = time.perf_counter()
        try:
            return self._train(job, current)
        finally:
            self.trainings += 1
            self.training_seconds += time.perf_counter() - started

    def _train(self, job: TrainingJob, current: zstandard.ZstdCompressionDict | None) -> bytes | None:
        try:
            trained = zstandard.train_dictionary(
                DICTIONARY_SIZE,
                list[bytes | bytearray | memoryview](job.training),
                k=_COVER_K,
                d=_COVER_D,
                # Any id zstd does not reserve: the frame header names it, and a frame read with another dictionary
                # fails instead of decoding.
                dict_id=_FIRST_DICTIONARY_ID + random.getrandbits(30),
                level=3,
            )
        except zstandard.ZstdError:
            return None  # too few or too alike samples: plain frames go on
        if job.holdout:
            compressed = _compressed(job.holdout, trained)
            if compressed > _compressed(job.holdout, None) * PLAIN_GAIN:
                return None
            if current is not None and compressed > _compressed(job.holdout, current) * RETRAIN_GAIN:
                return None
        return trained.as_bytes()

    def _entry(self, tool: str) -> _Tool | None:
        entry = self._tools.get(tool)
        if entry is None:
            if len(self._tools) >= MAX_TOOLS:
                return None
            entry = self._tools[tool] = _Tool(samples=[])
            entry.settle()
        return entry

    def _sample(self, tool: str, data: bytes) -> None:
        entry = self._entry(tool)
        if entry is None:
            return
        entry.seen += 1
        if not entry.sampling:
            return  # no more training for this tool: its samples are not kept
        if entry.seen >= entry.due_at:
            self._maybe_due = True
        entry.samples.append(data)
        entry.sample_bytes += len(data)
        self._sample_bytes += len(data)
        if (
            entry.sample_bytes <= MAX_SAMPLE_BYTES_PER_TOOL
            and len(entry.samples) <= MAX_SAMPLES
            and self._sample_bytes <= MAX_SAMPLE_BYTES
        ):
            return
        while entry.samples and (
            entry.sample_bytes > MAX_SAMPLE_BYTES_PER_TOOL
            or len(entry.samples) > MAX_SAMPLES
            or self._sample_bytes > MAX_SAMPLE_BYTES
        ):
            dropped = entry.samples.pop(0)
            entry.sample_bytes -= len(dropped)
            self._sample_bytes -= len(dropped)


def _due_at(entry: _Tool) -> int:
    # The first training once TRAIN_AFTER results were seen, then at RETRAIN_FACTOR times as many as the last one
    # (kept or not), up to MAX_SAMPLES and three trainings.
    threshold = TRAIN_AFTER if entry.dictionary is None else entry.trained_at * RETRAIN_FACTOR
    if entry.trained_at and entry.dictionary is None:
        threshold = entry.trained_at * RETRAIN_FACTOR  # trained once, and it did not pay
    return threshold


def _is_due(entry: _Tool) -> bool:
    return entry.seen >= entry.due_at and entry.sampling


def _compressed(samples: list[bytes], dictionary: zstandard.ZstdCompressionDict | None) -> int:
    """:returns: The bytes of `samples`' frames at level 3, with `dictionary` (None: plain frames)."""
    # As the store writes frames: with the content size, without a checksum or the dictionary's id (4 bytes a frame,
    # which would weigh against a dictionary on results of a few hundred bytes).
    compressor = zstandard.ZstdCompressor(
        level=3, dict_data=dictionary, write_checksum=False, write_content_size=True, write_dict_id=False
    )
    return sum(len(compressor.compress(sample)) for sample in samples)


_LEARNERS: "weakref.WeakValueDictionary[str, Learner]" = weakref.WeakValueDictionary()
_LEARNERS_LOCK = threading.Lock()


def learner_for(place: str) -> Learner:
    """
    :param place: Where the store is (its root, or its index and bucket), as the repository describes it.
    :returns: The learner of every repository object of this process on that store, while any is open: a base one
        namespace's store wrote is found by another's, and a tool's samples add up. Other processes learn on their
        own; what they share is the dictionaries, through the index.
    """
    with _LEARNERS_LOCK:
        learner = _LEARNERS.get(place)
        if learner is None:
            learner = _LEARNERS[place] = Learner()
        return learner


def _reset_locks_after_fork() -> None:
    # A lock held by another thread at fork time would stay held in the child for ever: each learner gets a new one.
    global _LEARNERS_LOCK  # noqa: PLW0603 - a lock held at fork time must not stay held in the child
    _LEARNERS_LOCK = threading.Lock()
    for learner in list(_LEARNERS.values()):
        learner._lock = threading.Lock()


os.register_at_fork(after_in_child=_reset_locks_after_fork)
