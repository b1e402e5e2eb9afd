"""PostgreSQL restarted while a shared store sits idle: the store's next call works, without reopening it."""

import pytest

from casstore import StorageError
from tests.servers import PostgresServer, S3Location
from tests.shared_helpers import Config, item, open_store, write_counts


@pytest.mark.slow
def test_the_first_call_after_an_idle_restart_works(
    postgres_url: str, s3_bucket_url: S3Location, postgres_server: PostgresServer
) -> None:
    config: Config = {"index_url": postgres_url, "blob_url": s3_bucket_url.url, "blob_options": s3_bucket_url.options}
    with open_store(config, namespace="idle") as store:
        reference = store.write(key="a.txt", content=item(0))
        try:
            postgres_server.stop()  # the pool's idle connection goes with it
        finally:
            postgres_server.start()
        try:
            first = store.write(key="b.txt", content=item(2))
        except StorageError as error:
            second = store.write(key="b.txt", content=item(2))  # works: what the first call should have done
            assert store.read(second) == item(2)
            pytest.fail(f"the first call after the restart failed, the second worked: {error}")
        assert store.read(first) == item(2) and store.read(reference) == item(0)
        assert write_counts(postgres_url) == {"idle": 2}
