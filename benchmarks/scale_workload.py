"""
The scale run's workload: a long stream of agent tool results, cheap to generate and reproducible from a seed.

Each write is one of three things, drawn from the seed:

- a repeat (`repeat_share`, 40% by default): the exact content of an earlier result, mostly a recent one, written again
  under a new key (a file read again, a search re-run);
- a near result (half of the rest by default): an earlier fresh result with one to three lines changed or inserted, as
  when an agent re-reads a file it has just edited (what deltas and trained dictionaries are for);
- a fresh result: a slice of real source text (the installed packages' `.py` files), under a header naming the tool.

Sizes follow the medium trace's shape: most results are a few KB (median about 2 KB), `large_share` are 20 to 80 KB.
Writes come in sessions of 50 to 400 calls, each in one of the namespaces. A result is kept as a recipe of a few
integers (where its slice starts, how long it is, which edit), not as text, so a million of them fit in a few MB.
"""

import math
import random
import sysconfig
from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

TOOLS = ("read_file", "search_text", "list_directory", "run_tests", "git_diff")
_TOOL_WEIGHTS = (45, 20, 10, 10, 15)
_POOL_BYTES = 32 * 1024 * 1024
_MAX_FILE_BYTES = 512 * 1024
_RECENT = 2_000  # most repeats and near results come back to one of about this many latest results


@dataclass(frozen=True, slots=True)
class ScaleWrite:
    """One write of the workload: where it goes, and whether its content was written before."""

    namespace: str
    key: str
    content: str
    repeat: bool
    near: bool


def source_pool(limit: int = _POOL_BYTES) -> str:
    """
    :returns: Up to `limit` characters of the installed packages' Python sources, files in sorted order, so that the
        same environment gives the same pool.
    :raises RuntimeError: If no source is found.
    """
    parts: list[str] = []
    total = 0
    for path in sorted(Path(sysconfig.get_paths()["purelib"]).rglob("*.py")):
        try:
            if not path.is_file() or path.stat().st_size > _MAX_FILE_BYTES:
                continue
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        parts.append(text)
        total += len(text)
        if total >= limit:
            break
    if total < 100_000:
        raise RuntimeError("Too little Python source is installed to build the scale workload from.")
    return "".join(parts)[:limit]


class ScaleWorkload:
    """The stream of writes (see the module's docstring); iterate it once."""

    def __init__(
        self,
        *,
        writes: int,
        namespaces: int = 8,
        seed: int = 0,
        repeat_share: float = 0.4,
        near_share: float = 0.5,
        large_share: float = 0.1,
        pool: str | None = None,
    ) -> None:
        """
        :param writes: How many writes to yield.
        :param namespaces: How many namespaces the sessions are spread over.
        :param seed: Decides everything drawn.
        :param repeat_share: The share of writes that repeat an earlier result's exact content.
        :param near_share: Of the writes that are not repeats, the share that edit an earlier fresh result.
        :param large_share: The share of fresh results of 20 to 80 KB.
        :param pool: The text fresh results are cut from (by default `source_pool()`).
        :raises ValueError: If a count or share is out of range.
        """
        if writes < 0 or namespaces < 1:
            raise ValueError(f"`writes` must be >= 0 and `namespaces` >= 1, got {writes} and {namespaces}.")
        for name, share in (("repeat_share", repeat_share), ("near_share", near_share), ("large_share", large_share)):
            if not 0 <= share <= 1:
                raise ValueError(f"`{name}` must be between 0 and 1, got {share}.")
        self.writes = writes
        self.namespaces = [f"agent-{number:02d}" for number in range(namespaces)]
        self._random = random.Random(seed)
        self._repeat_share, self._near_share, self._large_share = repeat_share, near_share, large_share
        self._pool = source_pool() if pool is None else pool
        # One recipe per distinct result: its slice of the pool, its tool, and its edit (-1: none).
        self._starts, self._lengths = array("q"), array("q")
        self._tools, self._edits = array("b"), array("q")
        self._fresh = array("q")  # the numbers of the fresh results, which near results edit

    def __iter__(self) -> Iterator[ScaleWrite]:
        draw = self._random
        steps = dict.fromkeys(self.namespaces, 0)
        namespace, session_left = self.namespaces[0], 0
        for _ in range(self.writes):
            if session_left == 0:
                namespace, session_left = draw.choice(self.namespaces), draw.randint(50, 400)
            session_left -= 1
            roll = draw.random()
            if roll < self._repeat_share and len(self._starts):
                number, repeat, near = self._earlier(len(self._starts)), True, False
            elif roll < self._repeat_share + (1 - self._repeat_share) * self._near_share and len(self._fresh):
                base = self._fresh[self._earlier(len(self._fresh))]
                number, repeat, near = (
                    self._add(self._starts[base], self._lengths[base], self._tools[base]),
                    False,
                    True,
                )
                self._edits[number] = draw.getrandbits(48)
            else:
                start, length = self._slice()
                number = self._add(start, length, draw.choices(range(len(TOOLS)), _TOOL_WEIGHTS)[0])
                self._fresh.append(number)
                repeat = near = False
            step = steps[namespace]
            steps[namespace] = step + 1
            tool = TOOLS[self._tools[number]]
            key = f"{step}_{tool}_call_{draw.getrandbits(40):010x}.txt"
            yield ScaleWrite(namespace, key, self.content(number), repeat, near)

    def content(self, number: int) -> str:
        """:returns: The text of distinct result `number` (the same every time)."""
        start, length = self._starts[number], self._lengths[number]
        tool = TOOLS[self._tools[number]]
        text = (
            f"$ {tool} src/module_{start // 4096}.py lines {start}-{start + length}\n"
            + self._pool[start : start + length]
        )
        edit = self._edits[number]
        if edit < 0:
            return text
        changes = random.Random(edit)
        for change in range(changes.randint(1, 3)):
            at = text.rfind("\n", 0, changes.randrange(len(text))) + 1
            end = text.find("\n", at)
            end = len(text) if end < 0 else end + 1
            line = f"    value_{edit:x}_{change} = compute({change})  # edited\n"
            text = text[:at] + line + (text[end:] if changes.random() < 0.5 else text[at:])  # replace or insert
        return text

    def _add(self, start: int, length: int, tool: int) -> int:
        self._starts.append(start)
        self._lengths.append(length)
        self._tools.append(tool)
        self._edits.append(-1)
        return len(self._starts) - 1

    def _earlier(self, count: int) -> int:
        # Mostly one of the latest results, now and then any earlier one.
        if self._random.random() < 0.2:
            return self._random.randrange(count)
        return max(0, count - 1 - int(self._random.expovariate(1 / _RECENT)))

    def _slice(self) -> tuple[int, int]:
        draw = self._random
        if draw.random() < self._large_share:
            length = draw.randint(20_000, 80_000)
        else:
            length = min(19_000, max(120, int(draw.lognormvariate(math.log(2_000), 0.9))))
        length = min(length, len(self._pool) - 1)
        start = self._pool.rfind("\n", 0, draw.randrange(len(self._pool) - length)) + 1
        return start, length
