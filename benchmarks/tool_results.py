"""
The tools the simulated agent calls, each computing its real output: file reads, edits, searches, listings, git, images.

Each tool takes the `AgentSession`, makes its choices with the session's generator, and returns the call's arguments
and its parts as `(extension, content)`: one text part, or a text description plus the image's bytes. Outputs look
like common agent tools': numbered lines cut at a line length, `grep -rn`-like matches, `ls -la`-like listings, and
`git diff` / `git status` of the agent's own edits.
"""

import difflib
import os
import re
import stat
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from benchmarks.agent_session import AgentSession, remember
from benchmarks.trace_plan import SCALE_READ_MAX_BYTES

#: A tool's call: its arguments, and its parts as `(extension, content)`, text or image bytes.
ToolOutput = tuple[dict[str, object], list[tuple[str, str | bytes]]]

_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
_JPEG_MAGIC = b"\xff\xd8\xff"
# Like common agent file tools: at most this many lines per read, each cut at this many characters.
_READ_MAX_LINES = 2000
_READ_MAX_LINE_CHARS = 2000
_PAGE_LINES = 400
# Files larger than this are read page by page.
_PAGED_FILE_BYTES = 24 * 1024
_GREP_MAX_MATCHES = 200
_GREP_MAX_LINE_CHARS = 300
_GREP_MAX_FILES = 300
_GREP_CACHED = 128
_IDENTIFIER = re.compile(r"^\s*(?:def|class|async def)\s+([A-Za-z_][A-Za-z0-9_]{3,})", re.MULTILINE)
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")


def _read_file(session: AgentSession) -> ToolOutput:
    """Read a whole file (its first `_READ_MAX_LINES` lines); the "scale" profile prefers small files."""
    limit = SCALE_READ_MAX_BYTES if session.size.profile == "scale" else None
    path = session.pick_file(reread=0.55, max_bytes=limit)
    lines = session.text(path).splitlines()
    output = _numbered(lines[:_READ_MAX_LINES], start=1)
    if len(lines) > _READ_MAX_LINES:
        output += f"\n... ({len(lines) - _READ_MAX_LINES} more lines; read with offset and limit to see them)"
    return {"path": session.display(path)}, [(".txt", output)]


