"""
The search index as the repository keeps it: the `search_index` switch, `casstore search-index`, namespaces that
never see or sway each other and gc removing what it deletes (on both stores), verify checking the index against the
blobs, and crashes. What only the shared store's index does is in tests/search/test_shared_search_index.py.
"""

import itertools
import json
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from contextlib import closing
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from casstore import ContentAddressedToolResultStore
from casstore import search as search_index
from casstore.cli import cli
from casstore.compactor import make_search_tool
from casstore.maintenance.checks import collect_garbage, verify
from casstore.search import fts5
from casstore.stores.local import RepositoryToolResultStore
from tests.store_backends import Backend


def _rows(root: Path, sql: str) -> list[tuple[Any, ...]]:
    with closing(sqlite3.connect(root / "index.db")) as connection:
        return connection.execute(sql).fetchall()


def _found(store: RepositoryToolResultStore, *terms: str) -> list[str]:
    return [hit.reference for hit in store.search(terms=list(terms), limit=100).hits]


def _as_long_ago(root: Path) -> None:
    # gc adds `last_seen`'s resolution to any grace period; blobs seen "long ago" need not wait it out.
    with closing(sqlite3.connect(root / "index.db")) as connection, connection:
        connection.execute("UPDATE blobs SET last_seen = '2020-01-01 00:00:00.000'")


def test_off_by_default_the_write_path_writes_no_search_rows(store: ContentAddressedToolResultStore) -> None:
    store.write(key="a.txt", content="some text to find")
    assert not store.search_index
    assert _rows(store.root, "SELECT count(*) FROM search_documents") == [(0,)]
    assert _rows(store.root, "SELECT count(*) FROM search_state") == [(0,)]
    assert not store.search(terms=["text"]).enabled


def test_on_it_indexes_text_as_written_in_the_same_transaction(store_root: Path) -> None:
    with ContentAddressedToolResultStore(store_root, search_index=True) as store:
        text = store.write(key="a.txt", content="searchable words here")
        json_file = store.write(key="data.json", content=b'{"status": "searchable"}')
        store.write(key="plot.png", content=b"\x89PNG\r\n\x1a\n" + bytes(range(256)))
        store.write(key="nul.bin", content=b"searchable\x00bytes")
        assert sorted(_found(store, "searchable")) == sorted([text, json_file])
        assert _rows(store_root, "SELECT count(*) FROM search_documents") == [(2,)]
        # A repeat adds no document.
        store.write(key="b.txt", content="searchable words here")
        assert _rows(store_root, "SELECT count(*) FROM search_documents") == [(2,)]


def test_an_indexing_store_indexes_a_repeat_of_what_a_store_without_it_wrote(store_root: Path) -> None:
    with ContentAddressedToolResultStore(store_root) as plain:
        reference = plain.write(key="a.txt", content="written before the index")
    with ContentAddressedToolResultStore(store_root, search_index=True) as indexing:
        assert _found(indexing, "before the index") == []
        assert indexing.write(key="b.txt", content="written before the index") == reference
        assert _found(indexing, "before the index") == [reference]


def test_the_setting_round_trips_through_to_dict(store_root: Path) -> None:
    with ContentAddressedToolResultStore(store_root, search_index=True) as store:
        data = store.to_dict()
    assert data["init_parameters"]["search_index"] is True
    with ContentAddressedToolResultStore.from_dict(data) as restored:
        assert restored.search_index


