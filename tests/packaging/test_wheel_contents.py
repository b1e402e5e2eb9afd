"""What the wheel installs: every package of the source tree, listed in pyproject.toml, so a non-editable install
imports what an editable one does."""

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _declared() -> tuple[set[str], dict[str, str]]:
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    return set(setuptools["packages"]), setuptools["package-dir"]


def test_every_package_folder_is_declared() -> None:
    declared, package_dirs = _declared()
    folders = {"casstore": ROOT / "casstore", **{name: ROOT / folder for name, folder in package_dirs.items()}}
    found = set()
    for name, folder in folders.items():
        for init in folder.rglob("__init__.py"):
            found.add(".".join([name, *init.parent.relative_to(folder).parts]))
    assert found == declared, f"declare in pyproject.toml's [tool.setuptools] packages: {sorted(found - declared)}"
