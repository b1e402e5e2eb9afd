"""The `casstore` command on a shared store (real PostgreSQL and SeaweedFS), and which store a command opens."""

import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest
from hypothesis import given
from hypothesis import strategies as st

from casstore import ContentAddressedToolResultStore, SharedToolResultStore
from casstore.cli import StoreLocation, resolve_location
from tests.servers import S3Location

ROOT_FLAG = Path("explicit-root")
BOTH_URLS = {"CASSTORE_INDEX_URL": "pg", "CASSTORE_BLOB_URL": "s3://b"}


@pytest.mark.parametrize(
    ("arguments", "environ", "expected"),
    [
        (
            {"root": ROOT_FLAG},
            {"CASSTORE_INDEX_URL": "pg", "CASSTORE_BLOB_URL": "s3://b"},
            StoreLocation(root=ROOT_FLAG),
        ),
        ({"index_url": "pg", "blob_url": "s3://b"}, {"CASSTORE_ROOT": "r"}, StoreLocation(None, "pg", "s3://b")),
        (
            {},
            {"CASSTORE_INDEX_URL": "pg", "CASSTORE_BLOB_URL": "s3://b", "CASSTORE_ROOT": "r"},
            StoreLocation(None, "pg", "s3://b"),
        ),
        ({}, {"CASSTORE_ROOT": "r"}, StoreLocation(root=Path("r"))),
        ({}, {}, StoreLocation(root=Path(".casstore"))),
        ({}, {"CASSTORE_INDEX_URL": "", "CASSTORE_BLOB_URL": ""}, StoreLocation(root=Path(".casstore"))),
    ],
    ids=["root wins over the URL variables", "flags", "URL variables", "root variable", "default", "empty variables"],
)
def test_which_store_a_command_opens(
    arguments: dict[str, object], environ: dict[str, str], expected: StoreLocation
) -> None:
    given_arguments = {"root": None, "index_url": None, "blob_url": None, **arguments}
    assert resolve_location(**given_arguments, environ=environ) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("arguments", "environ", "message"),
    [
        ({"root": ROOT_FLAG, "index_url": "pg"}, {}, "give one of them"),
        ({"root": ROOT_FLAG, "blob_url": "s3://b"}, {}, "give one of them"),
        ({"index_url": "pg"}, {}, "needs both --index URL and --blobs URL"),
        ({"blob_url": "s3://b"}, {}, "needs both --index URL and --blobs URL"),
        ({}, {"CASSTORE_INDEX_URL": "pg"}, "CASSTORE_BLOB_URL is not"),
        ({}, {"CASSTORE_BLOB_URL": "s3://b"}, "CASSTORE_INDEX_URL is not"),
    ],
)
def test_half_named_or_doubly_named_stores_are_usage_errors(
    arguments: dict[str, object], environ: dict[str, str], message: str
) -> None:
    given_arguments = {"root": None, "index_url": None, "blob_url": None, **arguments}
    with pytest.raises(click.UsageError, match=message):
        resolve_location(**given_arguments, environ=environ)  # type: ignore[arg-type]


@given(
    root=st.one_of(st.none(), st.just(ROOT_FLAG)),
    index=st.one_of(st.none(), st.just("pg")),
    blobs=st.one_of(st.none(), st.just("s3://b")),
    environ=st.dictionaries(
        st.sampled_from(["CASSTORE_INDEX_URL", "CASSTORE_BLOB_URL", "CASSTORE_ROOT"]), st.sampled_from(["", "x"])
    ),
)
def test_a_location_is_one_store_or_a_usage_error(
    root: Path | None, index: str | None, blobs: str | None, environ: dict[str, str]
) -> None:
    try:
        location = resolve_location(root=root, index_url=index, blob_url=blobs, environ=environ)
    except click.UsageError:
        return
    assert (location.root is None) != (location.shared is None)  # exactly one kind of store
    if root is not None:
        assert location.root == root


