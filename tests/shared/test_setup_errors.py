"""
A shared store's first day: a wrong password, a database or URL that is not there, a mistyped blob URL, a plain-HTTP
endpoint or missing credentials each fail at once with the server's reason or what to set (real PostgreSQL and
SeaweedFS on loopback).
"""

import http.server
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from casstore import SharedToolResultStore
from casstore.blobs.objects import ObjectBlobs
from casstore.errors import StorageError
from casstore.index.postgres_connect import is_passing, reason_of, wait_until_connectable
from tests.servers import PostgresServer, S3Location

AUTH_FAILED = "password authentication failed"


def _with_password(url: str, password: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=f"{parts.username}:{password}@{parts.hostname}:{parts.port}"))


def _with_database(url: str, database: str) -> str:
    return urlunsplit(urlsplit(url)._replace(path=f"/{database}"))


def _auth_failures(server: PostgresServer) -> int:
    return (server.base / "server.log").read_text(errors="replace").count(AUTH_FAILED)


@pytest.mark.slow
def test_a_wrong_password_is_reported_with_the_servers_reason_and_tried_once(
    postgres_server: PostgresServer, postgres_url: str, s3_bucket_url: S3Location
) -> None:
    before = _auth_failures(postgres_server)
    with pytest.raises(StorageError) as raised:
        SharedToolResultStore(index_url=_with_password(postgres_url, "wrong"), blob_url=s3_bucket_url.url)
    message = str(raised.value)
    assert AUTH_FAILED in message and "--index" in message, message
    assert "wrong" not in message  # the password stays out of the message
    # Waiting cannot cure a refusal: the server saw one attempt, not a pool's worth of retries.
    assert _auth_failures(postgres_server) == before + 1


@pytest.mark.slow
def test_a_database_that_does_not_exist_is_named_at_once(postgres_url: str, s3_bucket_url: S3Location) -> None:
    with pytest.raises(StorageError, match='database "nodb" does not exist'):
        SharedToolResultStore(index_url=_with_database(postgres_url, "nodb"), blob_url=s3_bucket_url.url)


def test_a_closed_port_is_worth_waiting_for_and_a_refusal_is_not(postgres_server: PostgresServer) -> None:
    with pytest.raises(psycopg.OperationalError) as refused:
        psycopg.connect("postgresql://casstore@127.0.0.1:1/db?connect_timeout=5")
    assert is_passing(reason_of(refused.value)), refused.value
    with pytest.raises(psycopg.OperationalError) as denied:
        psycopg.connect(_with_password(postgres_server.url(), "wrong"))
    assert reason_of(denied.value).startswith(AUTH_FAILED)
    assert not is_passing(reason_of(denied.value))
    assert is_passing("the database system is starting up")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    scheme=st.from_regex(r"[a-z][a-z0-9+]{0,9}", fullmatch=True).filter(lambda s: s not in {"postgresql", "postgres"})
)
def test_an_index_url_that_is_not_postgresqls_is_refused_before_connecting(scheme: str) -> None:
    with pytest.raises(ValueError, match="must be a PostgreSQL URL such as postgresql://") as raised:
        SharedToolResultStore(index_url=f"{scheme}://user:hunter2@127.0.0.1:1/db", blob_url="memory://")
    assert "hunter2" not in str(raised.value)
    assert "CASSTORE_INDEX_URL" in str(raised.value)


@given(url=st.text(st.characters(codec="utf-8", exclude_characters="="), max_size=30).filter(lambda u: "://" not in u))
def test_a_blob_url_without_a_scheme_names_the_option_and_the_forms(url: str) -> None:
    with pytest.raises(ValueError, match=r"blob URL \(blob_url, --blobs or CASSTORE_BLOB_URL\).*s3://bucket/prefix"):
        ObjectBlobs(url)


@pytest.mark.parametrize("url", ["mysql://bucket/prefix", "s3://", "s3:///prefix"])
def test_a_blob_url_of_no_object_store_is_refused(url: str) -> None:
    with pytest.raises(ValueError, match=r"--blobs"):
        ObjectBlobs(url)


