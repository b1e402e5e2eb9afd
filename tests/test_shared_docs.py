"""The shared-store page's example, run as written against real PostgreSQL and SeaweedFS servers."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.servers import S3Location

PAGE = Path(__file__).resolve().parent.parent / "docs" / "shared-store.md"


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