@pytest.mark.slow
def test_casstore_search_index_indexes_an_existing_store_and_goes_on_where_it_stopped(store_root: Path) -> None:
    with ContentAddressedToolResultStore(store_root, namespace="alice", inline_max=0) as store:
        references = [store.write(key=f"{n}.txt", content=f"result number {n} token{n:04}x") for n in range(1_200)]
        store.write(key="img.png", content=b"\x89PNG\r\n\x1a\n" + bytes(range(256)))
    result = CliRunner().invoke(cli, ["search-index", "--root", str(store_root), "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["indexed"] == 1_200 and json.loads(result.output)["skipped"] == 1
    again = CliRunner().invoke(cli, ["search-index", "--root", str(store_root), "--json"], catch_exceptions=False)
    assert json.loads(again.output)["indexed"] == 0  # nothing left to index
    with ContentAddressedToolResultStore(store_root, namespace="alice") as store:
        assert _found(store, "token0042x") == [references[42]]
        assert verify(store).search_documents_checked == 1_200


# Namespaces: nothing of another namespace is seen, counted or ranked.

_WORDS = ["alpha", "beta", "gamma", "delta", "omega", "error", "trace", "value"]
_TEXTS = st.lists(st.sampled_from(_WORDS), min_size=1, max_size=12).map(" ".join)
_EXAMPLES = itertools.count()


def _answer_of(store: RepositoryToolResultStore, query: list[str]) -> list[Any]:
    outcome = store.search(terms=query, limit=5)
    return [
        [(hit.reference, hit.terms, round(hit.score, 12), hit.size) for hit in outcome.hits],
        outcome.more_hits,
        outcome.unread,
    ]


@pytest.mark.slow
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    mine=st.lists(_TEXTS, min_size=1, max_size=12),
    theirs=st.lists(_TEXTS, max_size=25),
    shared=st.lists(st.integers(min_value=0, max_value=11), max_size=6),
    query=st.lists(st.sampled_from([*_WORDS, "lph", "mma de"]), min_size=1, max_size=3, unique=True),
    theirs_first=st.booleans(),
)
def test_another_namespaces_results_change_no_hit_order_or_count(
    backend: Backend,
    *,
    mine: list[str],
    theirs: list[str],
    shared: list[int],
    query: list[str],
    theirs_first: bool,
) -> None:
    # The other namespace also writes some of the same content (one blob, one document), before or after. Each
    # example and each half of it has namespaces of its own, as if in a store of its own.
    theirs = theirs + [mine[index % len(mine)] for index in shared]
    answers = []
    example = next(_EXAMPLES)
    for with_theirs in (False, True):
        alice = backend.open(namespace=f"alice-{example}-{with_theirs}", search_index=True)
        bob = backend.open(namespace=f"bob-{example}-{with_theirs}", search_index=True)
        if with_theirs and theirs_first:
            for number, text in enumerate(theirs):
                bob.write(key=f"{number}_bob.txt", content=text)
        for number, text in enumerate(mine):
            alice.write(key=f"{number}_alice.txt", content=text)
        if with_theirs and not theirs_first:
            for number, text in enumerate(theirs):
                bob.write(key=f"{number}_bob.txt", content=text)
        answers.append(_answer_of(alice, query))
        tool_answer = make_search_tool(alice).invoke(query=" ".join(f'"{term}"' for term in query))
        answers[-1].append(_without_times(tool_answer))
    assert answers[0] == answers[1]


def _without_times(answer: str) -> str:
    return re.sub(r"written \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} UTC", "written <time>", answer)


def test_a_namespace_never_finds_what_only_another_wrote(store_root: Path) -> None:
    with (
        ContentAddressedToolResultStore(store_root, namespace="alice", search_index=True) as alice,
        ContentAddressedToolResultStore(store_root, namespace="bob", search_index=True) as bob,
    ):
        bob.write(key="1_t_c.txt", content="bob's secret token xyzzy")
        mine = alice.write(key="1_t_c.txt", content="alice has plugh")
        assert _found(alice, "xyzzy") == []
        assert _found(alice, "plugh") == [mine]
        assert _found(bob, "plugh") == []
        # Forgetting a namespace takes its results out of its search, even while the blob stays for another.
        shared = bob.write(key="2_t_c.txt", content="both wrote this")
        alice.write(key="2_t_c.txt", content="both wrote this")
        collect_garbage(alice, namespace="alice", grace=timedelta(0))
        assert _found(alice, "both wrote") == [] and _found(bob, "both wrote") == [shared]


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(before=st.text(alphabet="ab\x00 \n", max_size=12), between=st.text(alphabet="\x00 ", min_size=1, max_size=3))
def test_a_text_holding_nul_characters_is_found_by_every_term_after_them(
    tmp_path_factory: pytest.TempPathFactory, before: str, between: str
) -> None:
    # FTS5 reads a value only up to its first NUL: what follows one must still be indexed (and removed again).
    root = tmp_path_factory.mktemp("store")
    with ContentAddressedToolResultStore(root, namespace="alice", search_index=True) as store:
        content = f"{before}\x00firstterm{between}secondterm"
        reference = store.write(key="1_t_c.txt", content=content)
        assert _found(store, "firstterm") == [reference] and _found(store, "secondterm") == [reference]
        # A term holding NULs is looked up too (FTS5 would read its query only up to the first).
        for term in (f"firstterm{between}second", "\x00\x00\x00"):
            expected = [reference] if term in content else []
            assert [hit.reference for hit in store.search(terms=[term]).hits] == expected
        assert verify(store).clean  # its check of each document's trigrams reads past a NUL too
        collect_garbage(store, namespace="alice", grace=timedelta(0))
        assert _found(store, "secondterm") == []
        with closing(sqlite3.connect(root / "index.db")) as connection:
            connection.execute("CREATE VIRTUAL TABLE temp.terms USING fts5vocab(main, search_text, row)")
            assert connection.execute("SELECT count(*) FROM temp.terms").fetchone() == (0,)
        assert verify(store).clean


def test_a_text_indexed_whole_by_an_earlier_build_is_removed_by_gc(store_root: Path) -> None:
    # An earlier build gave FTS5 a text with a NUL whole, and FTS5 indexed it up to the NUL: gc's removal must give
    # FTS5 the same trigrams back, or FTS5 calls its index malformed and every later gc fails.
    with ContentAddressedToolResultStore(store_root, namespace="alice", search_index=True) as store:
        text = "indexed before\x00the NUL was a space, and a long tail after it"
        store.write(key="1_t_c.txt", content=text)
        assert store.search(terms=["before"]).hits
        with closing(sqlite3.connect(store_root / "index.db")) as connection, connection:
            (document,) = connection.execute("SELECT id FROM search_documents").fetchone()
            tail = text.replace("\x00", " ")
            connection.execute(
                "INSERT INTO search_text (search_text, rowid, body) VALUES ('delete', ?, ?)", (document, tail)
            )
            connection.execute("INSERT INTO search_text (rowid, body) VALUES (?, ?)", (document, text))
        collect_garbage(store, namespace="alice", grace=timedelta(0))
        with closing(sqlite3.connect(store_root / "index.db")) as connection:
            connection.execute("CREATE VIRTUAL TABLE temp.terms USING fts5vocab(main, search_text, row)")
            assert connection.execute("SELECT count(*) FROM temp.terms").fetchone() == (0,)
            connection.execute("INSERT INTO search_text (search_text) VALUES ('integrity-check')")  # raises if not
        assert verify(store).clean


# gc and verify.


@pytest.mark.parametrize("inline_max", [0, 65536], ids=["file", "inline"])
def test_gc_removes_what_it_deletes_from_the_search_index(backend: Backend, inline_max: int) -> None:
    old = backend.open(namespace="old", search_index=True, inline_max=inline_max)
    new = backend.open(namespace="new", search_index=True, inline_max=inline_max)
    old.write(key="a.txt", content="goes away with gc: quux")
    kept = new.write(key="b.txt", content="stays: quux")
    assert _found(old, "quux") != [] and _found(new, "quux") == [kept]  # a search indexes what is pending first
    # gc adds `last_seen`'s resolution to any grace period; blobs seen "long ago" need not wait it out.
    backend.execute("UPDATE blobs SET last_seen = '2020-01-01 00:00:00.000'")
    report = collect_garbage(new, namespace="old", grace=timedelta(0))
    assert report.blobs_deleted == 1
    assert backend.rows("SELECT count(*) FROM search_documents") == [(1,)]
    # The text went with the document: only the kept document's row is left.
    assert backend.rows("SELECT count(*) FROM search_text") == [(1,)]
    assert _found(old, "quux") == [] and _found(new, "quux") == [kept]
    checked = verify(new)
    assert checked.ok and checked.clean and checked.search_documents_checked == 1
    assert new.repository.search.check().consistent


def test_gc_of_a_damaged_blob_leaves_trigrams_that_match_nothing_and_verify_counts_them(store_root: Path) -> None:
    with ContentAddressedToolResultStore(store_root, namespace="old", search_index=True) as old:
        reference = old.write(key="a.txt", content="damaged then collected: frobnicate")
    with closing(sqlite3.connect(store_root / "index.db")) as connection, connection:
        connection.execute("UPDATE blob_frames SET frame = x'00'")
    with ContentAddressedToolResultStore(store_root, namespace="new", search_index=True) as new:
        _as_long_ago(store_root)
        collect_garbage(new, namespace="old", grace=timedelta(0))
        report = verify(new)
        assert report.ok and not report.clean and report.search_stray_rows == 1
        # Written again, the same content gets a new document: the stray trigrams never match it or anything.
        assert new.write(key="b.txt", content="damaged then collected: frobnicate") == reference
        assert _found(new, "frobnicate") == [reference]
        new.repository.search.build(rebuild=True)
        assert verify(new).clean


def test_verify_finds_a_document_that_does_not_match_its_blob_and_a_rebuild_repairs_it(store_root: Path) -> None:
    with ContentAddressedToolResultStore(store_root, search_index=True) as store:
        reference = store.write(key="a.txt", content="the real text of the result")
        store.write(key="b.txt", content="another result entirely")
    with closing(sqlite3.connect(store_root / "index.db")) as connection, connection:
        # Swap the trigrams of one document for another text's, as a damaged index would hold them.
        (document,) = connection.execute("SELECT min(id) FROM search_documents").fetchone()
        connection.execute(
            "INSERT INTO search_text (search_text, rowid, body) VALUES ('delete', ?, ?)",
            (document, "the real text of the result"),
        )
        connection.execute("INSERT INTO search_text (rowid, body) VALUES (?, 'something else')", (document,))
    with ContentAddressedToolResultStore(store_root) as store:
        report = verify(store)
        assert not report.ok and report.search_mismatched == 1
        result = CliRunner().invoke(cli, ["verify", "--root", str(store_root)])
        assert result.exit_code == 1 and "casstore search-index --rebuild" in result.output
        CliRunner().invoke(cli, ["search-index", "--root", str(store_root), "--rebuild"], catch_exceptions=False)
        assert verify(store).ok
        assert _found(store, "real text") == [reference]


def test_a_failure_inside_gcs_transaction_keeps_the_blob_and_its_document(
    store_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with ContentAddressedToolResultStore(store_root, namespace="old", search_index=True) as old:
        old.write(key="a.txt", content="kept when gc fails: wibble")
    with ContentAddressedToolResultStore(store_root, namespace="new", search_index=True) as new:
        _as_long_ago(store_root)

        def fail(*args: object, **kwargs: object) -> bool:
            raise OSError("disk on fire")

        monkeypatch.setattr(search_index, "remove", fail)
        with pytest.raises(OSError, match="disk on fire"):
            collect_garbage(new, namespace="old", grace=timedelta(0))
        assert _rows(store_root, "SELECT count(*) FROM blobs") == [(1,)]
        assert _rows(store_root, "SELECT count(*) FROM search_documents") == [(1,)]
        assert verify(new).clean


# Crashes: SIGKILL in real subprocesses.

_WRITER = textwrap.dedent(
    """
    import sys
    from datetime import timedelta
    from casstore import ContentAddressedToolResultStore
    from casstore.maintenance.checks import collect_garbage

    root, seed = sys.argv[1], int(sys.argv[2])
    with ContentAddressedToolResultStore(root, namespace="writer", search_index=True, inline_max=2048) as store:
        for number in range(100_000):
            filler = "lorem ipsum dolor " * ((number * 37 + seed) % 400)
            reference = store.write(key=f"{number}_t_c.txt", content=f"{filler} marker{seed}x{number:06}y\\n")
            print(number, reference, flush=True)
            if number % 50 == 49:
                collect_garbage(store, grace=timedelta(0))  # collects nothing visible, runs gc's transactions
    """
)


@pytest.mark.slow
def test_sigkilled_indexing_writers_leave_the_index_consistent(store_root: Path) -> None:
    chooser = random.Random(20261201)
    ContentAddressedToolResultStore(store_root, search_index=True).close()
    reported: dict[str, tuple[int, int]] = {}
    for kill in range(6):
        seed = kill % 4
        child = subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(store_root), str(seed)], stdout=subprocess.PIPE, text=True
        )
        assert child.stdout is not None
        first = child.stdout.readline()  # started and writing: the kill lands among writes and gc's transactions
        time.sleep(chooser.uniform(0.05, 1.0))
        os.kill(child.pid, signal.SIGKILL)
        output, _ = child.communicate(timeout=60)
        assert child.returncode == -signal.SIGKILL
        for line in (first + output).splitlines():
            parts = line.split()
            if len(parts) == 2:
                reported[parts[1]] = (seed, int(parts[0]))
        with ContentAddressedToolResultStore(store_root, namespace="writer") as store:
            check = store.repository.search.check()
            assert check.consistent, f"after kill {kill}: {check}"
    assert len(reported) > 20
    with ContentAddressedToolResultStore(store_root, namespace="writer") as store:
        for reference, (seed, number) in sorted(reported.items())[::7]:
            assert _found(store, f"marker{seed}x{number:06}y") == [reference]
        assert verify(store).ok


