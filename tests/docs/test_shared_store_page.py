"""The shared-store page's example and its servers' setup, run as written (real PostgreSQL and SeaweedFS, loopback)."""

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.servers import DOCS_PORTS, S3Location, postgres_binaries, weed_binary

PAGE = Path(__file__).resolve().parents[2] / "docs" / "shared-store.md"


@pytest.mark.slow
def test_the_shared_store_example_runs_as_written(postgres_url: str, s3_bucket_url: S3Location, tmp_path: Path) -> None:
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(encoding="utf-8"), flags=re.S)
    (example,) = [block for block in blocks if "SharedToolResultStore(**settings)" in block]
    env = {
        **os.environ,
        **s3_bucket_url.env,
        "CASSTORE_INDEX_URL": postgres_url,
        "CASSTORE_BLOB_URL": s3_bucket_url.url,
    }
    completed = subprocess.run(
        [sys.executable, "-c", example], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert completed.returncode == 0, completed.stderr
    # The second replica found the first one's result, and searched it.
    assert "5000: test_case_4999 ... ok" in completed.stdout, completed.stdout


@pytest.mark.slow
def test_the_readme_shared_store_example_connects(postgres_url: str, s3_bucket_url: S3Location, tmp_path: Path) -> None:
    readme = (PAGE.parent.parent / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", readme, flags=re.S)
    (example,) = [block for block in blocks if "SharedToolResultStore(" in block]
    # The example's bucket is a placeholder: a store being made marks its blob location, so it must be a real one.
    assert '"s3://bucket/tool-results"' in example
    example = example.replace('"s3://bucket/tool-results"', repr(s3_bucket_url.url))
    env = {**os.environ, **s3_bucket_url.env, "CASSTORE_INDEX_URL": postgres_url}
    script = example + "\nprint(store.namespace, store.to_dict()['init_parameters']['index_url'])\nstore.close()\n"
    completed = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.startswith("alice ") and "CASSTORE_INDEX_URL" in completed.stdout, completed.stdout
    assert postgres_url not in completed.stdout  # the URL, with its password, is never written out


# The fixed ports of the page's servers, which the test servers of other workers never take (tests/servers.py).
TRY_PORTS = sorted(DOCS_PORTS)


def _page_block(marker: str) -> str:
    blocks: list[str] = re.findall(r"```sh\n(.*?)```", PAGE.read_text(encoding="utf-8"), flags=re.S)
    (block,) = [block for block in blocks if marker in block]
    return block


def _port_taken(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def _as_server_user(wrappers: Path, binaries: Path) -> None:
    """As root: `initdb` and `pg_ctl` on PATH run the real ones as the `postgres` user, as PostgreSQL requires."""
    wrappers.mkdir()
    for program in ("initdb", "pg_ctl"):
        wrapper = wrappers / program
        wrapper.write_text(f'#!/bin/sh\nexec runuser -u postgres -- {binaries / program} "$@"\n')
        wrapper.chmod(0o755)


@pytest.mark.slow
def test_trying_it_on_one_machine_runs_as_written() -> None:
    taken = [port for port in TRY_PORTS if _port_taken(port)]
    assert not taken, f"the page's servers need ports {taken} on 127.0.0.1, which something else holds"
    try_block, stop_block = _page_block("initdb -D pgdata"), _page_block('kill "$(cat seaweed.pid)"')
    # Not under pytest's tmp_path: its folders are private to root, and the PostgreSQL server runs as another user.
    base = Path(tempfile.mkdtemp(prefix="casstore-try-"))
    base.chmod(0o755)
    path = [str(postgres_binaries()), str(weed_binary().parent), str(Path(sys.executable).parent), os.environ["PATH"]]
    if os.geteuid() == 0:
        _as_server_user(base / "as-postgres", postgres_binaries())
        path.insert(0, str(base / "as-postgres"))
    env = {
        **{name: value for name, value in os.environ.items() if not name.startswith(("CASSTORE_", "AWS_", "PG"))},
        "HOME": str(base),
        "PATH": os.pathsep.join(path),
    }
    work = base / "work"
    work.mkdir(mode=0o777)
    work.chmod(0o777)
    folder = work / "casstore-try"
    try:
        # umask 0: what the block creates as root, the server's user may write too (a normal user needs none of it).
        completed = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", try_block],
            cwd=work,
            env=env,
            umask=0,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert completed.returncode == 0, f"{completed.stdout}\n{completed.stderr}"
        assert "casstore demo: 30 agent steps" in completed.stdout, completed.stdout
        assert "keeps the run" in completed.stdout and "damaged" not in completed.stdout.lower(), completed.stdout
        stopped = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", stop_block],
            cwd=folder,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert stopped.returncode == 0, stopped.stderr
        assert not (folder / "pgdata" / "postmaster.pid").exists()  # PostgreSQL is down (weed takes its time)
    finally:
        _stop_what_is_left(folder, env)
        shutil.rmtree(base, ignore_errors=True)


def _stop_what_is_left(folder: Path, env: dict[str, str]) -> None:
    """If the run failed half-way: stop the servers it started, by the pid file and data folder the page uses."""
    with contextlib.suppress(OSError, ValueError):
        os.kill(int((folder / "seaweed.pid").read_text()), signal.SIGKILL)
    if (folder / "pgdata" / "postmaster.pid").exists():
        subprocess.run(
            ["pg_ctl", "-D", str(folder / "pgdata"), "-m", "immediate", "-w", "stop"],
            env=env,
            capture_output=True,
            timeout=60,
            check=False,
        )
    for server, port in (("master", 19333), ("volume", 18080), ("s3", 18333)):  # weed's gRPC sockets, left in /tmp
        Path(f"/tmp/seaweedfs-{server}-grpc-{port}.sock").unlink(missing_ok=True)
