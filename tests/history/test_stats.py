"""
`casstore stats`, of the whole store or of one namespace: every figure is that scope's (on both stores), in text and
JSON alike, and a ratio is the same quotient wherever it is printed (`casstore.history.figures`).
"""

import itertools
import json
import sqlite3
from fractions import Fraction
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from casstore import ContentAddressedToolResultStore
from casstore.cli import cli
from casstore.disk import disk_usage, disk_usage_of_file
from casstore.history import stats as history
from casstore.history.figures import format_bytes, format_ratio, ratio
from tests.helpers import blake3_hex
from tests.store_backends import Backend

_EXAMPLES = itertools.count()
CONTENTS = ["a result shared by everyone\n" * 200, "alice's own\n" * 100, "bob's own\n" * 300, "x"]


def _stats(root: Path, *arguments: str) -> str:
    result = CliRunner().invoke(cli, ["stats", "--root", str(root), *arguments], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    return result.stdout


def _fill(root: Path) -> None:
    """Alice and bob share a blob; each has one of their own; alice writes the shared one twice."""
    with ContentAddressedToolResultStore(root, namespace="alice") as alice:
        for key, content in (("1.txt", CONTENTS[0]), ("2.txt", CONTENTS[0]), ("3.txt", CONTENTS[1])):
            alice.write(key=key, content=content)
    with ContentAddressedToolResultStore(root, namespace="bob") as bob:
        bob.write(key="1.txt", content=CONTENTS[0])
        bob.write(key="2.txt", content=CONTENTS[2])


def _expected(root: Path, written: list[str]) -> dict[str, object]:
    """A namespace's figures from what it wrote, with the stored sizes the index gives its blobs."""
    with sqlite3.connect(root / "index.db") as connection:
        return _expected_of(dict(connection.execute("SELECT digest, stored_size FROM blobs").fetchall()), written)


def _expected_of(stored: dict[str, int], written: list[str]) -> dict[str, object]:
    """A namespace's figures from what it wrote, given each blob's stored size by digest."""
    distinct = {blake3_hex(content.encode()): len(content.encode()) for content in written}
    logical = sum(len(content.encode()) for content in written)
    unique, stored_bytes = sum(distinct.values()), sum(stored[digest] for digest in distinct)
    return {
        "writes": len(written),
        "blobs": len(distinct),
        "logical_bytes": logical,
        "unique_bytes": unique,
        "stored_bytes": stored_bytes,
        "dedup_ratio": ratio(logical, unique),
        "compression_ratio": ratio(unique, stored_bytes),
        "total_ratio": ratio(logical, stored_bytes),
    }


def test_stats_of_a_namespace_are_its_own_in_json_and_text(store_root: Path) -> None:
    _fill(store_root)
    for namespace, written in (("alice", [CONTENTS[0], CONTENTS[0], CONTENTS[1]]), ("bob", [CONTENTS[0], CONTENTS[2]])):
        figures = json.loads(_stats(store_root, "--namespace", namespace, "--json"))
        expected = _expected(store_root, written)
        assert {name: figures[name] for name in expected} == expected
        assert (figures["scope"], figures["namespace"]) == ("namespace", namespace)
        assert (figures["disk_bytes"], figures["index_bytes"], figures["blob_bytes"]) == (None, None, None)
        assert [row["namespace"] for row in figures["namespaces"]] == [namespace]
        text = _stats(store_root, "--namespace", namespace).splitlines()
        assert text[0] == f"namespace {namespace} in store {store_root}: its writes and the blobs they reference"
        lines = {line.split("  ")[1].strip(): line for line in text[1:8]}
        assert lines["blobs"].split()[-1] == str(expected["blobs"])
        assert lines["writes"].split()[-1] == str(expected["writes"])
        assert format_bytes(int(str(expected["logical_bytes"]))) in lines["logical bytes"]
        assert format_bytes(int(str(expected["unique_bytes"]))) in lines["unique bytes"]
        assert format_bytes(int(str(expected["stored_bytes"]))) in lines["stored bytes"]
        assert lines["bytes on disk"].split()[3] == "-"
        dedup = next(line for line in text if line.startswith("  dedup ratio"))
        assert dedup.split()[2] == format_ratio(figures["dedup_ratio"])
    # The two namespaces' writes are the store's; the shared blob counts once in the store, once in each namespace.
    whole = json.loads(_stats(store_root, "--json"))
    assert (whole["scope"], whole["namespace"], whole["writes"], whole["blobs"]) == ("store", None, 5, 3)
    assert whole["disk_bytes"] > 0
    assert _stats(store_root).splitlines()[0] == f"store {store_root}: the whole store"


def test_the_store_wide_ratios_are_the_views(store_root: Path) -> None:
    _fill(store_root)
    figures = json.loads(_stats(store_root, "--json"))
    with sqlite3.connect(store_root / "index.db") as connection:
        view = connection.execute("SELECT dedup_ratio, compression_ratio, total_ratio FROM dedup_summary").fetchone()
    assert (figures["dedup_ratio"], figures["compression_ratio"], figures["total_ratio"]) == view


@pytest.mark.slow
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    plan=st.lists(st.tuples(st.sampled_from(["alice", "bob", "carol"]), st.integers(0, len(CONTENTS) - 1)), max_size=12)
)
def test_every_namespace_counts_what_it_wrote(backend: Backend, plan: list[tuple[str, int]]) -> None:
    # Each example writes in namespaces of its own; the whole store's figures add up every example's.
    example = next(_EXAMPLES)
    store = backend.open()  # the shared store's tables exist once a store has opened
    writers = {name: backend.open(namespace=f"{name}-{example}") for name in {name for name, _ in plan}}
    for number, (namespace, content) in enumerate(plan):
        writers[namespace].write(key=f"{number}.txt", content=CONTENTS[content])
    for writer in writers.values():
        writer.close()  # so that the examples together hold few connections
    stored = dict(backend.rows("SELECT digest, stored_size FROM blobs"))
    for namespace in ("alice", "bob", "carol"):
        written = [CONTENTS[content] for name, content in plan if name == namespace]
        figures = history.stats(store, namespace=f"{namespace}-{example}")
        if not written:
            assert (figures.writes, figures.blobs, figures.dedup_ratio) == (0, 0, None)
            continue
        expected = _expected_of(stored, written)
        assert {name: getattr(figures, name) for name in expected} == expected
    assert history.stats(store).writes == backend.count("writes")
    store.close()


