"""
The names a user imports and the commands a user types, listed here one by one: moving code between modules must
never move one of them.
"""

import importlib

import pytest

from casstore.cli import cli

PUBLIC_NAMES = {
    "casstore": [
        "ArchiveRecord",
        "BlobLocationError",
        "CasStoreError",
        "CompactionRecord",
        "ContentAddressedToolResultStore",
        "CorruptBlobError",
        "IndexDamagedError",
        "InvalidContentError",
        "InvalidKeyError",
        "InvalidReferenceError",
        "OffloadRecord",
        "PreparedWrite",
        "ReadOnlyStoreError",
        "ReferenceNotFoundError",
        "SchemaError",
        "SearchUnavailableError",
        "SharedToolResultStore",
        "StorageError",
        "StoreClosedError",
        "UnsafeBlobError",
    ],
    "casstore.compactor": [
        "CompactorChain",
        "DedupOffloadCompactor",
        "StepArchiveCompactor",
        "keep_in_context",
        "make_read_tool",
        "make_search_tool",
    ],
}

COMMANDS = {
    "cat": {"blobs", "index", "lines", "namespace", "output", "reference", "root"},
    "copy": {"as_json", "root", "to_blobs", "to_index"},
    "datasette-metadata": set(),
    "demo": {"as_json", "blobs", "corpus", "index", "namespace", "report_path", "root", "steps"},
    "gc": {"as_json", "blobs", "dry_run", "grace", "index", "max_size", "namespace", "older_than", "root", "vacuum"},
    "log": {"as_json", "blobs", "index", "limit", "namespace", "root", "since", "tool"},
    "relocate-blobs": {"blobs", "index"},
    "report": {"blobs", "index", "namespace", "output", "root", "since"},
    "search-index": {"as_json", "blobs", "index", "rebuild", "root"},
    "stats": {"as_json", "blobs", "index", "namespace", "root"},
    "verify": {"as_json", "blobs", "index", "root"},
}


@pytest.mark.parametrize("module, name", [(module, name) for module, names in PUBLIC_NAMES.items() for name in names])
def test_each_public_name_imports_from_its_package(module: str, name: str) -> None:
    package = importlib.import_module(module)
    assert name in package.__all__
    assert getattr(package, name).__name__ == name


def test_the_packages_export_no_name_this_list_does_not_know() -> None:
    for module, names in PUBLIC_NAMES.items():
        assert sorted(importlib.import_module(module).__all__) == sorted(names), module


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_each_command_keeps_its_options(command: str) -> None:
    assert command in cli.commands
    assert {parameter.name for parameter in cli.commands[command].params} == COMMANDS[command]


def test_the_command_has_no_command_this_list_does_not_know() -> None:
    assert set(cli.commands) == set(COMMANDS)