def _read_range(session: AgentSession) -> ToolOutput:
    """Read a range of lines: often one read before again, else a new one in a recent file."""
    task = session.task
    if task.ranges and session.rng.random() < 0.4:
        path, start, count = session.pick_recent(task.ranges, rate=0.5)
    else:
        path = session.pick_file(reread=0.6)
        total = max(1, session.text(path).count("\n"))
        count = session.rng.choice((20, 30, 40, 60, 80, 120))
        start = session.rng.randint(1, max(1, total - count // 2))
        remember(task.ranges, (path, start, count), keep=30)
    lines = session.text(path).splitlines()
    output = _numbered(lines[start - 1 : start - 1 + count], start=start)
    return {"path": session.display(path), "offset": start, "limit": count}, [(".txt", output)]


def _read_page(session: AgentSession) -> ToolOutput:
    """Read the next page of a large file, sometimes going back to one seen; may ask for the page after."""
    task = session.task
    candidates = [path for path in task.recent if session.stat(path).st_size > _PAGED_FILE_BYTES]
    if candidates and session.rng.random() < 0.7:
        path = candidates[-1]
    else:
        path = session.pick_file(reread=0.0)
        for _ in range(12):
            if session.stat(path).st_size > _PAGED_FILE_BYTES:
                break
            path = task.files[session.rng.randrange(len(task.files))]
    lines = session.text(path).splitlines()
    pages = max(1, -(-len(lines) // _PAGE_LINES))
    # Paging goes forward; now and then the agent goes back to a page it already saw.
    page = task.pages.get(path, -1) + 1
    if page >= pages or session.rng.random() < 0.25:
        page = session.rng.randrange(pages)
    task.pages[path] = page
    if page + 1 < pages and session.rng.random() < 0.6:
        session.pending.append("read_page")
    start = page * _PAGE_LINES
    output = _numbered(lines[start : start + _PAGE_LINES], start=start + 1)
    output += f"\n\n(page {page + 1} of {pages}; lines {start + 1}-{min(len(lines), start + _PAGE_LINES)})"
    return {"path": session.display(path), "offset": start + 1, "limit": _PAGE_LINES}, [(".txt", output)]


def _edit_file(session: AgentSession) -> ToolOutput:
    """Make a small edit to a recent file (kept in the task), and often ask to look at it again or at the diff."""
    task = session.task
    rng = session.rng
    path = session.pick_file(reread=0.8)
    lines = session.text(path).splitlines()
    if not lines:
        lines = [""]
    at = rng.randrange(len(lines))
    kind = rng.random()
    indent = lines[at][: len(lines[at]) - len(lines[at].lstrip())]
    if kind < 0.4:
        # Copy a nearby real line with a small change, as a fix would.
        source = lines[max(0, at - rng.randint(1, 20))]
        lines.insert(at, source.rstrip() + ("  # noqa" if rng.random() < 0.3 else ""))
    elif kind < 0.75:
        words = _WORD.findall(lines[at])
        if words:
            word = rng.choice(words)
            lines[at] = lines[at].replace(word, f"{word}_v{task.edit_epoch + 2}", 1)
        else:
            lines.insert(at, indent + "pass")
    elif kind < 0.9 and len(lines) > 1:
        del lines[at]
    else:
        lines.insert(at, f"{indent}# TODO(agent): revisit {session.display(path).rsplit('/', 1)[-1]}")
    task.edited[path] = "\n".join(lines) + "\n"
    task.edit_epoch += 1
    # After an edit an agent usually looks again: the new version, or the diff.
    follow = rng.random()
    if follow < 0.45:
        session.pending.append("read_file" if rng.random() < 0.6 else "read_range")
        session.touch(path)
    elif follow < 0.7:
        session.pending.append("git_diff")
    low, high = max(0, at - 5), min(len(lines), at + 6)
    output = (
        f"The file {session.display(path)} has been updated. Here's the result of running `cat -n` on a snippet "
        f"of the edited file:\n{_numbered(lines[low:high], start=low + 1)}"
    )
    return {"path": session.display(path), "line": at + 1}, [(".txt", output)]


def _grep(session: AgentSession) -> ToolOutput:
    """Search for an identifier defined in a recent file, in its folder or the one above; searches come back."""
    task = session.task
    if task.searches and session.rng.random() < 0.4:
        pattern, folder = session.pick_recent(task.searches, rate=0.4)
    else:
        path = session.pick_file(reread=0.5)
        names = _IDENTIFIER.findall(session.text(path))
        pattern = session.rng.choice(names) if names else path.stem
        scope = path.parent
        if session.rng.random() < 0.5 and scope != task.root:
            scope = scope.parent
        folder = str(scope)
        remember(task.searches, (pattern, folder), keep=30)
    key = (pattern, folder, task.edit_epoch if task.edited else -1)
    output = session.greps.get(key)
    if output is None:
        output = _run_grep(session, pattern, Path(folder))
        session.greps[key] = output
        if len(session.greps) > _GREP_CACHED:
            session.greps.popitem(last=False)
    return {"pattern": pattern, "path": session.display(Path(folder))}, [(".txt", output)]


def _run_grep(session: AgentSession, pattern: str, folder: Path) -> str:
    """:returns: `grep -rn pattern folder` over the task's files, as the agent sees them (edits included)."""
    matches: list[str] = []
    prefix = str(folder) + os.sep
    searched = 0
    for path in session.task.files:
        if not str(path).startswith(prefix):
            continue
        searched += 1
        if searched > _GREP_MAX_FILES:
            break
        text = session.text(path)
        if pattern not in text:
            continue
        display = session.display(path)
        for number, line in enumerate(text.splitlines(), start=1):
            if pattern in line:
                matches.append(f"{display}:{number}:{line[:_GREP_MAX_LINE_CHARS]}")
        if len(matches) >= _GREP_MAX_MATCHES:
            break
    if not matches:
        return f"No matches for '{pattern}' in {session.display(folder)}"
    shown = matches[:_GREP_MAX_MATCHES]
    more = len(matches) - len(shown)
    return "\n".join(shown) + (f"\n[... {more} more matches]" if more > 0 else "")


def _list_dir(session: AgentSession) -> ToolOutput:
    """List a recent file's folder (or one above it) like `ls -la`; listings come back."""
    task = session.task
    if task.listings and session.rng.random() < 0.5:
        folder = session.pick_recent(task.listings, rate=0.5)
    else:
        path = session.pick_file(reread=0.3)
        folder = path.parent
        while folder != task.root and session.rng.random() < 0.3:
            folder = folder.parent
        remember(task.listings, folder, keep=20)
    entries = []
    for entry in sorted(os.listdir(folder)):
        if entry == "__pycache__":
            continue
        status = session.stat(folder / entry)
        stamp = time.strftime("%b %d %H:%M", time.gmtime(status.st_mtime))
        entries.append(
            f"{stat.filemode(status.st_mode)} {status.st_nlink:2d} root root {status.st_size:8d} {stamp} {entry}"
        )
    output = f"total {len(entries)}\n" + "\n".join(entries)
    return {"path": session.display(folder)}, [(".txt", output)]


def _git_diff(session: AgentSession) -> ToolOutput:
    """`git diff` of the task's edits against the files on disk."""
    task = session.task
    chunks: list[str] = []
    for path in sorted(task.edited):
        display = session.display(path)
        diff = difflib.unified_diff(
            session.original_text(path).splitlines(),
            task.edited[path].splitlines(),
            f"a/{display}",
            f"b/{display}",
            lineterm="",
        )
        body = "\n".join(diff)
        if body:
            chunks.append(f"diff --git a/{display} b/{display}\n{body}")
    return {"command": "git diff"}, [(".txt", "\n".join(chunks) if chunks else "(no changes)")]


def _git_status(session: AgentSession) -> ToolOutput:
    """`git status` of the task's edits, on a branch named after the project."""
    task = session.task
    lines = [f"On branch agent/{task.name}", "Changes not staged for commit:"]
    lines += [f"\tmodified:   {session.display(path)}" for path in sorted(task.edited)]
    if not task.edited:
        lines = [f"On branch agent/{task.name}", "nothing to commit, working tree clean"]
    return {"command": "git status"}, [(".txt", "\n".join(lines))]


def _git_log(session: AgentSession) -> ToolOutput:
    """Real `git log` output at one of the history's commits."""
    arguments, output = session.git.log(session.git_rng)
    return arguments, [(".txt", output or "(empty)")]


def _git_show(session: AgentSession) -> ToolOutput:
    """Real `git show` output of one of the history's commits."""
    arguments, output = session.git.show(session.git_rng)
    return arguments, [(".txt", output or "(empty)")]


def _view_image(session: AgentSession) -> ToolOutput:
    """Look at an image: a text description, then the image's bytes, as a multi-part result."""
    images = session.corpus.images
    # A few images come back again and again (the same screenshot, the same plot).
    if session.rng.random() < 0.5:
        path = images[int(session.rng.paretovariate(1.2) * 7) % len(images)]
    else:
        path = images[session.rng.randrange(len(images))]
    data = path.read_bytes()
    extension = ".png" if data.startswith(_PNG_MAGIC) else ".jpg" if data.startswith(_JPEG_MAGIC) else ".bin"
    description = f"Image {path.name}: {len(data)} bytes, {_image_size(data)}"
    return {"path": str(path)}, [(".txt", description), (extension, data)]


#: Every tool by the name `TOOL_WEIGHTS` gives it.
TOOLS: dict[str, Callable[[AgentSession], ToolOutput]] = {
    "read_file": _read_file,
    "read_range": _read_range,
    "read_page": _read_page,
    "edit_file": _edit_file,
    "grep": _grep,
    "list_dir": _list_dir,
    "git_diff": _git_diff,
    "git_status": _git_status,
    "git_log": _git_log,
    "git_show": _git_show,
    "view_image": _view_image,
}


def _numbered(lines: Sequence[str], *, start: int) -> str:
    """:returns: `lines` as `cat -n` shows them, numbered from `start`, each cut at `_READ_MAX_LINE_CHARS`."""
    return "\n".join(f"{number:6d}\t{line[:_READ_MAX_LINE_CHARS]}" for number, line in enumerate(lines, start=start))


def _image_size(data: bytes) -> str:
    """:returns: A PNG's width and height, or just the format."""
    if data.startswith(_PNG_MAGIC) and len(data) >= 24:
        return f"{int.from_bytes(data[16:20], 'big')}x{int.from_bytes(data[20:24], 'big')} PNG"
    return "JPEG" if data.startswith(_JPEG_MAGIC) else "unknown format"
