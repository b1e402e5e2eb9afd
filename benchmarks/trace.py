"""
The agent trace: the tool results a long-running coding agent produces, built deterministically from a seed.

Everything in it is real content found on the machine: the source files, READMEs and metadata of the installed
packages (read whole, re-read, read by line range and by page, re-read after small edits), `grep -rn`-like searches
and `ls -la`-like listings over them, real `git log` / `git show` output of a git repository at hand (and `git diff` /
`git status` of the agent's own edits), and PNG/JPEG images shipped with packages or under /usr/share, sent as
multi-part results. No random text is generated: the seed only decides which tool is called on what, and when.

`generate` yields results lazily. `materialize` writes them once into a pack file (content bytes back to back, plus a
small index) so that a benchmark can replay the same trace many times, slice by slice, without holding it in memory
and without paying the generator's cost again. Same seed and same machine (same installed files and git history) give
the same trace; `PackedTrace.fingerprint` tells whether two traces are the same.
"""

import bisect
import difflib
import json
import os
import random
import re
import stat
import subprocess
import sys
import sysconfig
import time
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import blake3

#: Bump when the generator changes in a way that changes the trace for the same seed.
GENERATOR_VERSION = 1

_TEXT_SUFFIXES = frozenset(
    {".py", ".pyi", ".md", ".rst", ".txt", ".toml", ".cfg", ".ini", ".json", ".yaml", ".yml", ".html", ".css", ".js"}
)
_TEXT_NAMES = frozenset({"METADATA", "RECORD", "LICENSE", "README", "NOTICE", "AUTHORS", "WHEEL", "entry_points.txt"})
_IMAGE_SUFFIXES = frozenset({".png", ".jpg", ".jpeg"})
_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
_JPEG_MAGIC = b"\xff\xd8\xff"
_MAX_SOURCE_BYTES = 2 * 1024 * 1024
_MIN_IMAGE_BYTES = 2 * 1024
_MAX_IMAGE_BYTES = 1024 * 1024
# Like common agent file tools: at most this many lines per read, each cut at this many characters.
_READ_MAX_LINES = 2000
_READ_MAX_LINE_CHARS = 2000
_PAGE_LINES = 400
_GREP_MAX_MATCHES = 200
_GREP_MAX_LINE_CHARS = 300
_GREP_MAX_FILES = 300
_IDENTIFIER = re.compile(r"^\s*(?:def|class|async def)\s+([A-Za-z_][A-Za-z0-9_]{3,})", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class TraceSize:
    """How long a trace is and which mix of tools it uses."""

    name: str
    results: int
    profile: str
    description: str


SIZES: dict[str, TraceSize] = {
    "small": TraceSize("small", 2_000, "coding", "~2k results, runs in seconds"),
    "medium": TraceSize("medium", 20_000, "coding", "~20k results, ~150 MB logical"),
    "scale": TraceSize("scale", 120_000, "scale", "120k results, mostly small"),
}

# Relative frequency of each kind of tool call. "scale" is the same agent doing mostly small, targeted calls.
_PROFILES: dict[str, dict[str, float]] = {
    "coding": {
        "read_file": 30,
        "read_range": 14,
        "read_page": 3,
        "edit_file": 9,
        "grep": 13,
        "list_dir": 10,
        "git_diff": 5,
        "git_status": 4,
        "git_log": 3,
        "git_show": 2,
        "view_image": 3,
    },
    "scale": {
        "read_file": 12,
        "read_range": 30,
        "read_page": 1,
        "edit_file": 12,
        "grep": 16,
        "list_dir": 12,
        "git_diff": 4,
        "git_status": 10,
        "git_log": 1,
        "git_show": 0.5,
        "view_image": 1.5,
    },
}
# Largest file the "scale" profile reads whole; larger ones it reads by line range.
_SCALE_READ_MAX_BYTES = 12 * 1024


@dataclass(frozen=True, slots=True)
class Part:
    """One part of a tool result, written under its own key: text, or bytes for an image."""

    key: str
    content: str | bytes


@dataclass(frozen=True, slots=True)
class ToolResult:
    """One tool call's result, as Haystack's offload hook would write it: one or more parts."""

    step: int
    tool: str
    call_id: str
    arguments: dict[str, object]
    parts: tuple[Part, ...]


@dataclass(slots=True)
class Corpus:
    """The real content the trace is made of, found on this machine and sorted so the trace is reproducible."""

    projects: list[tuple[str, list[Path]]]
    images: list[Path]
    git_repositories: list[Path]
    site_packages: Path

    @classmethod
    def discover(cls, git_repositories: Sequence[Path] | None = None) -> "Corpus":
        """
        Find the installed packages' text files, the images and the git repositories to use.

        :param git_repositories: Repositories for `git log` / `git show` output; by default the repository this
            benchmark lives in, if it is one.
        :returns: The corpus.
        :raises RuntimeError: If no package with enough text files is installed.
        """
        site_packages = Path(sysconfig.get_paths()["purelib"])
        projects: list[tuple[str, list[Path]]] = []
        for entry in sorted(site_packages.iterdir()):
            if not entry.is_dir() or entry.name.startswith(("_", ".")) or entry.name == "__pycache__":
                continue
            files = _text_files(entry)
            if len(files) >= 5:
                projects.append((entry.name, files))
        if not projects:
            raise RuntimeError(f"No installed package with text files under {site_packages}.")
        images = sorted(_images(site_packages) + _images(Path("/usr/share")), key=lambda path: (path.name, str(path)))
        if git_repositories is None:
            here = Path(__file__).resolve().parent.parent
            git_repositories = [here] if (here / ".git").exists() else []
        return cls(
            projects=projects,
            images=images,
            git_repositories=[Path(repository) for repository in git_repositories],
            site_packages=site_packages,
        )

    def describe(self) -> dict[str, object]:
        """:returns: What the corpus holds, for the JSON result: a different corpus gives a different trace."""
        return {
            "site_packages": str(self.site_packages),
            "projects": len(self.projects),
            "text_files": sum(len(files) for _, files in self.projects),
            "images": len(self.images),
            "git_repositories": [
                {"path": str(repository), "commits": len(_git(repository, "rev-list", "HEAD").split())}
                for repository in self.git_repositories
            ],
        }


def _text_files(directory: Path) -> list[Path]:
    found: list[Path] = []
    for folder, subfolders, names in os.walk(directory):
        subfolders[:] = sorted(name for name in subfolders if name != "__pycache__" and not name.startswith("."))
        for name in sorted(names):
            path = Path(folder) / name
            if path.suffix not in _TEXT_SUFFIXES and name not in _TEXT_NAMES:
                continue
            try:
                status = path.lstat()
            except OSError:
                continue
            if stat.S_ISREG(status.st_mode) and 0 < status.st_size <= _MAX_SOURCE_BYTES:
                found.append(path)
    return found


def _images(directory: Path) -> list[Path]:
    found: list[Path] = []
    if not directory.is_dir():
        return found
    for folder, subfolders, names in os.walk(directory):
        subfolders.sort()
        for name in sorted(names):
            path = Path(folder) / name
            if path.suffix.lower() not in _IMAGE_SUFFIXES:
                continue
            try:
                status = path.lstat()
            except OSError:
                continue
            if stat.S_ISREG(status.st_mode) and _MIN_IMAGE_BYTES <= status.st_size <= _MAX_IMAGE_BYTES:
                found.append(path)
    return found


class _GitOutputs:
    """Real `git log` / `git show` output of the oldest commits of some repositories, so new commits change nothing."""

    def __init__(self, repositories: Sequence[Path], max_commits: int = 200) -> None:
        self._commits: list[tuple[Path, str]] = []
        for repository in repositories:
            listed = _git(repository, "rev-list", "--reverse", "--topo-order", "HEAD")
            self._commits.extend((repository, sha) for sha in listed.split()[:max_commits])
        self._cache: OrderedDict[tuple[str, ...], str] = OrderedDict()

    def __bool__(self) -> bool:
        return bool(self._commits)

    def log(self, rng: random.Random) -> tuple[dict[str, object], str]:
        repository, sha = self._commits[rng.randrange(len(self._commits))]
        count = rng.choice((5, 10, 20, 50))
        stat_flag = rng.random() < 0.5
        arguments = ["log", f"-n{count}", "--format=commit %H%nAuthor: %an <%ae>%nDate:   %ad%n%n    %s%n%n%b"]
        if stat_flag:
            arguments.append("--stat")
        return {"command": f"git log -n {count}{' --stat' if stat_flag else ''}", "at": sha[:12]}, self._run(
            repository, *arguments, sha
        )

    def show(self, rng: random.Random) -> tuple[dict[str, object], str]:
        repository, sha = self._commits[rng.randrange(len(self._commits))]
        return {"command": f"git show {sha[:12]}"}, self._run(repository, "show", "--format=fuller", sha)

    def _run(self, repository: Path, *arguments: str) -> str:
        key = (str(repository), *arguments)
        if key in self._cache:
            self._cache.move_to_end(key)
            return self._cache[key]
        output = _git(repository, *arguments)
        self._cache[key] = output
        if len(self._cache) > 64:
            self._cache.popitem(last=False)
        return output


def _git(repository: Path, *arguments: str) -> str:
    completed = subprocess.run(
        ["git", "-C", str(repository), "-c", "core.pager=cat", "-c", "color.ui=never", *arguments],
        capture_output=True,
        check=False,
        env={**os.environ, "TZ": "UTC", "LC_ALL": "C"},
    )
    return completed.stdout.decode("utf-8", errors="replace") if completed.returncode == 0 else ""


@dataclass(slots=True)
class _Task:
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


class _Agent:
    """The simulated agent: picks each tool call from the seed and computes its real output."""

    def __init__(self, corpus: Corpus, size: TraceSize, seed: int) -> None:
        self.corpus = corpus
        self.size = size
        self.rng = random.Random(f"casstore-benchmark-trace/{GENERATOR_VERSION}/{size.name}/{seed}")
        # Git output has a generator of its own, so a repository that gains commits changes only the git results.
        self.git_rng = random.Random(f"casstore-benchmark-trace/{GENERATOR_VERSION}/{size.name}/{seed}/git")
        weights = dict(_PROFILES[size.profile])
        self.git = _GitOutputs(corpus.git_repositories)
        if not self.git:
            weights["git_log"] = weights["git_show"] = 0
        if not corpus.images:
            weights["view_image"] = 0
        self.tools = [tool for tool, weight in weights.items() if weight > 0]
        self.cumulative: list[float] = []
        total = 0.0
        for tool in self.tools:
            total += weights[tool]
            self.cumulative.append(total)
        self.project_weights = [len(files) ** 0.5 for _, files in corpus.projects]
        self.texts: OrderedDict[Path, str] = OrderedDict()
        self.greps: OrderedDict[tuple[str, str, int], str] = OrderedDict()
        self.stats: dict[Path, os.stat_result] = {}
        self.step = 0
        self.task = self._new_task()
        self.pending: list[str] = []

    # -- choosing calls ------------------------------------------------------------------------------------------------

    def results(self, count: int) -> Iterator[ToolResult]:
        produced = 0
        while produced < count:
            if self.task.remaining <= 0:
                self.task = self._new_task()
            self.step += 1
            # An agent step calls one tool, sometimes a few in parallel.
            calls = 1 if self.rng.random() < 0.8 else self.rng.randint(2, 3)
            for _ in range(min(calls, count - produced)):
                tool = self.pending.pop(0) if self.pending else self._pick_tool()
                arguments, parts = getattr(self, f"_{tool}")()
                call_id = f"call_{self.rng.getrandbits(64):016x}"
                prefix = f"{self.step}_{tool}_{call_id}"
                if len(parts) == 1:
                    keyed: tuple[Part, ...] = (Part(f"{prefix}{parts[0][0]}", parts[0][1]),)
                else:
                    keyed = tuple(
                        Part(f"{prefix}_{position}{extension}", content)
                        for position, (extension, content) in enumerate(parts)
                    )
                self.task.remaining -= 1
                produced += 1
                yield ToolResult(self.step, tool, call_id, arguments, keyed)

    def _pick_tool(self) -> str:
        return self.tools[bisect.bisect(self.cumulative, self.rng.random() * self.cumulative[-1])]

    def _new_task(self) -> _Task:
        (name, files) = self.rng.choices(self.corpus.projects, weights=self.project_weights)[0]
        return _Task(
            name=name, files=files, remaining=self.rng.randint(150, 900), root=self.corpus.site_packages / name
        )

    def _pick_file(self, *, reread: float, max_bytes: int | None = None) -> Path:
        task = self.task
        if task.recent and self.rng.random() < reread:
            # Recency bias: the files just worked on come back most often.
            index = len(task.recent) - 1 - min(int(self.rng.expovariate(0.35)), len(task.recent) - 1)
            path = task.recent[index]
        else:
            # Of two files, the agent opens the larger: the module that does the work, not the `__init__.py`.
            path = max(
                (task.files[self.rng.randrange(len(task.files))] for _ in range(2)),
                key=lambda candidate: (self._stat(candidate).st_size, str(candidate)),
            )
            for _ in range(8):
                if max_bytes is None or self._stat(path).st_size <= max_bytes:
                    break
                path = task.files[self.rng.randrange(len(task.files))]
        if path in task.recent:
            task.recent.remove(path)
        task.recent.append(path)
        if len(task.recent) > 40:
            task.recent.pop(0)
        return path

    # -- content -------------------------------------------------------------------------------------------------------

    def _text(self, path: Path) -> str:
        edited = self.task.edited.get(path)
        if edited is not None:
            return edited
        text = self.texts.get(path)
        if text is None:
            text = path.read_bytes().decode("utf-8", errors="replace")
            self.texts[path] = text
            if len(self.texts) > 256:
                self.texts.popitem(last=False)
        else:
            self.texts.move_to_end(path)
        return text

    def _stat(self, path: Path) -> os.stat_result:
        status = self.stats.get(path)
        if status is None:
            status = path.lstat()
            self.stats[path] = status
        return status

    def _display(self, path: Path) -> str:
        return str(path.relative_to(self.corpus.site_packages))

    # -- tools ---------------------------------------------------------------------------------------------------------

    def _read_file(self) -> tuple[dict[str, object], list[tuple[str, str | bytes]]]:
        limit = _SCALE_READ_MAX_BYTES if self.size.profile == "scale" else None
        path = self._pick_file(reread=0.55, max_bytes=limit)
        lines = self._text(path).splitlines()
        output = _numbered(lines[:_READ_MAX_LINES], start=1)
        if len(lines) > _READ_MAX_LINES:
            output += f"\n... ({len(lines) - _READ_MAX_LINES} more lines; read with offset and limit to see them)"
        return {"path": self._display(path)}, [(".txt", output)]

    def _read_range(self) -> tuple[dict[str, object], list[tuple[str, str | bytes]]]:
        task = self.task
        if task.ranges and self.rng.random() < 0.4:
            path, start, count = task.ranges[-1 - min(int(self.rng.expovariate(0.5)), len(task.ranges) - 1)]
        else:
            path = self._pick_file(reread=0.6)
            total = max(1, self._text(path).count("\n"))
            count = self.rng.choice((20, 30, 40, 60, 80, 120))
            start = self.rng.randint(1, max(1, total - count // 2))
            task.ranges.append((path, start, count))
            if len(task.ranges) > 30:
                task.ranges.pop(0)
        lines = self._text(path).splitlines()
        output = _numbered(lines[start - 1 : start - 1 + count], start=start)
        return {"path": self._display(path), "offset": start, "limit": count}, [(".txt", output)]

    def _read_page(self) -> tuple[dict[str, object], list[tuple[str, str | bytes]]]:
        task = self.task
        candidates = [path for path in task.recent if self._stat(path).st_size > 24 * 1024]
        if candidates and self.rng.random() < 0.7:
            path = candidates[-1]
        else:
            path = self._pick_file(reread=0.0)
            for _ in range(12):
                if self._stat(path).st_size > 24 * 1024:
                    break
                path = task.files[self.rng.randrange(len(task.files))]
        lines = self._text(path).splitlines()
        pages = max(1, -(-len(lines) // _PAGE_LINES))
        # Paging goes forward; now and then the agent goes back to a page it already saw.
        page = task.pages.get(path, -1) + 1
        if page >= pages or self.rng.random() < 0.25:
            page = self.rng.randrange(pages)
        task.pages[path] = page
        if page + 1 < pages and self.rng.random() < 0.6:
            self.pending.append("read_page")
        start = page * _PAGE_LINES
        output = _numbered(lines[start : start + _PAGE_LINES], start=start + 1)
        output += f"\n\n(page {page + 1} of {pages}; lines {start + 1}-{min(len(lines), start + _PAGE_LINES)})"
        return {"path": self._display(path), "offset": start + 1, "limit": _PAGE_LINES}, [(".txt", output)]

    def _edit_file(self) -> tuple[dict[str, object], list[tuple[str, str | bytes]]]:
        task = self.task
        path = self._pick_file(reread=0.8)
        lines = self._text(path).splitlines()
        if not lines:
            lines = [""]
        at = self.rng.randrange(len(lines))
        kind = self.rng.random()
        indent = lines[at][: len(lines[at]) - len(lines[at].lstrip())]
        if kind < 0.4:
            # Copy a nearby real line with a small change, as a fix would.
            source = lines[max(0, at - self.rng.randint(1, 20))]
            lines.insert(at, source.rstrip() + ("  # noqa" if self.rng.random() < 0.3 else ""))
        elif kind < 0.75:
            words = re.findall(r"[A-Za-z_][A-Za-z0-9_]{2,}", lines[at])
            if words:
                word = self.rng.choice(words)
                lines[at] = lines[at].replace(word, f"{word}_v{task.edit_epoch + 2}", 1)
            else:
                lines.insert(at, indent + "pass")
        elif kind < 0.9 and len(lines) > 1:
            del lines[at]
        else:
            lines.insert(at, f"{indent}# TODO(agent): revisit {self._display(path).rsplit('/', 1)[-1]}")
        task.edited[path] = "\n".join(lines) + "\n"
        task.edit_epoch += 1
        # After an edit an agent usually looks again: the new version, or the diff.
        follow = self.rng.random()
        if follow < 0.45:
            self.pending.append("read_file" if self.rng.random() < 0.6 else "read_range")
            task.recent.remove(path)
            task.recent.append(path)
        elif follow < 0.7:
            self.pending.append("git_diff")
        low, high = max(0, at - 5), min(len(lines), at + 6)
        output = (
            f"The file {self._display(path)} has been updated. Here's the result of running `cat -n` on a snippet "
            f"of the edited file:\n{_numbered(lines[low:high], start=low + 1)}"
        )
        return {"path": self._display(path), "line": at + 1}, [(".txt", output)]

    def _grep(self) -> tuple[dict[str, object], list[tuple[str, str | bytes]]]:
        task = self.task
        if task.searches and self.rng.random() < 0.4:
            pattern, folder = task.searches[-1 - min(int(self.rng.expovariate(0.4)), len(task.searches) - 1)]
        else:
            path = self._pick_file(reread=0.5)
            names = _IDENTIFIER.findall(self._text(path))
            pattern = self.rng.choice(names) if names else path.stem
            scope = path.parent
            if self.rng.random() < 0.5 and scope != task.root:
                scope = scope.parent
            folder = str(scope)
            task.searches.append((pattern, folder))
            if len(task.searches) > 30:
                task.searches.pop(0)
        key = (pattern, folder, task.edit_epoch if task.edited else -1)
        output = self.greps.get(key)
        if output is None:
            output = self._run_grep(pattern, Path(folder))
            self.greps[key] = output
            if len(self.greps) > 128:
                self.greps.popitem(last=False)
        return {"pattern": pattern, "path": self._display(Path(folder))}, [(".txt", output)]

    def _run_grep(self, pattern: str, folder: Path) -> str:
        matches: list[str] = []
        prefix = str(folder) + os.sep
        searched = 0
        for path in self.task.files:
            if not str(path).startswith(prefix):
                continue
            searched += 1
            if searched > _GREP_MAX_FILES:
                break
            text = self._text(path)
            if pattern not in text:
                continue
            display = self._display(path)
            for number, line in enumerate(text.splitlines(), start=1):
                if pattern in line:
                    matches.append(f"{display}:{number}:{line[:_GREP_MAX_LINE_CHARS]}")
            if len(matches) >= _GREP_MAX_MATCHES:
                break
        if not matches:
            return f"No matches for '{pattern}' in {self._display(folder)}"
        shown = matches[:_GREP_MAX_MATCHES]
        more = len(matches) - len(shown)
        return "\n".join(shown) + (f"\n[... {more} more matches]" if more > 0 else "")

    def _list_dir(self) -> tuple[dict[str, object], list[tuple[str, str | bytes]]]:
        task = self.task
        if task.listings and self.rng.random() < 0.5:
            folder = task.listings[-1 - min(int(self.rng.expovariate(0.5)), len(task.listings) - 1)]
        else:
            path = self._pick_file(reread=0.3)
            folder = path.parent
            while folder != task.root and self.rng.random() < 0.3:
                folder = folder.parent
            task.listings.append(folder)
            if len(task.listings) > 20:
                task.listings.pop(0)
        entries = []
        for entry in sorted(os.listdir(folder)):
            if entry == "__pycache__":
                continue
            status = self._stat(folder / entry)
            stamp = time.strftime("%b %d %H:%M", time.gmtime(status.st_mtime))
            entries.append(
                f"{stat.filemode(status.st_mode)} {status.st_nlink:2d} root root {status.st_size:8d} {stamp} {entry}"
            )
        output = f"total {len(entries)}\n" + "\n".join(entries)
        return {"path": self._display(folder)}, [(".txt", output)]

    def _git_diff(self) -> tuple[dict[str, object], list[tuple[str, str | bytes]]]:
        task = self.task
        chunks: list[str] = []
        for path in sorted(task.edited):
            display = self._display(path)
            original = self.texts.get(path)
            if original is None:
                original = path.read_bytes().decode("utf-8", errors="replace")
            diff = difflib.unified_diff(
                original.splitlines(), task.edited[path].splitlines(), f"a/{display}", f"b/{display}", lineterm=""
            )
            body = "\n".join(diff)
            if body:
                chunks.append(f"diff --git a/{display} b/{display}\n{body}")
        return {"command": "git diff"}, [(".txt", "\n".join(chunks) if chunks else "(no changes)")]

    def _git_status(self) -> tuple[dict[str, object], list[tuple[str, str | bytes]]]:
        task = self.task
        lines = [f"On branch agent/{task.name}", "Changes not staged for commit:"]
        lines += [f"\tmodified:   {self._display(path)}" for path in sorted(task.edited)]
        if not task.edited:
            lines = [f"On branch agent/{task.name}", "nothing to commit, working tree clean"]
        return {"command": "git status"}, [(".txt", "\n".join(lines))]

    def _git_log(self) -> tuple[dict[str, object], list[tuple[str, str | bytes]]]:
        arguments, output = self.git.log(self.git_rng)
        return arguments, [(".txt", output or "(empty)")]

    def _git_show(self) -> tuple[dict[str, object], list[tuple[str, str | bytes]]]:
        arguments, output = self.git.show(self.git_rng)
        return arguments, [(".txt", output or "(empty)")]

    def _view_image(self) -> tuple[dict[str, object], list[tuple[str, str | bytes]]]:
        images = self.corpus.images
        # A few images come back again and again (the same screenshot, the same plot).
        if self.rng.random() < 0.5:
            path = images[int(self.rng.paretovariate(1.2) * 7) % len(images)]
        else:
            path = images[self.rng.randrange(len(images))]
        data = path.read_bytes()
        extension = ".png" if data.startswith(_PNG_MAGIC) else ".jpg" if data.startswith(_JPEG_MAGIC) else ".bin"
        description = f"Image {path.name}: {len(data)} bytes, {_image_size(data)}"
        return {"path": str(path)}, [(".txt", description), (extension, data)]


def _numbered(lines: Sequence[str], *, start: int) -> str:
    return "\n".join(f"{number:6d}\t{line[:_READ_MAX_LINE_CHARS]}" for number, line in enumerate(lines, start=start))


def _image_size(data: bytes) -> str:
    if data.startswith(_PNG_MAGIC) and len(data) >= 24:
        return f"{int.from_bytes(data[16:20], 'big')}x{int.from_bytes(data[20:24], 'big')} PNG"
    return "JPEG" if data.startswith(_JPEG_MAGIC) else "unknown format"


def generate(size: TraceSize, seed: int, corpus: Corpus | None = None) -> Iterator[ToolResult]:
    """
    Yield the trace's tool results lazily, in order.

    :param size: Which trace (see `SIZES`).
    :param seed: Same seed, same machine: same trace.
    :param corpus: The content to draw from; discovered on this machine by default.
    :returns: An iterator of `size.results` tool results.
    """
    agent = _Agent(corpus or Corpus.discover(), size, seed)
    return agent.results(size.results)


# -- the packed trace ----------------------------------------------------------------------------------------------


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
        raw = data["stats"]
        stats = TraceStats(
            results=raw["results"],
            writes=raw["writes"],
            logical_bytes=raw["logical_bytes"],
            unique_bytes=raw["unique_bytes"],
            unique_writes=raw["unique_writes"],
            binary_writes=raw["binary_writes"],
            size_p50=raw["write_size_bytes"]["p50"],
            size_p90=raw["write_size_bytes"]["p90"],
            size_p99=raw["write_size_bytes"]["p99"],
            size_max=raw["write_size_bytes"]["max"],
            tools=raw["results_by_tool"],
        )
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
            stats=stats,
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


if __name__ == "__main__":  # pragma: no cover - a quick look at a trace
    import tempfile

    chosen = SIZES[sys.argv[1] if len(sys.argv) > 1 else "small"]
    with tempfile.TemporaryDirectory() as folder:
        packed = materialize(chosen, 0, Path(folder))
        print(json.dumps(packed.stats.to_dict(), indent=2), packed.fingerprint, f"{packed.generation_seconds:.1f}s")
