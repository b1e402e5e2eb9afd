#!/usr/bin/env python3
"""
The project's two entry points, each setting up its own virtualenv (`.venv`) on first use:

    python3 dev.py demo    # run the main job: a demo agent over a real folder, then a summary
    python3 dev.py test    # ruff, mypy and the whole test suite (what CI runs)
    python3 dev.py test --quick    # ruff, mypy and every test not marked `slow`: run it after each change

Needs only `python3` (3.11+) with `pip` and `venv`. Extra arguments are passed on (`python3 dev.py test -k store`).
"""

import hashlib
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = Path(os.environ.get("CASSTORE_VENV", ROOT / ".venv"))
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PYTHON = BIN / "python"
LINTED = ["casstore", "compactor", "migrations", "tests", "benchmarks", "dev.py"]
# What mypy checks, by installed name (`casstore` includes `casstore.compactor`), and the tests and benchmarks.
MYPY_PACKAGES = ["casstore", "benchmarks", "tests"]


def _run(
    *command: str | Path,
    quiet: bool = False,
    cwd: Path = ROOT,
    to_stderr: bool = False,
    env: dict[str, str] | None = None,
) -> None:
    """
    Run a command (from the repository root, unless `cwd`); exit with its status if it fails.

    :param quiet: Capture its output, and show it only if it fails.
    :param to_stderr: Send its standard output to ours on stderr (an installer's progress, which must not mix with
        what the command after it prints on stdout, such as `demo --json`).
    """
    completed = subprocess.run(
        [str(part) for part in command],
        cwd=cwd,
        check=False,
        capture_output=quiet,
        stdout=sys.stderr if to_stderr and not quiet else None,
        text=True,
        env=env,
    )
    if completed.returncode != 0:
        if quiet:
            sys.stdout.write(completed.stdout)
            sys.stderr.write(completed.stderr)
        sys.exit(completed.returncode)


def _step(message: str) -> None:
    """A progress line of dev.py's own, on stderr."""
    print(f"dev.py: {message}", file=sys.stderr, flush=True)


def _ensure_venv() -> None:
    """
    Create `.venv` and install the project (editable, with test tools and `shared`) when pyproject.toml changed.

    Each step says what it does, and pip's own output (what it collects, downloads and installs) follows on stderr,
    so the first run, which takes about a minute, is never silent.
    """
    if sys.version_info < (3, 11):  # noqa: UP036 - dev.py runs under whatever python3 the machine has
        sys.exit(f"casstore needs Python 3.11 or newer; this is {sys.version.split()[0]}.")
    stamp = VENV / ".casstore-installed"
    wanted = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    if stamp.exists() and stamp.read_text() == wanted and PYTHON.exists():
        return
    started = time.monotonic()
    steps = 2 if PYTHON.exists() else 3
    step = 0
    if not PYTHON.exists():
        step += 1
        _step(f"[{step}/{steps}] creating the virtualenv {VENV} ...")
        _run(sys.executable, "-m", "venv", VENV, to_stderr=True)
    elif stamp.exists():
        _step(f"{VENV} was set up for another pyproject.toml: updating it")
    else:
        _step(f"{VENV} exists but casstore was never installed in it by dev.py: installing")
    step += 1
    _step(f"[{step}/{steps}] updating pip in it ...")
    _run(PYTHON, "-m", "pip", "install", "--upgrade", "pip", to_stderr=True)
    step += 1
    _step(
        f"[{step}/{steps}] installing casstore (editable) with its test tools and the shared store's packages; "
        "the first time takes about a minute, pip's output follows ..."
    )
    _run(PYTHON, "-m", "pip", "install", "--editable", f"{ROOT}[test,shared]", to_stderr=True)
    stamp.write_text(wanted)
    _step(f"{VENV} is ready ({time.monotonic() - started:.0f} s)")


def _command_for_the_shell(script: Path, cwd: Path) -> str:
    """:returns: How a shell in `cwd` runs `script`: relative (`.venv/bin/casstore`) when it is below `cwd`."""
    try:
        relative = script.relative_to(cwd)
    except ValueError:
        return shlex.quote(str(script))
    return shlex.quote(str(relative) if relative.parent != Path() else f"./{relative}")  # never a bare name


def demo(arguments: list[str]) -> None:
    """
    Run `casstore demo` in the caller's folder (where relative `--root` and `--corpus` are meant), telling it how
    the caller's shell reaches this `casstore`, which is in the virtualenv and not on PATH.
    """
    _ensure_venv()
    cwd = Path.cwd()
    command = _command_for_the_shell(BIN / "casstore", cwd)
    _run(BIN / "casstore", "demo", *arguments, cwd=cwd, env={**os.environ, "CASSTORE_COMMAND": command})


def _type_check_tree() -> Path:
    """
    A tree of links laid out as the package installs (`compactor/` as `casstore/compactor/`), for mypy.

    mypy maps folders to module names and cannot follow the editable install's import hook, so it reads the sources
    through links that give every file its installed name. Made afresh each run; it holds links only.
    """
    tree = VENV / "typecheck"
    if tree.exists():
        shutil.rmtree(tree)
    package = tree / "casstore"
    package.mkdir(parents=True)
    for source in (ROOT / "casstore").iterdir():
        if source.name != "__pycache__":
            (package / source.name).symlink_to(source)
    (package / "compactor").symlink_to(ROOT / "compactor", target_is_directory=True)
    (package / "migrations").symlink_to(ROOT / "migrations", target_is_directory=True)
    for folder in ("tests", "benchmarks"):
        (tree / folder).symlink_to(ROOT / folder, target_is_directory=True)
    return tree


