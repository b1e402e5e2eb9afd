"""
The shared store's reported index size is every casstore table of its schema, as PostgreSQL counts them
(`pg_total_relation_size`), read from the catalog: a table added later cannot be left out silently.
"""

import os
from datetime import timedelta
from pathlib import Path

import pytest

from casstore.history.stats import stats
from casstore.maintenance.checks import collect_garbage
from tests.store_backends import SharedBackend, make_backend


@pytest.fixture
def shared(request: pytest.FixtureRequest, tmp_path: Path) -> SharedBackend:
    made = make_backend("shared", request, tmp_path)
    assert isinstance(made, SharedBackend)
    request.addfinalizer(made.close)
    return made


def _tables_bytes(backend: SharedBackend) -> dict[str, int]:
    """:returns: Every table of the store's schema, as the catalog lists it, and its size with indexes and TOAST."""
    rows = backend.rows(
        "SELECT table_name, "
        "pg_total_relation_size((quote_ident(table_schema) || '.' || quote_ident(table_name))::regclass) "
        "FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'"
    )
    return {name: int(size) for name, size in rows}


def _fill(backend: SharedBackend) -> None:
    # Something in every kind of table: writes (their history), frames inline and as objects, search text.
    store = backend.open(namespace="alice", search_index=True)
    for number in range(40):
        store.write(key=f"{number}_read_call_{number}.txt", content=f"result {number} " + os.urandom(600).hex())
    store.write(key="big_read_call_big.bin", content=os.urandom(100_000))
    assert store.search(terms=["result 7"]).hits


def test_the_reported_index_size_is_every_table_of_the_schema(shared: SharedBackend) -> None:
    _fill(shared)
    store = shared.open(namespace="bob")
    tables = _tables_bytes(shared)
    assert {"write_rows", "blob_frames", "search_text"} <= set(tables)  # the history table is a table, and counted
    assert tables["write_rows"] > 0

    assert stats(store).index_bytes == sum(tables.values())
    report = collect_garbage(store, namespace="alice", grace=timedelta(0))
    assert report.index_bytes_before == sum(tables.values())
    assert report.index_bytes_after == sum(_tables_bytes(shared).values())


def test_gc_vacuum_vacuums_every_table_of_the_schema(shared: SharedBackend) -> None:
    _fill(shared)
    store = shared.open(namespace="bob")
    files = (
        "SELECT relname, relfilenode FROM pg_class "
        "WHERE relkind = 'r' AND relnamespace = current_schema()::regnamespace"
    )
    vacuums = "SELECT relname, vacuum_count + autovacuum_count FROM pg_stat_user_tables"
    files_before, vacuums_before = dict(shared.rows(files)), dict(shared.rows(vacuums))

    report = collect_garbage(store, namespace="alice", grace=timedelta(0), vacuum=True)

    assert report.index_space == "vacuumed"
    # Rewritten (VACUUM FULL) or vacuumed: a rewritten table's file is new, a vacuumed one's count went up.
    files_after, vacuums_after = dict(shared.rows(files)), dict(shared.rows(vacuums))
    missed = [
        table
        for table in _tables_bytes(shared)
        if files_after[table] == files_before[table] and vacuums_after[table] <= vacuums_before[table]
    ]
    assert missed == []
