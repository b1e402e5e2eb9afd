"""A closed store refuses every call with `StoreClosedError`; as a context manager it closes on leaving."""

from collections.abc import Callable

import pytest

from casstore import StoreClosedError
from casstore.history.stats import stats
from casstore.maintenance.checks import verify
from casstore.stores.local import RepositoryToolResultStore
from tests.store_backends import StoreFactory


def test_a_closed_store_says_so(store: RepositoryToolResultStore) -> None:
    reference = store.write(key="a.txt", content="x")
    prepared = store.prepare_write(key="b.txt", content="y")
    store.close()
    store.close()
    calls: dict[str, Callable[[], object]] = {
        "read": lambda: store.read(reference),
        "write": lambda: store.write(key="a.txt", content="x"),
        "write_prepared": lambda: store.write_prepared(prepared),
        "write_prepared_many": lambda: store.write_prepared_many([prepared]),
        "record_offloads": lambda: store.record_offloads(compaction_id="c", offloads=[]),
        "stats": lambda: stats(store),
        "verify": lambda: verify(store),
    }
    for name, call in calls.items():
        with pytest.raises(StoreClosedError):
            call()
            pytest.fail(f"{name} ran on a closed store")


def test_the_store_is_a_context_manager(open_store: StoreFactory) -> None:
    opened = open_store()
    with opened as entered:
        assert entered is opened
        reference = entered.write(key="a.txt", content="inside")
    with pytest.raises(StoreClosedError):
        opened.read(reference)
    with open_store() as reopened:
        assert reopened.read(reference) == "inside"
