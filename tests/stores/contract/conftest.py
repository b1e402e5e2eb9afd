"""
The store's contract, one suite for both backends: every test in this folder runs on the local store (SQLite and a
folder) and on the shared store (PostgreSQL and S3, real servers), and what it checks is the same method for method
and error for error. `test_local_and_shared_answer_alike.py` opens both at once and compares their answers directly.

The fixtures here take the place of tests/conftest.py's local `store` for this folder alone.
"""

import pytest

from casstore.stores.local import RepositoryToolResultStore
from tests.store_backends import Backend, StoreFactory


@pytest.fixture
def open_store(backend: Backend) -> StoreFactory:
    """`open_store(namespace="default", inline_max=<default>)`: a store on the test's backend."""
    return backend.open


@pytest.fixture
def store(open_store: StoreFactory) -> RepositoryToolResultStore:
    """A store in the default namespace on the test's backend."""
    return open_store()
