"""`casstore copy`: a local store moved into a shared one (real PostgreSQL and SeaweedFS), whole and only once."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
from collections import Counter
from contextlib import closing
from pathlib import Path
from typing import Any

import psycopg
import pytest

from casstore import CompactionRecord, ContentAddressedToolResultStore, OffloadRecord, SharedToolResultStore
from casstore.index.postgres import read_times_as_text
from casstore.maintenance.checks import verify
from casstore.maintenance.copying import copy_store
from tests.servers import S3Location

WRITES: list[tuple[str, str, str | bytes]] = [
    ("alice", "1_read_file.txt", "def main():\n    return 1\n"),
    ("alice", "2_read_file.txt", "def main():\n    return 1\n"),  # a duplicate
    ("alice", "3_grep.txt", "".join(f"match {n}: {os.urandom(16).hex()}\n" for n in range(3000))),  # an object
    ("bob", "1_read_file.txt", "def main():\n    return 1\n"),  # the same content in another namespace
    ("bob", "2_image.png", b"\x89PNG\r\n\x1a\n" + os.urandom(90_000)),  # binary, an object
    ("bob", "3_ls.txt", "".join(f"file_{n}.py\n" for n in range(50))),
]
KEY = tuple[str, str, str, str, int, str, str]


def _fill(root: Path) -> dict[tuple[str, str], str]:
    references: dict[tuple[str, str], str] = {}
    for namespace in ("alice", "bob"):
        with ContentAddressedToolResultStore(root, namespace=namespace, inline_max=4096) as store:
            for written_namespace, key, content in WRITES:
                if written_namespace == namespace:
                    references[(namespace, key)] = store.write(key=key, content=content)
            store.record_compaction(
                compaction_id=f"compaction-{namespace}",
                # One compaction with the window known, one without: NULL must survive the copy.
                compaction=CompactionRecord(900, 300, 400, 1000 if namespace == "alice" else None),
                offloads=[OffloadRecord("read_file", "call_1", [references[(namespace, "1_read_file.txt")]], 90, 60)],
            )
    return references


def _local_writes(root: Path) -> Counter[KEY]:
    with closing(sqlite3.connect(root / "index.db")) as connection:
        rows = connection.execute("SELECT namespace, key, digest, kind, size, reference, written_at FROM writes")
        return Counter(tuple(row) for row in rows)


def _connect(url: str) -> "psycopg.Connection[Any]":
    """A connection that reads `timestamptz` as casstore does, so times compare with the local store's text."""
    connection = psycopg.connect(url, options="-c TimeZone=UTC")
    read_times_as_text(connection)
    return connection


def _shared_writes(url: str) -> Counter[KEY]:
    with _connect(url) as connection:
        rows = connection.execute("SELECT namespace, key, digest, kind, size, reference, written_at FROM writes")
        return Counter(tuple(row) for row in rows)


def _shared_offloads(url: str) -> list[tuple[object, ...]]:
    with _connect(url) as connection:
        return sorted(
            connection.execute(
                "SELECT compaction_id, namespace, tool_name, tool_call_id, refs, original_tokens, saved_tokens, "
                "offloaded_at FROM offloads"
            ).fetchall()
        )


_COMPACTIONS = (
    "SELECT compaction_id, namespace, tokens_before, tokens_after, target_tokens, context_window, compacted_at "
    "FROM compactions ORDER BY compaction_id"
)


