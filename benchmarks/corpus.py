"""
Where the trace's content comes from: real files on this machine, found in a fixed order so the trace is reproducible.

The installed packages' source files, READMEs and metadata; PNG/JPEG images shipped with packages or under
/usr/share; and the git repositories whose history `git log` / `git show` print (see `benchmarks.git_history`).
"""

import os
import stat
import sysconfig
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks.git_history import git_output

_TEXT_SUFFIXES = frozenset(
    {".py", ".pyi", ".md", ".rst", ".txt", ".toml", ".cfg", ".ini", ".json", ".yaml", ".yml", ".html", ".css", ".js"}
)
_TEXT_NAMES = frozenset({"METADATA", "RECORD", "LICENSE", "README", "NOTICE", "AUTHORS", "WHEEL", "entry_points.txt"})
_IMAGE_SUFFIXES = frozenset({".png", ".jpg", ".jpeg"})
_MAX_SOURCE_BYTES = 2 * 1024 * 1024
_MIN_IMAGE_BYTES = 2 * 1024
_MAX_IMAGE_BYTES = 1024 * 1024
# A package with fewer text files than this is too small to work in.
_MIN_PROJECT_FILES = 5


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
            if len(files) >= _MIN_PROJECT_FILES:
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
                {"path": str(repository), "commits": len(git_output(repository, "rev-list", "HEAD").split())}
                for repository in self.git_repositories
            ],
        }


def _text_files(directory: Path) -> list[Path]:
    """:returns: The source, documentation and metadata files under `directory`, caches and hidden folders skipped."""
    return _regular_files(
        directory,
        wanted=lambda path: path.suffix in _TEXT_SUFFIXES or path.name in _TEXT_NAMES,
        min_bytes=1,
        max_bytes=_MAX_SOURCE_BYTES,
        skip_folder=lambda name: name == "__pycache__" or name.startswith("."),
    )


def _images(directory: Path) -> list[Path]:
    """:returns: The PNG and JPEG files under `directory` (none if it is not a folder), tiny and huge ones skipped."""
    if not directory.is_dir():
        return []
    return _regular_files(
        directory,
        wanted=lambda path: path.suffix.lower() in _IMAGE_SUFFIXES,
        min_bytes=_MIN_IMAGE_BYTES,
        max_bytes=_MAX_IMAGE_BYTES,
        skip_folder=lambda _name: False,
    )


def _regular_files(
    directory: Path,
    *,
    wanted: Callable[[Path], bool],
    min_bytes: int,
    max_bytes: int,
    skip_folder: Callable[[str], bool],
) -> list[Path]:
    """
    Walk `directory` in sorted order and keep the regular files (not links) that are wanted and of a fitting size.

    :param directory: Where to look.
    :param wanted: Whether a file's path (by its name) is of interest; only those are `lstat`-ed.
    :param min_bytes: Smallest size kept.
    :param max_bytes: Largest size kept.
    :param skip_folder: Whether a subfolder, by its name, is not walked into.
    :returns: The files, in walk order: each folder's files sorted by name, then its subfolders sorted by name.
    """
    found: list[Path] = []
    for folder, subfolders, names in os.walk(directory):
        subfolders[:] = sorted(name for name in subfolders if not skip_folder(name))
        for name in sorted(names):
            path = Path(folder) / name
            if not wanted(path):
                continue
            try:
                status = path.lstat()
            except OSError:
                continue
            if stat.S_ISREG(status.st_mode) and min_bytes <= status.st_size <= max_bytes:
                found.append(path)
    return found
