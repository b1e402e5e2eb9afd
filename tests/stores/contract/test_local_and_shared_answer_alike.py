"""Both stores at once: the same work on each gives the same references, errors, rows, figures and reports."""

from dataclasses import asdict
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from casstore import CasStoreError
from casstore.history.stats import namespaces, namespaces_holding, offload_log, stats
from casstore.index.writes import OffloadRecord
from casstore.maintenance.checks import GarbageReport, collect_garbage, verify
from tests.store_backends import Backend, age_every_blob, blob_digests, make_backend

BACKENDS = ["local", "shared"]


def _scenario(backend: Backend) -> dict[str, Any]:
    """The same work on a backend, and everything it answered that should not depend on where the store lives."""
    answers: dict[str, Any] = {}
    alice, bob = backend.open(namespace="alice", inline_max=2048), backend.open(namespace="bob", inline_max=2048)
    mark = alice.repository.history.mark()
    contents: list[tuple[str, str | bytes]] = [
        ("0_search_1.txt", "results\n" * 20),
        ("1_render_1.png", b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4),
        ("2_read_file_1.txt", "".join(f"line {n}\n" for n in range(5000))),
        ("3_blob", bytes(range(256)) * 200),
        ("4 odd key.<x>", ""),
        ("5_astral.md", "\U0001f600\x00"),
    ]
    answers["references"] = [alice.write(key=key, content=content) for key, content in contents]
    answers["bob's"] = [bob.write(key=key, content=content) for key, content in contents[:3]]
    answers["prepared"] = [alice.prepare_write(key=key, content=content).reference for key, content in contents]
    answers["read"] = [alice.read(reference) for reference in answers["references"]]
    errors: list[str] = []
    for reference in (answers["references"][4], "blake3/00/" + "0" * 62, "not a reference"):
        try:
            bob.read(reference)
        except CasStoreError as error:
            errors.append(f"{type(error).__name__}: {error}")
    answers["errors"] = errors
    alice.record_offloads(
        compaction_id="c1", offloads=[OffloadRecord("search", "s1", answers["references"][:2], 500, 450)]
    )
    answers["blobs"] = [
        (digest, size, stored_size, stored_in.replace(backend.stored_elsewhere, "elsewhere"))
        for digest, size, stored_size, stored_in in backend.rows(
            "SELECT digest, size, stored_size, stored_in FROM blobs ORDER BY digest"
        )
    ]
    figures = stats(alice)
    answers["stats"] = {
        name: getattr(figures, name)
        for name in ("blobs", "writes", "logical_bytes", "unique_bytes", "stored_bytes", "dedup_ratio")
    } | {"compression_ratio": figures.compression_ratio}
    answers["namespaces"] = [
        {key: value for key, value in row.items() if key not in {"first_write", "last_write"}}
        for row in figures.namespaces
    ]
    answers["tools"] = figures.tools
    answers["namespace list"] = namespaces(alice)
    answers["holding"] = [namespaces_holding(bob, reference) for reference in answers["references"]]
    answers["figures since"] = alice.repository.history.figures_since(namespace="alice", mark=mark)
    answers["writes since"] = alice.repository.history.writes_since(namespace="bob", mark=mark)
    answers["log"] = [
        (entry.namespace, entry.tool_name, entry.tool_call_id, entry.references, entry.compaction_id)
        for entry in offload_log(alice)
    ]
    report = verify(alice)
    answers["verify"] = (report.ok, report.clean, report.blobs_checked, report.unreferenced_blobs)
    answers["gc 1"] = _counts(collect_garbage(alice, namespace="alice"))
    age_every_blob(backend)
    answers["gc 2"] = _counts(collect_garbage(alice, grace=timedelta(0)))
    answers["left"] = blob_digests(backend)
    return answers


def _counts(report: GarbageReport) -> dict[str, object]:
    """
    A gc report without the sizes the two backends keep in their own ways (a file on disk, tables and objects), what
    each does with the space (`index_space`) and times by each one's clock (`collectable_from`).
    """
    own_ways = {"index_space", "collectable_from"}
    return {
        name: value
        for name, value in asdict(report).items()
        if not name.endswith(("_before", "_after")) and name not in own_ways
    }


def test_local_and_shared_stores_answer_alike(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """The same work on both backends gives the same references, errors, rows, figures and reports."""
    answers = {}
    for kind in BACKENDS:
        backend = make_backend(kind, request, tmp_path)
        try:
            answers[kind] = _scenario(backend)
        finally:
            backend.close()
    local, shared = answers["local"], answers["shared"]
    for name in local:
        assert shared[name] == local[name], name
    assert shared == local