def test_a_plain_http_endpoint_needs_allow_http(s3_bucket_url: S3Location, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_ALLOW_HTTP")
    with pytest.raises(ValueError, match="set AWS_ALLOW_HTTP=true"):
        ObjectBlobs(s3_bucket_url.url)
    monkeypatch.setenv("AWS_ALLOW_HTTP", "true")
    assert ObjectBlobs(s3_bucket_url.url).read_name("nothing-here") is None  # and then it works


def test_half_a_key_pair_names_the_other_half(s3_bucket_url: S3Location, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    with pytest.raises(ValueError, match="AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not"):
        ObjectBlobs(s3_bucket_url.url)


@pytest.mark.slow
def test_missing_credentials_fail_when_the_store_is_made_naming_the_variables(
    postgres_url: str, s3_bucket_url: S3Location, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    # The client then asks the machine's metadata service for a role: on loopback here, where nothing answers.
    monkeypatch.setenv("AWS_METADATA_ENDPOINT", "http://127.0.0.1:1")
    with pytest.raises(StorageError, match=r"No credentials.*set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"):
        SharedToolResultStore(index_url=postgres_url, blob_url=s3_bucket_url.url)


@pytest.mark.slow
def test_refused_credentials_say_which_to_check(
    postgres_url: str, s3_bucket_url: S3Location, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    with pytest.raises(StorageError, match="check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"):
        SharedToolResultStore(index_url=postgres_url, blob_url=s3_bucket_url.url)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("index", "blobs", "said"),
    [
        ("nodb", "{blobs}", 'database "nodb" does not exist'),
        ("{index}", "notaurl", "--blobs"),
    ],
)
def test_the_command_reports_a_setup_mistake_in_one_line(
    index: str, blobs: str, said: str, *, postgres_url: str, s3_bucket_url: S3Location, tmp_path: Path
) -> None:
    index_url = postgres_url if index == "{index}" else _with_database(postgres_url, index)
    blob_url = s3_bucket_url.url if blobs == "{blobs}" else blobs
    completed = subprocess.run(
        [sys.executable, "-m", "casstore", "stats", "--index", index_url, "--blobs", blob_url],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert completed.returncode == 1
    assert completed.stderr.count("\n") == 1 and said in completed.stderr, completed.stderr


@pytest.mark.parametrize("query", ["foo=bar", "connect_timeout=abc"])
def test_an_index_url_libpq_refuses_is_a_value_error_naming_the_option(query: str) -> None:
    # libpq refuses these before asking any server (port 1 has none): nothing is retried, no password is shown.
    with pytest.raises(ValueError, match=r"index URL \(index_url, --index, CASSTORE_INDEX_URL\)") as raised:
        SharedToolResultStore(index_url=f"postgresql://user:hunter2@127.0.0.1:1/db?{query}", blob_url="memory://")
    assert "hunter2" not in str(raised.value)


def test_a_closed_port_is_reported_in_one_sentence_after_the_wait() -> None:
    with pytest.raises(StorageError) as raised:
        wait_until_connectable("postgresql://casstore@127.0.0.1:1/db?connect_timeout=2", description="db", timeout=0.5)
    message = str(raised.value)
    assert "(Connection refused): is the server running, and the host and port right?" in message, message
    assert "Is the server running on that host" not in message  # libpq's own hint, asked once in our words


def test_a_host_name_that_does_not_resolve_is_not_called_a_refusal() -> None:
    with pytest.raises(StorageError) as raised:
        SharedToolResultStore(index_url="postgresql://user:hunter2@no-such-host.invalid:5432/db", blob_url="memory://")
    message = str(raised.value)
    assert "does not resolve" in message and "no-such-host.invalid" in message and "--index" in message, message
    assert "refused" not in message and "hunter2" not in message


_S3_ERRORS = {
    "no such bucket": (404, "NoSuchBucket", "The specified bucket does not exist"),
    "internal error": (500, "InternalError", "We encountered an internal error, please try again."),
}


class _AnsweringS3(http.server.BaseHTTPRequestHandler):
    """An S3 endpoint that answers every request with one error, as a server does for a bucket it does not have."""

    answer = _S3_ERRORS["no such bucket"]

    def do_PUT(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        status, code, words = self.answer
        body = f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code><Message>{words}</Message></Error>'
        self.send_response(status)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())

    do_GET = do_HEAD = do_PUT

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def answering_s3() -> Iterator[str]:
    """:returns: The endpoint of an S3 server on loopback that answers every request with `_AnsweringS3.answer`."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _AnsweringS3)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        thread.join(timeout=10)


@pytest.mark.parametrize("failure", sorted(_S3_ERRORS))
def test_a_bucket_that_does_not_exist_is_named_as_the_likely_cause(
    failure: str, postgres_url: str, answering_s3: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_AnsweringS3, "answer", _S3_ERRORS[failure])
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "casstore")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "casstore-secret")
    options = {"endpoint": answering_s3, "region": "us-east-1", "allow_http": "true", "max_retries": "0"}
    with pytest.raises(StorageError) as raised:
        SharedToolResultStore(index_url=postgres_url, blob_url="s3://missing-bucket/fleet", blob_options=options)
    message = str(raised.value)
    assert "casstore-store.json" in message, message
    assert "check that the bucket exists" in message or "The bucket does not exist: create it" in message, message


def test_a_server_failure_after_the_first_write_gives_no_bucket_advice(answering_s3: str) -> None:
    # Only the store's first write (its marker) makes a missing bucket the likely cause of a 500.
    options = {"endpoint": answering_s3, "region": "us-east-1", "allow_http": "true", "max_retries": "0"}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_AnsweringS3, "answer", _S3_ERRORS["internal error"])
        patch.setenv("AWS_ACCESS_KEY_ID", "casstore")
        patch.setenv("AWS_SECRET_ACCESS_KEY", "casstore-secret")
        with pytest.raises(StorageError) as raised:
            ObjectBlobs("s3://some-bucket/fleet", options=options).write("ab" * 32, b"frame")
    message = str(raised.value)
    assert "InternalError" in message and "check that the bucket exists" not in message, message
