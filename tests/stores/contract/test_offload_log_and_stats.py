"""
The history a store keeps: one offload row per offload recorded, the offload log, and stats of the whole store
or of one namespace.
"""

import json
import os
from datetime import timedelta

from casstore.history.figures import ratio
from casstore.history.stats import offload_log, stats
from casstore.index.writes import OffloadRecord
from tests.helpers import blake3_hex
from tests.store_backends import TIMESTAMP, Backend, StoreFactory


def test_record_offloads_appends_one_row_per_offload(backend: Backend, open_store: StoreFactory) -> None:
    alice, bob = open_store(namespace="alice"), open_store(namespace="bob")
    log = alice.write(key="0_run_tests_1.txt", content="log\n" * 100)
    image = alice.write(key="1_render_2.png", content=b"\x89PNG image")
    alice.record_offloads(
        compaction_id="c1",
        offloads=[
            OffloadRecord("run_tests", "call_1", [log], 120, 100),
            OffloadRecord("render", None, [log, image], 900, 850),
        ],
    )
    bob.record_offloads(compaction_id="c2", offloads=[OffloadRecord("search", "s1", [log], 50, 30)])
    alice.record_offloads(compaction_id="c3", offloads=[])
    rows = backend.rows(
        "SELECT compaction_id, namespace, tool_name, tool_call_id, refs, original_tokens, saved_tokens, offloaded_at "
        "FROM offloads ORDER BY id"
    )
    assert [(*row[:4], json.loads(row[4]), *row[5:7]) for row in rows] == [
        ("c1", "alice", "run_tests", "call_1", [log], 120, 100),
        ("c1", "alice", "render", None, [log, image], 900, 850),
        ("c2", "bob", "search", "s1", [log], 50, 30),
    ]
    assert all(TIMESTAMP.match(row[7]) for row in rows)
    # The two writes' keys have the offload hook's shape, so the log lists them too, as the hook's.
    entries = offload_log(alice, namespace="alice")
    assert [entry.key for entry in entries if entry.source == "hook"] == ["1_render_2.png", "0_run_tests_1.txt"]
    entries = [entry for entry in entries if entry.source == "compactor"]
    assert [(entry.tool_name, entry.references, entry.compaction_id) for entry in entries] == [
        ("render", [log, image], "c1"),
        ("run_tests", [log], "c1"),
    ]
    assert [entry.tool_name for entry in offload_log(bob, tool="search")] == ["search"]
    assert len(offload_log(bob, since=timedelta(days=1), limit=2)) == 2


def test_stats_and_offload_log(open_store: StoreFactory) -> None:
    alice, bob = open_store(namespace="alice"), open_store(namespace="bob")
    log = "test_case ... ok\n" * 500
    references = [alice.write(key=f"{n}_run_tests.txt", content=log) for n in range(3)]
    references.append(bob.write(key="0_run_tests.txt", content=log))
    image = bob.write(key="1_render.png", content=b"\x89PNG" + b"\x00" * 1000)
    alice.record_offloads(compaction_id="c1", offloads=[OffloadRecord("run_tests", "t1", references[:1], 2200, 2150)])
    bob.record_offloads(compaction_id="c2", offloads=[OffloadRecord("render", "r1", [image], 400, 350)])
    figures = stats(alice)
    assert (figures.blobs, figures.writes) == (2, 5)
    assert figures.logical_bytes == 4 * len(log) + 1004
    assert figures.unique_bytes == len(log) + 1004
    assert figures.stored_bytes < figures.unique_bytes
    assert figures.dedup_ratio == round(figures.logical_bytes / figures.unique_bytes, 2)
    assert figures.disk_bytes is not None and figures.disk_bytes > 0
    by_namespace = {row["namespace"]: row for row in figures.namespaces}
    assert {name: (row["writes"], row["distinct_results"], row["offloads"]) for name, row in by_namespace.items()} == {
        "alice": (3, 1, 1),
        "bob": (2, 2, 1),
    }
    assert [(row["namespace"], row["tool_name"], row["saved_tokens"]) for row in figures.tools] == [
        ("alice", "run_tests", 2150),
        ("bob", "render", 350),
    ]
    assert [row["namespace"] for row in stats(alice, namespace="bob").namespaces] == ["bob"]
    # The `{n}_run_tests.txt` writes have the offload hook's shape, but no call id tells `run` from `run_tests`.
    assert [(entry.source, entry.namespace, entry.tool_name, entry.key) for entry in offload_log(alice)] == [
        ("compactor", "bob", "render", None),
        ("compactor", "alice", "run_tests", None),
        ("hook", "bob", None, "0_run_tests.txt"),
        *[("hook", "alice", None, f"{n}_run_tests.txt") for n in (2, 1, 0)],
    ]


def test_stats_of_a_namespace_count_its_writes_and_the_blobs_they_reference(
    backend: Backend, open_store: StoreFactory
) -> None:
    alice, bob, carol = (open_store(namespace=name) for name in ("alice", "bob", "carol"))
    shared, alices, bobs = "shared by two\n" * 300, "alice's own\n" * 200, os.urandom(5_000)
    written = {
        "alice": [alice.write(key="1.txt", content=shared), alice.write(key="2.txt", content=shared)],
        "bob": [bob.write(key="1.txt", content=shared), bob.write(key="2.bin", content=bobs)],
    }
    written["alice"].append(alice.write(key="3.txt", content=alices))
    carol.write(key="1.txt", content="carol's alone\n" * 50)
    stored = dict(backend.rows("SELECT digest, stored_size FROM blobs"))
    expected = {
        "alice": (3, 2 * len(shared) + len(alices), [shared.encode(), alices.encode()]),
        "bob": (2, len(shared) + len(bobs), [shared.encode(), bobs]),
    }
    for name, (writes, logical, contents) in expected.items():
        figures = stats(carol, namespace=name)
        unique = sum(len(content) for content in contents)
        stored_bytes = sum(stored[blake3_hex(content)] for content in contents)
        assert (figures.scope, figures.namespace) == ("namespace", name)
        assert (figures.writes, figures.blobs, figures.logical_bytes) == (writes, len(contents), logical)
        assert (figures.unique_bytes, figures.stored_bytes) == (unique, stored_bytes)
        assert figures.dedup_ratio == ratio(logical, unique)
        assert figures.compression_ratio == ratio(unique, stored_bytes)
        assert figures.total_ratio == ratio(logical, stored_bytes)
        assert (figures.disk_bytes, figures.index_bytes, figures.blob_bytes) == (None, None, None)
        assert [row["namespace"] for row in figures.namespaces] == [name]
    whole = stats(carol)
    assert (whole.scope, whole.namespace, whole.writes, whole.blobs) == ("store", None, 6, 4)
    assert whole.disk_bytes is not None and whole.disk_bytes > 0
    assert stats(carol, namespace="nobody").writes == 0
