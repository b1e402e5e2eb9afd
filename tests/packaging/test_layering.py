"""
The package's layers, read from its source: each folder imports only the layers below it, and the repository's
clients (the stores, maintenance, history, the demo, the command and the compactor) never reach past it.
"""

import ast
from pathlib import Path

import pytest

import casstore

PACKAGE = Path(casstore.__file__).resolve().parent
COMPACTOR = PACKAGE.parent / "compactor"

# Bottom to top. A module may import its own layer and those listed before it, never one after.
LAYERS = [
    ("ground", {"errors", "references", "namespaces", "hook_keys", "forks", "disk", "output_file", "printable"}),
    ("index", {"index", "migrations"}),
    ("blobs", {"blobs"}),
    ("search", {"search"}),
    ("repository", {"repository"}),
    ("maintenance and history", {"maintenance", "history"}),
    ("stores", {"stores"}),
    ("the package's names", {"__init__"}),
    ("compactor", {"compactor"}),
    ("demo", {"demo"}),
    ("command", {"cli", "__main__"}),
]
_LAYER_OF = {part: number for number, (_, parts) in enumerate(LAYERS) for part in parts}
_CLIENTS = {"maintenance", "history", "stores", "compactor", "demo", "cli"}
_BELOW_THE_REPOSITORY = {"index", "blobs", "search"}
_PRIVATE_LAYER_ATTRIBUTES = {"_database", "_blobs", "_connection", "_files", "_hints"}


def _part(module: str) -> str:
    """:returns: The first name under `casstore` of a dotted module name (`casstore` alone is `__init__`)."""
    names = module.split(".")
    return names[1] if len(names) > 1 else "__init__"


def _sources() -> list[tuple[str, Path]]:
    modules = [
        (_part("casstore." + ".".join(path.relative_to(PACKAGE).with_suffix("").parts)), path)
        for path in sorted(PACKAGE.rglob("*.py"))
    ]
    modules = [("__init__" if path == PACKAGE / "__init__.py" else part, path) for part, path in modules]
    return modules + [("compactor", path) for path in sorted(COMPACTOR.glob("*.py"))]


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module == "casstore":
            # `from casstore import forks` imports a module; `from casstore import StorageError`, the package's names.
            found |= {f"casstore.{alias.name}" if alias.name in _LAYER_OF else "casstore" for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return {name for name in found if name == "casstore" or name.startswith("casstore.")}


def test_every_module_belongs_to_a_layer() -> None:
    assert {part for part, _ in _sources()} <= set(_LAYER_OF)


@pytest.mark.parametrize("part, path", _sources(), ids=lambda value: str(value).split("/work/")[-1])
def test_a_module_imports_only_its_own_layer_and_those_below(part: str, path: Path) -> None:
    own = _LAYER_OF[part]
    above = sorted(name for name in _imports(path) if _LAYER_OF[_part(name)] > own)
    assert not above, f"{path.relative_to(PACKAGE.parent)} ({LAYERS[own][0]}) imports {above} from a layer above it"


@pytest.mark.parametrize("path", [path for part, path in _sources() if part in _CLIENTS], ids=lambda path: path.name)
def test_clients_of_the_repository_never_reach_below_it(path: Path) -> None:
    below = sorted(name for name in _imports(path) if _part(name) in _BELOW_THE_REPOSITORY)
    assert not below, f"{path.name} imports {below}: ask the repository instead"
    tree = ast.parse(path.read_text())
    attributes = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    assert not attributes & _PRIVATE_LAYER_ATTRIBUTES, f"{path.name} uses {attributes & _PRIVATE_LAYER_ATTRIBUTES}"
    calls = {
        node.func.attr for node in ast.walk(tree) if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
    }
    assert not calls & {"reading", "transaction", "snapshot", "rolled_back", "execute"}, path.name
