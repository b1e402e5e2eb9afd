"""
The newcomer's first commands: `python3 dev.py demo` says what it installs while it installs (instead of a minute of
silence), and the demo's closing hint names commands that work in the user's shell, where the virtualenv's `casstore`
is not on PATH. The hinted commands are run here, in a shell with the PATH a newcomer has.
"""

import importlib.util
import os
import subprocess
import sys
import sysconfig
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from casstore.demo.session import COMMAND_VARIABLE, command_name

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(sys.executable).parent / "casstore"
# A newcomer's PATH: the system's, without the virtualenv's bin.
PLAIN_PATH = os.pathsep.join(
    folder for folder in os.environ.get("PATH", "/usr/bin:/bin").split(os.pathsep) if Path(folder) != SCRIPT.parent
)


def _hinted_commands(stdout: str) -> list[str]:
    """The `casstore` commands the demo's closing hint names, one per line."""
    lines = stdout.splitlines()
    start = next(number for number, line in enumerate(lines) if line.endswith("Explore it with these commands:"))
    end = lines.index("and its history with sqlite3:")
    return [line.strip() for line in lines[start + 1 : end]]


def _run_in_a_shell(command: str, *, cwd: Path, path: str) -> subprocess.CompletedProcess[str]:
    environment = {key: value for key, value in os.environ.items() if key != COMMAND_VARIABLE} | {"PATH": path}
    return subprocess.run(
        ["/bin/sh", "-c", command], cwd=cwd, env=environment, capture_output=True, text=True, check=False
    )


def _demo_environment(path: str, **extra: str) -> dict[str, str]:
    environment = {key: value for key, value in os.environ.items() if key != COMMAND_VARIABLE}
    return {**environment, "PATH": path, **extra}


@pytest.mark.slow
@pytest.mark.parametrize("on_path", [False, True], ids=["venv not on PATH", "venv activated"])
def test_the_closing_hint_names_commands_that_work_in_the_users_shell(tmp_path: Path, on_path: bool) -> None:
    path = os.pathsep.join([str(SCRIPT.parent), PLAIN_PATH]) if on_path else PLAIN_PATH
    completed = subprocess.run(
        [str(SCRIPT), "demo", "--steps", "25", "--root", "store"],
        cwd=tmp_path,
        env=_demo_environment(path),
        capture_output=True,
        text=True,
        check=True,
    )
    commands = _hinted_commands(completed.stdout)
    assert len(commands) == 3
    expected_prefix = "casstore " if on_path else f"{SCRIPT.absolute()} "
    assert all(command.startswith(expected_prefix) for command in commands), commands
    for command in commands:
        ran = _run_in_a_shell(command, cwd=tmp_path, path=path)
        assert ran.returncode == 0, (command, ran.stderr)
        assert "demo-" in ran.stdout  # the run's namespace, in every one of them


def test_how_the_demo_names_the_command(tmp_path: Path) -> None:
    assert command_name({COMMAND_VARIABLE: ".venv/bin/casstore", "PATH": PLAIN_PATH}) == ".venv/bin/casstore"
    assert command_name({"PATH": os.pathsep.join([str(SCRIPT.parent), PLAIN_PATH])}) == "casstore"
    assert command_name({"PATH": PLAIN_PATH}) == str(SCRIPT.absolute())
    # Another casstore first on PATH is not this one: the hint names this installation's script.
    other = tmp_path / "casstore"
    other.write_text("#!/bin/sh\nexit 0\n")
    other.chmod(0o755)
    assert command_name({"PATH": os.pathsep.join([str(tmp_path), str(SCRIPT.parent)])}) == str(SCRIPT.absolute())


