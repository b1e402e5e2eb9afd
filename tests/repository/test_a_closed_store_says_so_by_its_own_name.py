"""
A store used after `close()` refuses with a message that fits the store in hand: the local and the shared store share
the guard that refuses, so its message must not send the user of one store to open the other.
"""

import pytest

from casstore import ContentAddressedToolResultStore, SharedToolResultStore
from casstore.errors import StoreClosedError
from tests.store_backends import Backend


@pytest.mark.parametrize("operation", ["write", "write_prepared", "read"])
def test_a_store_used_after_close_refuses_without_naming_the_other_store(backend: Backend, operation: str) -> None:
    store = backend.open()
    reference = store.write(key="result.txt", content="before close")
    prepared = store.prepare_write(key="result.txt", content="prepared before close")
    store.close()
    with pytest.raises(StoreClosedError) as refused:
        if operation == "write":
            store.write(key="result.txt", content="after close")
        elif operation == "write_prepared":
            store.write_prepared_many([prepared])
        else:
            store.read(reference)

    message = str(refused.value)
    local = isinstance(store, ContentAddressedToolResultStore)
    other = SharedToolResultStore if local else ContentAddressedToolResultStore
    assert "is closed; open" in message and other.__name__ not in message
