"""
Two hosts writing the same multi-part tool result, its parts in another order, at once: both writes must succeed,
as they do on the local store (where SQLite runs one write transaction at a time).
"""

import threading
import time
from typing import Any

from casstore.index.prepared import PreparedWrite
from tests.servers import S3Location
from tests.shared_helpers import Config, age_every_blob, item, open_store, query


def _someone_waits_for_a_lock(index_url: str) -> bool:
    rows = query(
        index_url,
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'",
    )
    return bool(rows[0][0])


def test_two_hosts_writing_the_same_parts_in_another_order_both_succeed(
    postgres_url: str, s3_bucket_url: S3Location
) -> None:
    """
    The interleaving made certain: host one's write has refreshed part a's `last_seen` (locking its row) when host
    two's write, parts in the order b, a, refreshes b and waits for a; then one goes on to b.
    """
    config: Config = {"index_url": postgres_url, "blob_url": s3_bucket_url.url, "blob_options": s3_bucket_url.options}
    with open_store(config, namespace="one") as one, open_store(config, namespace="two") as two:
        a = one.prepare_write(key="a.txt", content=item(0))
        b = one.prepare_write(key="b.txt", content=item(2))
        one.write_prepared_many([a, b])
        age_every_blob(postgres_url)  # written more than a second ago: the next writes refresh `last_seen`
        one.repository._core.blobs._hints._known.clear()  # as a host that has not seen them lately
        blobs: Any = one.repository._core.blobs
        confirm = blobs.confirm
        first_locked, go = threading.Event(), threading.Event()

        def confirm_then_wait(work: Any, digest: str) -> bool:
            confirmed: bool = confirm(work, digest)
            if not first_locked.is_set():
                first_locked.set()
                go.wait(10)
            return confirmed

        blobs.confirm = confirm_then_wait
        errors: list[BaseException] = []

        def write(store: Any, parts: list[PreparedWrite]) -> None:
            try:
                store.write_prepared_many(parts)
            except Exception as error:
                errors.append(error)

        first = threading.Thread(target=write, args=(one, [a, b]))
        first.start()
        assert first_locked.wait(10)
        second = threading.Thread(target=write, args=(two, [b, a]))
        second.start()
        deadline = time.monotonic() + 10
        while not _someone_waits_for_a_lock(postgres_url) and time.monotonic() < deadline:
            time.sleep(0.02)
        go.set()
        first.join(30)
        second.join(30)
        assert not first.is_alive() and not second.is_alive()
        assert not errors, "\n".join(str(error) for error in errors)
        assert one.read(a.reference) == item(0) and two.read(b.reference) == item(2)
