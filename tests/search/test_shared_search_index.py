"""
The shared store's search index (PostgreSQL `pg_trgm`, casstore/search/postgres.py), against real PostgreSQL and
SeaweedFS servers: searching, bounded queries, verify, `casstore search-index --index/--blobs`, and a writer SIGKILLed
in a real subprocess. Namespaces and gc, the same on both stores, are in tests/search/test_search_index.py.
"""

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from typing import Any

import psycopg
import pytest

from casstore import SearchUnavailableError, SharedToolResultStore
from casstore.compactor import make_search_tool
from casstore.maintenance.checks import verify
from tests.servers import S3Location

pytestmark = pytest.mark.filterwarnings("ignore::haystack.utils.experimental.ExperimentalWarning")


def _open(postgres_url: str, s3: S3Location, **settings: Any) -> SharedToolResultStore:
    return SharedToolResultStore(index_url=postgres_url, blob_url=s3.url, blob_options=s3.options, **settings)


def _found(store: SharedToolResultStore, *terms: str) -> list[str]:
    return [hit.reference for hit in store.search(terms=list(terms), limit=100).hits]


def _rows(postgres_url: str, sql: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(postgres_url) as connection:
        return connection.execute(sql).fetchall()


def test_the_shared_store_searches_what_it_wrote(postgres_url: str, s3_bucket_url: S3Location) -> None:
    with _open(postgres_url, s3_bucket_url, namespace="alice", search_index=True, inline_max=64) as store:
        large = store.write(
            key="3_read_file_c1.txt", content="import os\n" * 200 + "class ToolResultStore:\n    raise KeyError\n"
        )
        small = store.write(key="4_run_tests_c2.txt", content="tests/test_io.py::test_case_39 FAILED 100%_done\n")
        data = store.write(key="data.json", content=b'{"status": "toolresultstore"}')
        store.write(key="plot.png", content=b"\x89PNG\r\n\x1a\n" + bytes(range(256)))
        assert sorted(_found(store, "ToolResultStore")) == sorted([large, data])
        assert _found(store, "test_case_39") == [small]
        assert _found(store, "100%_d") == [small]  # LIKE's wildcards are text
        assert _found(store, "test%case") == [] and _found(store, "test_case_3_") == []
        answer = make_search_tool(store).invoke(query='"raise KeyError"')
        assert f"'{large}'" in answer and " 202:     raise KeyError" in answer
        store.write(key="again.txt", content="tests/test_io.py::test_case_39 FAILED 100%_done\n")  # a repeat
        assert _found(store, "test_case_39") == [small]
        report = verify(store)
        assert report.ok and report.search_documents_checked == 3
    assert _rows(postgres_url, "SELECT count(*) FROM search_pending") == [(0,)]  # close indexed what was left


@pytest.mark.slow
def test_search_is_bounded_by_the_deadline(postgres_url: str, s3_bucket_url: S3Location) -> None:
    with _open(postgres_url, s3_bucket_url, namespace="alice", search_index=True) as store:
        for number in range(300):
            store.write(key=f"{number}.txt", content=f"--- {number} ---\n" + "=-" * 5_000)
        store.search(terms=["zzz"])  # indexes what is pending
        # `-=-` makes no trigram for pg_trgm (not a letter or digit): a scan of every text, which the deadline stops.
        outcome = store.repository.search.find(namespace="alice", terms=["-=-"], tool_name=None, limit=5, seconds=0.0)
        assert outcome.timed_out and not outcome.hits
        answer = make_search_tool(store).invoke(query=" ".join(f"t{n}'\"OR;--" for n in range(5_000)))
        assert isinstance(answer, str)


def test_verify_finds_a_text_that_does_not_match_its_blob(postgres_url: str, s3_bucket_url: S3Location) -> None:
    with _open(postgres_url, s3_bucket_url, namespace="alice", search_index=True) as store:
        reference = store.write(key="a.txt", content="the original text")
        assert _found(store, "original") == [reference]
        with psycopg.connect(postgres_url, autocommit=True) as connection:
            connection.execute("UPDATE search_text SET body = 'something else'")
        assert not verify(store).ok
        store.repository.search.build(rebuild=True)
        assert verify(store).ok and _found(store, "original") == [reference]


@pytest.mark.slow
def test_casstore_search_index_indexes_a_shared_store(postgres_url: str, s3_bucket_url: S3Location) -> None:
    with _open(postgres_url, s3_bucket_url, namespace="alice") as store:
        references = [store.write(key=f"{n}.txt", content=f"result {n} token{n:04}x") for n in range(60)]
        assert not store.search(terms=["token"]).enabled
        assert make_search_tool(store).invoke(query="token").startswith("This store has no search index")
    environment = {**os.environ, **s3_bucket_url.env}
    command = [sys.executable, "-m", "casstore", "search-index", "--index", postgres_url, "--blobs", s3_bucket_url.url]
    result = subprocess.run([*command, "--json"], capture_output=True, text=True, env=environment, check=False)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["indexed"] == 60
    with _open(postgres_url, s3_bucket_url, namespace="alice") as store:
        assert _found(store, "token0042x") == [references[42]]


# Crashes: a writer SIGKILLed in a real subprocess (never a fork of pytest, which runs obstore's threads).

_WRITER = textwrap.dedent(
    """
    import json, sys
    from casstore import SharedToolResultStore

    index_url, blob_url, options, seed = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), int(sys.argv[4])
    with SharedToolResultStore(
        index_url=index_url, blob_url=blob_url, blob_options=options, namespace="writer", search_index=True,
        inline_max=2048,
    ) as store:
        for number in range(100_000):
            filler = "lorem ipsum dolor " * ((number * 37 + seed) % 400)
            reference = store.write(key=f"{number}_t_c.txt", content=f"{filler} marker{seed}x{number:06}y\\n")
            print(number, reference, flush=True)
    """
)


@pytest.mark.slow
def test_a_sigkilled_shared_writer_leaves_the_index_consistent(postgres_url: str, s3_bucket_url: S3Location) -> None:
    _open(postgres_url, s3_bucket_url, search_index=True).close()
    reported: dict[str, tuple[int, int]] = {}
    environment = {**os.environ, **s3_bucket_url.env}
    for kill in range(3):
        child = subprocess.Popen(
            [
                sys.executable,
                "-c",
                _WRITER,
                postgres_url,
                s3_bucket_url.url,
                json.dumps(s3_bucket_url.options),
                str(kill),
            ],
            stdout=subprocess.PIPE,
            text=True,
            env=environment,
        )
        assert child.stdout is not None
        lines = [child.stdout.readline()]
        time.sleep(0.3 + 0.4 * kill)  # among writes, their pending rows and the batches that index them
        os.kill(child.pid, signal.SIGKILL)
        output, _ = child.communicate(timeout=60)
        assert child.returncode == -signal.SIGKILL
        for line in (lines[0] + output).splitlines():
            parts = line.split()
            if len(parts) == 2:
                reported[parts[1]] = (kill, int(parts[0]))
        with _open(postgres_url, s3_bucket_url, namespace="writer") as store:
            check = store.repository.search.check()
            assert check.consistent, f"after kill {kill}: {check}"
    assert len(reported) > 10
    with _open(postgres_url, s3_bucket_url, namespace="writer") as store:
        for reference, (seed, number) in sorted(reported.items())[::5]:
            assert _found(store, f"marker{seed}x{number:06}y") == [reference]
        assert verify(store).ok
    assert _rows(postgres_url, "SELECT count(*) FROM search_pending") == [(0,)]


@pytest.mark.slow
def test_a_user_who_may_not_create_pg_trgm_gets_a_clear_error(postgres_url: str, s3_bucket_url: S3Location) -> None:
    _open(postgres_url, s3_bucket_url).close()  # the schema, made by its owner
    password = "limited-password"
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE limited LOGIN PASSWORD '{password}'")
        admin.execute("GRANT ALL ON ALL TABLES IN SCHEMA public TO limited")
        admin.execute("GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO limited")
        admin.execute("GRANT ALL ON ALL FUNCTIONS IN SCHEMA public TO limited")
    limited_url = re.sub(r"//[^@]+@", f"//limited:{password}@", postgres_url)
    with pytest.raises(SearchUnavailableError, match="may not create the pg_trgm extension"):
        _open(limited_url, s3_bucket_url, search_index=True)
    assert _rows(postgres_url, "SELECT count(*) FROM search_state") == [(0,)]  # nothing was changed
    assert _rows(postgres_url, "SELECT count(*) FROM pg_extension WHERE extname = 'pg_trgm'") == [(0,)]
    with _open(limited_url, s3_bucket_url) as store:  # without search, the same user writes and reads as ever
        reference = store.write(key="a.txt", content="still writable")
        assert store.read(reference) == "still writable"
        assert not store.search(terms=["writable"]).enabled
    environment = {**os.environ, **s3_bucket_url.env}
    command = [sys.executable, "-m", "casstore", "search-index", "--index", limited_url, "--blobs", s3_bucket_url.url]
    result = subprocess.run(command, capture_output=True, text=True, env=environment, check=False)
    assert result.returncode == 1 and "CREATE EXTENSION pg_trgm" in result.stderr