@pytest.mark.slow
def test_a_sigkilled_search_index_build_is_rebuildable(store_root: Path) -> None:
    with ContentAddressedToolResultStore(store_root, namespace="alice") as store:
        references = [
            store.write(key=f"{n}.txt", content=f"{'padding text ' * (n % 300)} needle{n:05}z") for n in range(3_000)
        ]
    command = [sys.executable, "-m", "casstore", "search-index", "--root", str(store_root)]
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # kill it once some batches have committed, before it is done
        (count,) = _rows(store_root, "SELECT count(*) FROM search_documents")[0]
        if count >= 500 or child.poll() is not None:
            break
        time.sleep(0.01)
    os.kill(child.pid, signal.SIGKILL)
    child.wait(timeout=60)
    (partial,) = _rows(store_root, "SELECT count(*) FROM search_documents")[0]
    assert 0 < partial < len(references), partial
    with ContentAddressedToolResultStore(store_root, namespace="alice") as store:
        assert store.repository.search.check().consistent
        indexed, _ = store.repository.search.build()
        assert indexed == len(references) - partial
        assert _found(store, "needle02321z") == [references[2321]]
        assert verify(store).ok


# Indexing after the commit: a write leaves a pending row; batches, searches and builds index it.


def test_a_write_leaves_a_pending_row_that_a_batch_indexes(store_root: Path) -> None:
    batch = search_index.WrittenTexts.BATCH_RESULTS
    with ContentAddressedToolResultStore(store_root, namespace="alice", search_index=True) as store:
        first = store.write(key="0.txt", content="pending result number 0")
        assert _rows(store_root, "SELECT namespace, count(*) FROM search_pending GROUP BY namespace") == [("alice", 1)]
        assert _rows(store_root, "SELECT count(*) FROM search_documents") == [(0,)]
        for number in range(1, batch):
            store.write(key=f"{number}.txt", content=f"pending result number {number}")
        # The batch's write indexed all of them after its commit, with no search asking.
        assert _rows(store_root, "SELECT count(*) FROM search_pending") == [(0,)]
        assert _rows(store_root, "SELECT count(*) FROM search_documents") == [(batch,)]
        assert _found(store, "number 0") == [first]