CHROMIUM = Path("/usr/bin/chromium")


def _ensure_browser() -> None:
    """
    Install Debian's Chromium for the browser tests (tests/browser.py) when it is missing and this runs as root with
    apt-get; otherwise say how. In CI (CI=true) a browser test that cannot run fails, so a failed install shows there.
    """
    if CHROMIUM.exists():
        return
    if os.name != "posix" or os.geteuid() != 0 or shutil.which("apt-get") is None:
        print(
            f"No {CHROMIUM}: the browser tests will skip (in CI they fail). Install it with "
            "`sudo apt-get install -y chromium` (Debian, Ubuntu).",
            flush=True,
        )
        return
    print(
        f"No {CHROMIUM}: installing Debian's chromium for the browser tests (apt-get install -y chromium) ...",
        flush=True,
    )
    environment = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "chromium"]):
        completed = subprocess.run(command, capture_output=True, text=True, env=environment, check=False)
        if completed.returncode != 0:
            sys.stdout.write(completed.stdout[-2000:])
            sys.stderr.write(completed.stderr[-2000:])
            print(
                f"`{' '.join(command)}` failed (exit {completed.returncode}); the browser tests cannot run.", flush=True
            )
            return
    print(f"Installed {CHROMIUM}.", flush=True)


# `--quick`: the tier a developer runs after every change; the tests marked `slow` (servers restarted, subprocesses
# killed, whole agent runs, benchmarks' smoke runs) wait for the full run that CI makes.
QUICK = "--quick"
# Workers at most: each may start its own PostgreSQL and SeaweedFS (tests/servers.py), and more than this gain little.
MAX_WORKERS = 8


def _cores() -> int:
    """:returns: How many cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _one_test_file(arguments: list[str]) -> bool:
    """:returns: Whether the arguments name tests (paths, or `path::test` ids) in exactly one file, and no folder."""
    named = {Path(argument.split("::", 1)[0]) for argument in arguments if not argument.startswith("-")}
    paths = {path.resolve() for path in named if path.exists()}
    return len(paths) == 1 and all(path.is_file() for path in paths)


def _chooses_workers(arguments: list[str]) -> bool:
    """:returns: Whether the caller chose how to run the tests: `-n N`, `--numprocesses`, `-p no:xdist`, `--pdb`."""
    return any(
        argument.startswith(("-n", "--numprocesses", "--pdb")) or argument in {"no:xdist", "-pno:xdist"}
        for argument in arguments
    )


def pytest_arguments(arguments: list[str], *, cores: int | None = None) -> list[str]:
    """
    :returns: What `python3 dev.py test ARGUMENTS` passes to pytest: `--quick` becomes `-m 'not slow'`, and on 2 cores
        or more the tests run in parallel (pytest-xdist), unless the arguments name one test file (starting the
        workers costs more than they save there) or choose the workers themselves.
    """
    chosen = arguments
    if QUICK in arguments:
        chosen = ["-m", "not slow", *(argument for argument in arguments if argument != QUICK)]
    # One worker more than cores: the tests spend about a quarter of their time waiting (for subprocesses, servers,
    # the disk), which the extra worker fills (on 2 cores the quick tier took 112 s with 2 workers, 105 s with 3).
    workers = min((cores or _cores()) + 1, MAX_WORKERS)
    if workers < 3 or _one_test_file(chosen) or _chooses_workers(chosen):
        return chosen
    return ["-n", str(workers), *chosen]


def _test_environment() -> dict[str, str]:
    """
    The environment of the test run: bytecode is cached (`__pycache__`, git-ignored) even where the caller's says
    not to, as the suite starts hundreds of interpreters that would otherwise compile casstore afresh each time.
    """
    return {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}


def test(arguments: list[str]) -> None:
    arguments = pytest_arguments(arguments)
    _ensure_venv()
    _ensure_browser()
    linted = [path for path in LINTED if (ROOT / path).exists()]
    _run(BIN / "ruff", "check", *linted)
    _run(BIN / "ruff", "format", "--check", *linted)
    tree = _type_check_tree()
    _run(
        BIN / "mypy",
        "--config-file",
        ROOT / "pyproject.toml",
        "--cache-dir",
        VENV / ".mypy_cache",
        *(f"--package={name}" for name in MYPY_PACKAGES),
        cwd=tree,
    )
    _run(PYTHON, "-m", "pytest", *arguments, env=_test_environment())


def main() -> None:
    commands = {"demo": demo, "test": test}
    if len(sys.argv) < 2 or sys.argv[1] not in commands:
        sys.exit(f"usage: python3 dev.py {{{'|'.join(commands)}}} [arguments]")
    commands[sys.argv[1]](sys.argv[2:])


if __name__ == "__main__":
    main()
