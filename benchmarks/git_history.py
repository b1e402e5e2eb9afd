"""
The git history at hand: real `git log` / `git show` output of the oldest commits of some repositories.

Only the oldest commits are used, so that a repository gaining commits does not change the trace.
"""

import os
import random
import subprocess
from collections.abc import Sequence
from pathlib import Path

from benchmarks.lru_cache import LruCache


def git_output(repository: Path, *arguments: str) -> str:
    """
    Run git in `repository` without pager or colours, in UTC and the C locale, so the output is the same everywhere.

    :param repository: The repository's folder.
    :param arguments: git's arguments, e.g. `"rev-list", "HEAD"`.
    :returns: What git printed (undecodable bytes replaced), or `""` if it failed.
    """
    completed = subprocess.run(
        ["git", "-C", str(repository), "-c", "core.pager=cat", "-c", "color.ui=never", *arguments],
        capture_output=True,
        check=False,
        env={**os.environ, "TZ": "UTC", "LC_ALL": "C"},
    )
    return completed.stdout.decode("utf-8", errors="replace") if completed.returncode == 0 else ""


class GitHistory:
    """The first commits of some repositories, and the `git log` / `git show` calls an agent makes on them."""

    def __init__(self, repositories: Sequence[Path], max_commits: int = 200) -> None:
        """
        :param repositories: The repositories to draw commits from (none: the history is empty, and false).
        :param max_commits: How many of each repository's oldest commits to use.
        """
        self._commits: list[tuple[Path, str]] = []
        for repository in repositories:
            listed = git_output(repository, "rev-list", "--reverse", "--topo-order", "HEAD")
            self._commits.extend((repository, sha) for sha in listed.split()[:max_commits])
        self._outputs: LruCache[tuple[str, ...], str] = LruCache(64)

    def __bool__(self) -> bool:
        return bool(self._commits)

    def log(self, rng: random.Random) -> tuple[dict[str, object], str]:
        """
        :param rng: Picks the commit, the count and whether `--stat` is given.
        :returns: The call's arguments as the agent would show them, and git's output.
        """
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
        """
        :param rng: Picks the commit.
        :returns: The call's arguments as the agent would show them, and git's output.
        """
        repository, sha = self._commits[rng.randrange(len(self._commits))]
        return {"command": f"git show {sha[:12]}"}, self._run(repository, "show", "--format=fuller", sha)

    def _run(self, repository: Path, *arguments: str) -> str:
        return self._outputs.get_or_compute((str(repository), *arguments), lambda: git_output(repository, *arguments))