def test_another_process_finds_what_a_writer_has_not_indexed_yet(store_root: Path) -> None:
    with ContentAddressedToolResultStore(store_root, namespace="alice", search_index=True) as writer:
        reference = writer.write(key="1_t_c.txt", content="written, committed, not indexed yet: frobnicate")
        script = textwrap.dedent(
            """
            import sys
            from casstore import ContentAddressedToolResultStore
            with ContentAddressedToolResultStore(sys.argv[1], namespace="alice") as store:
                print(*[hit.reference for hit in store.search(terms=["frobnicate"]).hits])
            """
        )
        found = subprocess.run(
            [sys.executable, "-c", script, str(store_root)], capture_output=True, text=True, check=True
        ).stdout.split()
        assert found == [reference]  # the search indexed the pending row from the blob
        writer.write(key="2_t_c.txt", content="another")
        assert _found(writer, "frobnicate") == [reference]  # the writer's own batch found its row taken: no repeat
        assert _rows(store_root, "SELECT count(*) FROM search_documents") == [(2,)]
        assert writer.repository.search.check().consistent


def test_a_forgotten_write_leaves_no_pending_row_behind(store_root: Path) -> None:
    with ContentAddressedToolResultStore(store_root, namespace="alice", search_index=True) as store:
        store.write(key="a.txt", content="forgotten before it was indexed")
        collect_garbage(store, namespace="alice", grace=timedelta(0))
        assert _rows(store_root, "SELECT count(*) FROM search_pending") == [(0,)]
        assert _found(store, "forgotten") == []
        assert store.repository.search.check().consistent


