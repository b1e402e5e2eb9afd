"""`casstore demo` on a shared store: the commands its summary suggests run as printed (real servers, loopback)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.servers import S3Location


@pytest.mark.slow
def test_the_demos_hint_runs_as_printed_when_the_store_came_as_options(
    postgres_url: str, s3_bucket_url: S3Location, tmp_path: Path
) -> None:
    env = {name: value for name, value in os.environ.items() if not name.startswith("CASSTORE_")}
    corpus = Path(__file__).resolve().parents[1]
    store = ["--index", postgres_url, "--blobs", s3_bucket_url.url]
    completed = subprocess.run(
        [sys.executable, "-m", "casstore", "demo", "--steps", "25", "--corpus", str(corpus), *store],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=tmp_path,
        env=env,
    )
    assert completed.returncode == 0, completed.stderr
    (hint,) = [line for line in completed.stdout.splitlines() if "keeps the run" in line]
    commands = re.findall(r"`([^`]+)`", hint)
    assert len(commands) == 2, hint
    namespace = re.search(r"namespace (\S+) \(its own writes", completed.stdout)
    assert namespace is not None
    for command in commands:  # in a shell with none of the URL variables set, as the user's may be
        ran = subprocess.run(
            ["/bin/sh", "-c", command], capture_output=True, text=True, timeout=120, check=False, cwd=tmp_path, env=env
        )
        assert ran.returncode == 0, f"{command}: {ran.stderr}"
    assert (
        "writes"
        in subprocess.run(
            ["/bin/sh", "-c", commands[0]],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
            cwd=tmp_path,
            env=env,
        ).stdout
    )