def _overlay_venv(where: Path) -> Path:
    """
    A virtualenv of its own whose Python also sees this one's packages (through a `.pth` that adds them as a site
    folder): dev.py installs into it for real, with the real pip, while every dependency is already satisfied, so the
    install takes seconds, not a minute, and this test's own virtualenv is not touched.
    """
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    site_packages = subprocess.run(
        [str(where / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    ours = sysconfig.get_paths()["purelib"]
    (Path(site_packages) / "casstore-test-overlay.pth").write_text(f"import site; site.addsitedir({ours!r})\n")
    return where


@pytest.mark.slow
def test_the_first_dev_py_demo_says_what_it_installs_and_hints_at_commands_that_work(tmp_path: Path) -> None:
    venv = _overlay_venv(tmp_path / ".venv")  # in the user's folder, as dev.py's own .venv is in the clone
    environment = _demo_environment(PLAIN_PATH, CASSTORE_VENV=str(venv))
    first = subprocess.run(
        [sys.executable, str(ROOT / "dev.py"), "demo", "--steps", "25", "--root", "store"],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        check=False,
        timeout=280,
    )
    assert first.returncode == 0, first.stderr
    steps = [line for line in first.stderr.splitlines() if line.startswith("dev.py: ")]
    assert steps[0] == f"dev.py: {venv} exists but casstore was never installed in it by dev.py: installing"
    assert steps[1] == "dev.py: [1/2] updating pip in it ..."
    assert steps[2].startswith("dev.py: [2/2] installing casstore (editable) with its test tools")
    assert steps[3].startswith(f"dev.py: {venv} is ready (") and len(steps) == 4
    # pip's own output, between the steps and on stderr, so that stdout is the demo's alone.
    between = first.stderr.split(steps[2], 1)[1].split(steps[3], 1)[0]
    assert "Requirement already satisfied: haystack-ai" in between and "Successfully installed casstore" in between
    assert "Requirement already satisfied" not in first.stdout
    assert first.stdout.startswith("casstore demo: 25 agent steps")
    commands = _hinted_commands(first.stdout)
    assert commands and all(command.startswith(".venv/bin/casstore ") for command in commands), commands
    for command in commands:
        ran = _run_in_a_shell(command, cwd=tmp_path, path=PLAIN_PATH)
        assert ran.returncode == 0, (command, ran.stderr)
    # Installed and stamped: the next run says nothing of installing.
    again = subprocess.run(
        [sys.executable, str(ROOT / "dev.py"), "demo", "--steps", "3", "--root", "store", "--json"],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert not [line for line in again.stderr.splitlines() if line.startswith("dev.py: ")]
    assert again.stdout.lstrip().startswith("{")


def _dev_script() -> ModuleType:
    """dev.py as a module (it is a script at the repository's root, not part of the package)."""
    spec = importlib.util.spec_from_file_location("dev_script", ROOT / "dev.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_quick_tier_leaves_out_only_the_tests_marked_slow() -> None:
    arguments = _dev_script().pytest_arguments
    assert arguments(["--quick"], cores=1) == ["-m", "not slow"]
    assert arguments(["--quick", "-k", "gc", "-x"], cores=1) == ["-m", "not slow", "-k", "gc", "-x"]
    assert arguments(["-k", "gc"], cores=1) == ["-k", "gc"]  # the full run passes everything on as it came
    assert arguments([], cores=1) == []


def test_both_tiers_run_a_worker_more_than_cores_up_to_a_limit() -> None:
    dev = _dev_script()
    assert dev.pytest_arguments([], cores=2) == ["-n", "3"]
    assert dev.pytest_arguments(["--quick", "-x"], cores=2) == ["-n", "3", "-m", "not slow", "-x"]
    assert dev.pytest_arguments(["-k", "gc"], cores=4) == ["-n", "5", "-k", "gc"]
    assert dev.pytest_arguments([], cores=64) == ["-n", str(dev.MAX_WORKERS)]


def test_one_test_file_runs_in_one_process_and_more_run_in_parallel() -> None:
    arguments = _dev_script().pytest_arguments
    one = str(ROOT / "tests" / "stores" / "contract" / "test_one_blob_per_content.py")
    other = str(ROOT / "tests" / "cli" / "test_cli.py")
    assert arguments([one, "-q"], cores=2) == [one, "-q"]
    assert arguments([f"{one}::test_a", f"{one}::test_b"], cores=2) == [f"{one}::test_a", f"{one}::test_b"]
    assert arguments(["--quick", one], cores=2) == ["-m", "not slow", one]
    assert arguments([one, other], cores=2) == ["-n", "3", one, other]
    assert arguments([str(ROOT / "tests")], cores=2) == ["-n", "3", str(ROOT / "tests")]


@pytest.mark.parametrize("choice", [["-n", "4"], ["-n4"], ["--numprocesses=3"], ["-p", "no:xdist"], ["--pdb"]])
def test_the_callers_own_choice_of_workers_is_kept(choice: list[str]) -> None:
    assert _dev_script().pytest_arguments([*choice, "-x"], cores=2) == [*choice, "-x"]


@settings(max_examples=100, deadline=None)
@given(
    given_arguments=st.lists(
        st.sampled_from(["--quick", "-x", "-q", "-k", "gc", "-n", "2", "tests", "tests/cli/test_cli.py", "nowhere.py"]),
        max_size=6,
    ),
    cores=st.integers(min_value=1, max_value=100),
)
def test_every_argument_is_passed_on_in_order_and_workers_are_added_at_most_once(
    given_arguments: list[str], cores: int
) -> None:
    passed = _dev_script().pytest_arguments(given_arguments, cores=cores)
    kept = [argument for argument in given_arguments if argument != "--quick"]
    quick = ["-m", "not slow"] if "--quick" in given_arguments else []
    added = passed[: len(passed) - len(quick) - len(kept)]
    assert passed[len(added) :] == quick + kept
    assert added in ([], ["-n", str(min(cores + 1, 8))])
    if "-n" in given_arguments or cores == 1:
        assert added == []


def test_the_tests_may_cache_bytecode_whatever_the_callers_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.setenv("CASSTORE_SOMETHING", "kept")
    environment = _dev_script()._test_environment()
    assert "PYTHONDONTWRITEBYTECODE" not in environment
    assert environment["CASSTORE_SOMETHING"] == "kept"