def test_the_trigrams_merge_once_a_level_holds_two_segments(store_root: Path) -> None:
    # Migration 0015: FTS5 merges a level's segments at 2 rather than its default 4, so a look-up reads fewer
    # segments. Each batch of indexing adds a segment; merged at 2, the segments left are at most one per level.
    with ContentAddressedToolResultStore(store_root, namespace="alice", search_index=True) as store:
        for batch in range(12):
            for number in range(4):
                store.write(key=f"{batch}_{number}.txt", content=f"batch {batch} result {number} " * 20)
            store.search(terms=["result"])  # indexes what is pending: one segment per batch
    assert _rows(store_root, "SELECT v FROM search_text_config WHERE k = 'automerge'") == [(2,)]
    (segments,) = _rows(store_root, "SELECT count(DISTINCT segid) FROM search_text_idx")[0]
    assert segments <= (12).bit_length()


# What a term's candidates are, by definition: the namespace's documents holding every trigram, sorted in SQL.
_SORTED_CANDIDATES_SQL = """
    SELECT e.document, e.size, e.tiebreak, count(*) OVER () FROM search_text s
    CROSS JOIN search_entries e ON e.namespace = ? AND e.document = s.rowid
    WHERE search_text MATCH ? ORDER BY e.size, e.tiebreak LIMIT ?
"""


