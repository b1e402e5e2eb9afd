"""
casstore installs and works with every runtime dependency at the lowest version `pyproject.toml` declares.

The floors are read from `pyproject.toml`, so raising or lowering one changes what this test installs. The package is
installed as a user would install it (not editable), from a copy of the repository, into a fresh virtualenv, and
`installed_smoke.py` then uses it end to end there. pip's cache makes later runs faster than the first.
"""

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
SMOKE_SCRIPT = Path(__file__).resolve().parents[1] / "installed_smoke.py"
# Left out of the copy that is installed: the development virtualenv, build output and caches.
NOT_COPIED = shutil.ignore_patterns(
    ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".*_cache", ".hypothesis"
)


def _pyproject() -> dict[str, object]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


# The optional extras the floor test installs too: the shared store's engines.
TESTED_EXTRAS = ("shared",)


def declared_floors() -> dict[str, str]:
    """Each runtime dependency's name (the shared store's extra included) and the version its `>=` names."""
    project = _pyproject()["project"]
    assert isinstance(project, dict)
    floors = {}
    lines = [
        *project["dependencies"],
        *(line for extra in TESTED_EXTRAS for line in project["optional-dependencies"][extra]),
    ]
    for line in lines:
        requirement = Requirement(line)
        lowest = [specifier.version for specifier in requirement.specifier if specifier.operator == ">="]
        assert len(lowest) == 1, f"the dependency {line!r} in pyproject.toml must declare one floor, with >="
        floors[requirement.name] = lowest[0]
    return floors


def expected_modules() -> list[str]:
    """Every module the distribution installs, by its installed name, from the packages pyproject.toml lists."""
    setuptools = _pyproject()["tool"]
    assert isinstance(setuptools, dict)
    packages: list[str] = setuptools["setuptools"]["packages"]
    folders: dict[str, str] = setuptools["setuptools"].get("package-dir", {})
    modules = []
    for package in packages:
        folder = ROOT / _folder_of(package, folders)
        for source in sorted(folder.glob("*.py")):
            modules.append(package if source.stem == "__init__" else f"{package}.{source.stem}")
    return modules


def _folder_of(package: str, folders: dict[str, str]) -> str:
    """Where a package's sources are: under the longest `package-dir` entry it falls under, as setuptools finds it."""
    parts = package.split(".")
    for length in range(len(parts), 0, -1):
        mapped = folders.get(".".join(parts[:length]))
        if mapped is not None:
            return "/".join([mapped, *parts[length:]])
    return package.replace(".", "/")


def _run(command: list[str | Path], *, cwd: Path) -> subprocess.CompletedProcess[str]:
    # The child must see only its own virtualenv: nothing of the development one, nor an outside PYTHONPATH.
    environment = {name: value for name, value in os.environ.items() if name not in {"PYTHONPATH", "VIRTUAL_ENV"}}
    return subprocess.run(
        [str(part) for part in command], cwd=cwd, env=environment, capture_output=True, text=True, check=False
    )


def _output(completed: subprocess.CompletedProcess[str]) -> str:
    return f"exit status {completed.returncode}\n--- stdout ---\n{completed.stdout}\n--- stderr ---\n{completed.stderr}"


def test_every_dependency_declares_a_floor() -> None:
    floors = declared_floors()
    assert floors, "pyproject.toml declares no runtime dependencies"
    assert "casstore.migrations" in expected_modules() and "casstore.compactor" in expected_modules()


@pytest.mark.slow
def test_casstore_works_with_every_dependency_at_its_declared_floor(tmp_path: Path) -> None:
    floors = declared_floors()
    pins = [f"{name}=={version}" for name, version in floors.items()]
    source = tmp_path / "casstore-source"
    shutil.copytree(ROOT, source, ignore=NOT_COPIED)
    environment = tmp_path / "venv"
    created = _run([sys.executable, "-m", "venv", environment], cwd=tmp_path)
    assert created.returncode == 0, f"Could not create a virtualenv:\n{_output(created)}"
    python = environment / ("Scripts" if os.name == "nt" else "bin") / "python"

    wanted = f"{source}[{','.join(TESTED_EXTRAS)}]"
    installed = _run([python, "-m", "pip", "install", "--quiet", "--no-input", wanted, *pins], cwd=tmp_path)
    assert installed.returncode == 0, (
        f"casstore does not install with its runtime dependencies at their declared floors ({', '.join(pins)}); "
        f"raise the floor that pip names in pyproject.toml. pip said:\n{_output(installed)}"
    )
    versions = _run(
        [
            python,
            "-c",
            "import importlib.metadata, json, sys; "
            "print(json.dumps({name: importlib.metadata.version(name) for name in sys.argv[1:]}))",
            *floors,
        ],
        cwd=tmp_path,
    )
    assert versions.returncode == 0, _output(versions)
    installed_versions = {name: Version(version) for name, version in json.loads(versions.stdout).items()}
    assert installed_versions == {name: Version(version) for name, version in floors.items()}, (
        f"pip installed other versions than the pinned floors: {versions.stdout}"
    )
    license_text = _run(
        [
            python,
            "-c",
            "import importlib.metadata; print(importlib.metadata.distribution('casstore').read_text("
            "'licenses/LICENSE'), end='')",
        ],
        cwd=tmp_path,
    )
    assert license_text.returncode == 0, _output(license_text)
    assert license_text.stdout == (ROOT / "LICENSE").read_text(encoding="utf-8"), "the wheel does not ship LICENSE"

    script = tmp_path / SMOKE_SCRIPT.name
    shutil.copyfile(SMOKE_SCRIPT, script)
    work = tmp_path / "work"
    work.mkdir()
    used = _run([python, script, work, *expected_modules()], cwd=work)
    assert used.returncode == 0, (
        f"casstore installs but does not work with its runtime dependencies at their declared floors "
        f"({', '.join(pins)}); raise the floor of the dependency the traceback names in pyproject.toml:\n"
        f"{_output(used)}"
    )
    assert used.stdout.strip().endswith("casstore works"), _output(used)


def test_the_embedded_store_needs_none_of_the_shared_extra(tmp_path: Path) -> None:
    """`pip install casstore` alone: the local store works, and the shared store says which extra it needs."""
    script = """
import sys
for name in ("obstore", "psycopg", "psycopg_pool"):
    sys.modules[name] = None  # as if not installed
from casstore import ContentAddressedToolResultStore, SharedToolResultStore
with ContentAddressedToolResultStore(sys.argv[1]) as store:
    assert store.read(store.write(key="a.txt", content="works")) == "works"
try:
    SharedToolResultStore(index_url="postgresql://nobody@127.0.0.1:1/none", blob_url="file:///nowhere")
except ImportError as error:
    print(error)
"""
    completed = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "store")], capture_output=True, text=True, check=False
    )
    assert completed.returncode == 0, _output(completed)
    assert "pip install 'casstore[shared]'" in completed.stdout, _output(completed)