def _assert_same_content(root: Path, url: str, location: S3Location, references: dict[tuple[str, str], str]) -> None:
    assert _shared_writes(url) == _local_writes(root)  # as many writes per namespace, key, content, kind and time
    with closing(sqlite3.connect(root / "index.db")) as connection, _connect(url) as shared_connection:
        local_compactions = connection.execute(_COMPACTIONS).fetchall()
        assert [tuple(row) for row in shared_connection.execute(_COMPACTIONS).fetchall()] == local_compactions
    assert len(local_compactions) == 2 and {row[5] for row in local_compactions} == {1000, None}
    with closing(sqlite3.connect(root / "index.db")) as connection:
        offloads = sorted(
            connection.execute(
                "SELECT compaction_id, namespace, tool_name, tool_call_id, refs, original_tokens, saved_tokens, "
                "offloaded_at FROM offloads"
            ).fetchall()
        )
    assert _shared_offloads(url) == offloads
    for namespace in ("alice", "bob"):
        with (
            ContentAddressedToolResultStore(root, namespace=namespace) as local,
            SharedToolResultStore(index_url=url, blob_url=location.url, namespace=namespace) as shared,
        ):
            for (written_namespace, key), reference in references.items():
                if written_namespace == namespace:
                    assert shared.read(reference) == local.read(reference), key
    with SharedToolResultStore(index_url=url, blob_url=location.url) as shared:
        report = verify(shared)
    assert report.clean, report


@pytest.mark.slow
def test_a_copy_moves_everything_once(tmp_path: Path, postgres_url: str, s3_bucket_url: S3Location) -> None:
    root = tmp_path / "local"
    references = _fill(root)
    with (
        ContentAddressedToolResultStore(root) as source,
        SharedToolResultStore(index_url=postgres_url, blob_url=s3_bucket_url.url) as target,
    ):
        first = copy_store(source, target)
        again = copy_store(source, target)
    distinct = {content.encode() if isinstance(content, str) else content for _, _, content in WRITES}
    assert (first.blobs_copied, first.writes_copied, first.offloads_copied) == (len(distinct), len(WRITES), 2)
    assert first.compactions_copied == 2
    assert first.complete
    assert (again.blobs_copied, again.writes_copied, again.offloads_copied) == (0, 0, 0)  # run twice: adds nothing
    assert again.compactions_copied == 0
    _assert_same_content(root, postgres_url, s3_bucket_url, references)
    times = "SELECT digest, first_seen, last_seen FROM blobs ORDER BY digest"
    with _connect(postgres_url) as connection:
        shared_times = connection.execute(times).fetchall()
    with closing(sqlite3.connect(root / "index.db")) as local:  # each blob keeps its times
        assert shared_times == local.execute(times).fetchall()