@pytest.mark.slow
@pytest.mark.parametrize("namespaces", [("alice", "bob"), ("alice",)])
def test_a_terms_candidates_are_the_same_by_every_plan(store_root: Path, namespaces: tuple[str, ...]) -> None:
    # A term of few matches has its matches joined to the entries and sorted in Python; past `_FTS5_MANY_MATCHES`
    # matches the shortest are taken by walking the namespace's entries in size order, counted with the join or,
    # when the namespace holds every document, without it. Each must give the rows (and the count) of sorting every
    # match in SQL, whatever another namespace holds.
    chooser = random.Random(14)
    stores = [ContentAddressedToolResultStore(store_root, namespace=name, search_index=True) for name in namespaces]
    try:
        for number in range(2_600):
            writer = stores[number % 3 == 0 and len(stores) > 1]
            rare = " scarce" if number % 7 == 0 else ""
            writer.write(key=f"{number}.txt", content=f"common {number}{rare} " + "x" * chooser.randint(0, 400))
        for store in stores:
            store.search(terms=["zzz"])
    finally:
        for store in stores:
            store.close()
    with closing(sqlite3.connect(store_root / "index.db")) as connection:
        many = search_index.term_query("common")
        assert connection.execute("SELECT count(*) FROM search_text WHERE search_text MATCH ?", (many,)).fetchone()[
            0
        ] > (fts5._FTS5_MANY_MATCHES)
        for namespace in namespaces:
            for term, wanted in (("common", fts5._FTS5_MANY_CANDIDATES), ("scarce", 500)):
                walked = search_index.FTS5_TEXT.term_candidates(connection, namespace=namespace, term=term, limit=500)
                query = search_index.term_query(term)
                sorted_rows = connection.execute(_SORTED_CANDIDATES_SQL, (namespace, query, wanted)).fetchall()
                assert walked == sorted_rows and walked
