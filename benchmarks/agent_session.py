"""
The simulated agent's state between tool calls: its random generators, the task at hand, what it read and edited.

The tools (`benchmarks.tool_results`) read and update this state; `benchmarks.agent` drives them. Every choice goes
through `AgentSession.rng` (or `git_rng`) in a fixed order, which is what makes the trace a function of the seed.
"""

import os
import random
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from benchmarks.corpus import Corpus
from benchmarks.git_history import GitHistory
from benchmarks.lru_cache import LruCache
from benchmarks.trace_plan import GENERATOR_VERSION, TraceSize

_Item = TypeVar("_Item")

# How many recently opened files a task remembers.
_RECENT_FILES = 40


@dataclass(slots=True)
class Task:
    """One task of the agent: a project it works in, the files it touched, the edits it made."""

    name: str
    files: list[Path]
    remaining: int
    root: Path
    recent: list[Path] = field(default_factory=list)
    edited: dict[Path, str] = field(default_factory=dict)
    searches: list[tuple[str, str]] = field(default_factory=list)
    listings: list[Path] = field(default_factory=list)
    ranges: list[tuple[Path, int, int]] = field(default_factory=list)
    pages: dict[Path, int] = field(default_factory=dict)
    edit_epoch: int = 0


class AgentSession:
    """The agent's state across calls, and the choices every tool shares: which file, which recent thing, what text."""

    def __init__(self, corpus: Corpus, size: TraceSize, seed: int) -> None:
        """
        :param corpus: The content to draw from.
        :param size: Which trace: its name seeds the generators, its profile shapes some calls.
        :param seed: The trace's seed.
        """
        self.corpus = corpus
        self.size = size
        self.rng = random.Random(f"casstore-benchmark-trace/{GENERATOR_VERSION}/{size.name}/{seed}")
        # Git output has a generator of its own, so a repository that gains commits changes only the git results.
        self.git_rng = random.Random(f"casstore-benchmark-trace/{GENERATOR_VERSION}/{size.name}/{seed}/git")
        self.git = GitHistory(corpus.git_repositories)
        self.project_weights = [len(files) ** 0.5 for _, files in corpus.projects]
        self._texts: LruCache[Path, str] = LruCache(256)
        #: `grep` outputs by (pattern, folder, edit epoch or -1). First in, first out: a hit does not refresh it.
        #: Unlike the texts, a kept output can outlive the edits it saw (a later task in the same project reaches
        #: the same epoch), so which outputs are kept is part of the trace: keep this policy as it is.
        self.greps: OrderedDict[tuple[str, str, int], str] = OrderedDict()
        self._stats: dict[Path, os.stat_result] = {}
        #: Tools to call next, before choosing by weight: the follow-ups a tool asked for.
        self.pending: list[str] = []
        self.task = self.new_task()

    def new_task(self) -> Task:
        """:returns: A new task in a project picked by the square root of its file count, of 150 to 900 calls."""
        (name, files) = self.rng.choices(self.corpus.projects, weights=self.project_weights)[0]
        return Task(name=name, files=files, remaining=self.rng.randint(150, 900), root=self.corpus.site_packages / name)

    def pick_file(self, *, reread: float, max_bytes: int | None = None) -> Path:
        """
        Choose the file a call works on, and note it as the most recent.

        :param reread: Chance of going back to a recently opened file instead of a new one.
        :param max_bytes: Largest file wanted when picking a new one (a few tries, then whatever came).
        :returns: The file.
        """
        task = self.task
        if task.recent and self.rng.random() < reread:
            # Recency bias: the files just worked on come back most often.
            path = self.pick_recent(task.recent, rate=0.35)
        else:
            # Of two files, the agent opens the larger: the module that does the work, not the `__init__.py`.
            path = max(
                (task.files[self.rng.randrange(len(task.files))] for _ in range(2)),
                key=lambda candidate: (self.stat(candidate).st_size, str(candidate)),
            )
            for _ in range(8):
                if max_bytes is None or self.stat(path).st_size <= max_bytes:
                    break
                path = task.files[self.rng.randrange(len(task.files))]
        self.touch(path)
        return path

    def touch(self, path: Path) -> None:
        """Make `path` the task's most recent file (the oldest is forgotten past `_RECENT_FILES`)."""
        recent = self.task.recent
        if path in recent:
            recent.remove(path)
        remember(recent, path, keep=_RECENT_FILES)

    def pick_recent(self, items: Sequence[_Item], *, rate: float) -> _Item:
        """
        :param items: Things the task used, oldest first (not empty).
        :param rate: How strongly the choice favours the newest: the higher, the more it is the last one.
        :returns: One of `items`, the last most often, the older ones exponentially less.
        """
        return items[-1 - min(int(self.rng.expovariate(rate)), len(items) - 1)]

    def text(self, path: Path) -> str:
        """:returns: The file's text as the agent sees it: its edited version if the task edited it."""
        edited = self.task.edited.get(path)
        if edited is not None:
            return edited
        return self._texts.get_or_compute(path, lambda: _read_text(path))

    def original_text(self, path: Path) -> str:
        """:returns: The file's text on disk, before the task's edits (from the cache if there, not adding to it)."""
        original = self._texts.peek(path)
        return original if original is not None else _read_text(path)

    def stat(self, path: Path) -> os.stat_result:
        """:returns: The file's `lstat`, taken once."""
        status = self._stats.get(path)
        if status is None:
            status = path.lstat()
            self._stats[path] = status
        return status

    def display(self, path: Path) -> str:
        """:returns: `path` as the agent shows it: relative to site-packages."""
        return str(path.relative_to(self.corpus.site_packages))


def _read_text(path: Path) -> str:
    """:returns: The file's content as text, undecodable bytes replaced."""
    return path.read_bytes().decode("utf-8", errors="replace")


def remember(items: list[_Item], item: _Item, *, keep: int) -> None:
    """Append `item` to `items`, forgetting the oldest once there are more than `keep`."""
    items.append(item)
    if len(items) > keep:
        items.pop(0)