def _casstore(*arguments: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "casstore", *arguments],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.slow
def test_every_command_works_on_a_shared_store(postgres_url: str, s3_bucket_url: S3Location, tmp_path: Path) -> None:
    with SharedToolResultStore(index_url=postgres_url, blob_url=s3_bucket_url.url, namespace="alice") as store:
        small = store.write(key="small.txt", content="a small result\n")
        large_text = "".join(f"line {number}: {os.urandom(24).hex()}\n" for number in range(4000))
        large = store.write(key="large.txt", content=large_text)
        store.write(key="again.txt", content="a small result\n")
    flags = ["--index", postgres_url, "--blobs", s3_bucket_url.url]
    env = dict(s3_bucket_url.env)

    stats = _casstore("stats", *flags, "--json", env=env)
    assert stats.returncode == 0, stats.stderr
    figures = json.loads(stats.stdout)
    assert (figures["writes"], figures["blobs"]) == (3, 2)
    assert figures["index_bytes"] > 0 and figures["blob_bytes"] > 0  # tables in PostgreSQL, one object
    text = _casstore("stats", *flags, env=env)
    assert "index bytes" in text.stdout and "object bytes" in text.stdout and "bytes on disk" not in text.stdout
    with SharedToolResultStore(index_url=postgres_url, blob_url=s3_bucket_url.url, namespace="bob") as bob:
        bob.write(key="shared.txt", content="a small result\n")  # alice's blob, written by bob too
    alice = json.loads(_casstore("stats", *flags, "--namespace", "alice", "--json", env=env).stdout)
    assert (alice["scope"], alice["writes"], alice["blobs"]) == ("namespace", 3, 2)
    assert alice["logical_bytes"] == 2 * len("a small result\n") + len(large_text.encode())
    assert (alice["index_bytes"], alice["blob_bytes"]) == (None, None)  # the whole store's, shared by its namespaces
    only_bob = json.loads(_casstore("stats", *flags, "--namespace", "bob", "--json", env=env).stdout)
    assert (only_bob["writes"], only_bob["blobs"], only_bob["unique_bytes"]) == (1, 1, len("a small result\n"))
    bob_text = _casstore("stats", *flags, "--namespace", "bob", env=env).stdout.splitlines()
    assert bob_text[0].startswith("namespace bob in store ") and "  writes           1" in bob_text
    assert [line.split()[2] for line in bob_text if line.startswith(("  index bytes", "  object bytes"))] == ["-", "-"]

    cat = _casstore("cat", large, *flags, "--lines", "2:3", env=env)
    assert cat.returncode == 0, cat.stderr
    assert cat.stdout == "".join(large_text.splitlines(keepends=True)[1:3])
    # The URL variables name the same store when no flag does.
    through_environment = _casstore(
        "cat", small, env={**env, "CASSTORE_INDEX_URL": postgres_url, "CASSTORE_BLOB_URL": s3_bucket_url.url}
    )
    assert through_environment.stdout == "a small result\n", through_environment.stderr

    verify = _casstore("verify", *flags, "--json", env=env)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert json.loads(verify.stdout)["blobs_checked"] == 2

    dry = _casstore("gc", *flags, "--namespace", "alice", "--grace", "0s", "--dry-run", "--json", env=env)
    assert dry.returncode == 0, dry.stderr
    assert json.loads(dry.stdout)["writes_forgotten"] == 3  # alice's; bob's write stays
    with SharedToolResultStore(index_url=postgres_url, blob_url=s3_bucket_url.url, namespace="alice") as store:
        assert store.read(small) == "a small result\n"  # the dry run changed nothing

    both = _casstore("stats", *flags, "--root", str(tmp_path), env=env)
    assert both.returncode == 2 and "give one of them" in both.stderr


@pytest.mark.slow
def test_root_wins_over_the_url_variables(tmp_path: Path) -> None:
    with ContentAddressedToolResultStore(tmp_path / "local") as store:
        store.write(key="a.txt", content="local")
    unreachable = {"CASSTORE_INDEX_URL": "postgresql://nobody@127.0.0.1:1/none", "CASSTORE_BLOB_URL": "file:///x"}
    completed = _casstore("stats", "--root", str(tmp_path / "local"), "--json", env=unreachable)
    assert completed.returncode == 0, completed.stderr
    assert json.loads(completed.stdout)["writes"] == 1
    failed = _casstore("stats", "--json", env=unreachable)  # the variables name a server that is not there
    assert failed.returncode == 1 and failed.stderr.startswith("casstore: error:"), failed.stderr
    assert "PostgreSQL" in failed.stderr and "Traceback" not in failed.stderr