@given(numerator=st.integers(0, 10**15), denominator=st.integers(0, 10**15))
def test_a_ratio_is_the_quotient_rounded_half_up_to_hundredths(numerator: int, denominator: int) -> None:
    value = ratio(numerator, denominator)
    if denominator == 0:
        assert value is None and format_ratio(value) == "-"
        return
    exact = Fraction(numerator, denominator)
    assert value is not None
    assert abs(Fraction(str(value)) - exact) <= Fraction(1, 200)  # within half a hundredth
    hundredths = (200 * numerator + denominator) // (2 * denominator)  # n/d in hundredths, half up, in integers
    assert Fraction(str(value)) == Fraction(hundredths, 100)
    assert format_ratio(value) == f"{value:.2f}x"


def test_ratios_of_byte_counts_refuse_negative_counts() -> None:
    with pytest.raises(ValueError, match="at least 0"):
        ratio(-1, 2)


@pytest.mark.parametrize(
    ("count", "text"),
    [
        (0, "0 B"),
        (1023, "1023 B"),
        (1024, "1.0 KiB"),
        (1536, "1.5 KiB"),
        (5 * 2**20, "5.0 MiB"),
        (3 * 2**40, "3.0 TiB"),
    ],
)
def test_byte_counts_have_one_unit_style(count: int, text: str) -> None:
    assert format_bytes(count) == text


def test_bytes_on_disk_are_what_du_finds_once_nothing_holds_the_store_open(store_root: Path) -> None:
    # Blobs in files and inline, so both halves of the figure are at stake.
    with ContentAddressedToolResultStore(store_root, inline_max=1024) as store:
        for number in range(40):
            store.write(key=f"{number}.txt", content=f"result {number}\n" * (20 + 40 * number))
    closed = disk_usage(store_root)  # every connection is closed: no write-ahead log, no shared-memory file
    assert not (store_root / "index.db-shm").exists()
    figures = json.loads(_stats(store_root, "--json"))
    # stats opened the index itself, which made `index.db-shm` for as long as it was open: not the store's bytes.
    assert figures["disk_bytes"] == closed
    assert figures["index_bytes"] == disk_usage_of_file(store_root / "index.db")
    assert figures["blob_bytes"] == disk_usage(store_root / "blobs")