@pytest.mark.slow
@pytest.mark.parametrize(("stage", "after"), [("blobs", 2), ("writes", 1)])
def test_a_copy_killed_midway_finishes_when_run_again(
    tmp_path: Path, postgres_url: str, s3_bucket_url: S3Location, stage: str, after: int
) -> None:
    root = tmp_path / "local"
    references = _fill(root)

    # A child process of its own (spawned, not forked: the object-store client's threads do not survive a fork),
    # killed with SIGKILL by its own progress callback at the point the test names.
    script = f"""
import os, signal, sys
from casstore import ContentAddressedToolResultStore, SharedToolResultStore
from casstore.maintenance.copying import copy_store

def progress(at, done, total):
    if at == {stage!r} and done >= {after}:
        os.kill(os.getpid(), signal.SIGKILL)

with ContentAddressedToolResultStore(sys.argv[1]) as source, SharedToolResultStore(
    index_url=sys.argv[2], blob_url=sys.argv[3]
) as target:
    copy_store(source, target, progress=progress)
"""
    killed = subprocess.run(
        [sys.executable, "-c", script, str(root), postgres_url, s3_bucket_url.url],
        capture_output=True, text=True, timeout=120, check=False, env={**os.environ, **s3_bucket_url.env},
    )  # fmt: skip
    assert killed.returncode == -signal.SIGKILL, killed.stderr  # killed where the test said
    # It really stopped midway: killed among the blobs, no write was copied yet; killed after the writes' batch, no
    # offload was.
    assert (sum(_shared_writes(postgres_url).values()) == 0) if stage == "blobs" else not _shared_offloads(postgres_url)
    completed = subprocess.run(
        [sys.executable, "-m", "casstore", "copy", "--root", str(root), "--to-index", postgres_url,
         "--to-blobs", s3_bucket_url.url, "--json"],
        capture_output=True, text=True, timeout=120, check=False, env={**os.environ, **s3_bucket_url.env},
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr
    assert json.loads(completed.stdout)["complete"]
    _assert_same_content(root, postgres_url, s3_bucket_url, references)


def test_writes_of_one_millisecond_keep_their_order_in_a_copy(
    tmp_path: Path, postgres_url: str, s3_bucket_url: S3Location
) -> None:
    root = tmp_path / "local"
    keys = [f"{n}_{tool}_call_{n}.txt" for n in range(6) for tool in ("read_file", "grep")]
    keys += ["a.txt", "b.txt", "a.txt", "c.txt", "a.txt"]  # identical writes among the others
    with ContentAddressedToolResultStore(root) as store:
        for key in keys:
            store.write(key=key, content=f"the result of {key}")
    with closing(sqlite3.connect(root / "index.db")) as local, local:
        local.execute("UPDATE write_rows SET written_at = '2026-01-01 00:00:00.000'")  # all in one millisecond
    with (
        ContentAddressedToolResultStore(root) as source,
        SharedToolResultStore(index_url=postgres_url, blob_url=s3_bucket_url.url) as target,
    ):
        copy_store(source, target)
    with _connect(postgres_url) as connection:
        copied = [row[0] for row in connection.execute("SELECT key FROM writes ORDER BY id")]
    assert copied == keys  # not sorted by key: `log` and `--max-size` break ties by id


def test_copying_into_a_store_that_hashes_otherwise_is_one_line_and_copies_nothing(
    tmp_path: Path, postgres_url: str, s3_bucket_url: S3Location
) -> None:
    root = tmp_path / "local"
    with ContentAddressedToolResultStore(root, dedup_scope="namespace") as source:
        source.write(key="a.txt", content="keyed for the default namespace")
    with SharedToolResultStore(index_url=postgres_url, blob_url=s3_bucket_url.url, dedup_scope="store") as target:
        target.write(key="b.txt", content="already here")
    completed = subprocess.run(
        [sys.executable, "-m", "casstore", "copy", "--root", str(root), "--to-index", postgres_url,
         "--to-blobs", s3_bucket_url.url],
        capture_output=True, text=True, timeout=120, check=False, env={**os.environ, **s3_bucket_url.env},
    )  # fmt: skip
    assert completed.returncode == 1
    assert completed.stderr.startswith("casstore: error: Cannot copy into") and completed.stderr.count("\n") == 1
    assert "Traceback" not in completed.stderr
    with _connect(postgres_url) as connection:
        assert connection.execute("SELECT count(*) FROM writes").fetchone() == (1,)


def test_an_empty_target_that_takes_the_sources_dedup_scope_is_told_so(
    tmp_path: Path, postgres_url: str, s3_bucket_url: S3Location
) -> None:
    root = tmp_path / "local"
    with ContentAddressedToolResultStore(root, dedup_scope="namespace") as source:
        reference = source.write(key="a.txt", content="keyed for the default namespace")
    with SharedToolResultStore(index_url=postgres_url, blob_url=s3_bucket_url.url, dedup_scope="store"):
        pass  # made, of `store` scope, and empty
    arguments = ["copy", "--root", str(root), "--to-index", postgres_url, "--to-blobs", s3_bucket_url.url]
    completed = subprocess.run(
        [sys.executable, "-m", "casstore", *arguments],
        capture_output=True, text=True, timeout=120, check=False, env={**os.environ, **s3_bucket_url.env},
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr
    assert "now hashes as the source does: dedup scope 'namespace'" in completed.stdout
    with SharedToolResultStore(index_url=postgres_url, blob_url=s3_bucket_url.url, dedup_scope="namespace") as target:
        assert target.read(reference) == "keyed for the default namespace"
    again = subprocess.run(
        [sys.executable, "-m", "casstore", *arguments, "--json"],
        capture_output=True, text=True, timeout=120, check=False, env={**os.environ, **s3_bucket_url.env},
    )  # fmt: skip
    assert json.loads(again.stdout)["dedup_scope_adopted"] is None  # a second copy changes no scope
