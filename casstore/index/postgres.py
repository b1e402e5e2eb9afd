"""
The PostgreSQL connection behind a shared store's index: a connection pool, transactions as units of work, and the
locks that let `gc` on one host run beside writers on any number of others.

The layers on the index (`casstore.index`, `casstore.blobs`, `casstore.search`) write their SQL once, in the dialect
both engines share; this module turns SQLite's spellings into PostgreSQL's as a statement is first used (placeholders
`?` become `%s`, SQLite's `strftime(..., 'now')` becomes `now()` to the millisecond; `timestamptz` values are read
back as SQLite's text).

Locking, the PostgreSQL form of the SQLite store's write lock (see docs/shared-store.md):

- every write transaction takes a shared advisory lock (`pg_advisory_xact_lock_shared`), so writers run side by side;
- `gc`'s transactions (forgetting writes, deleting blobs, removing stray objects) take the same lock exclusively,
  for the whole session of the transaction and of what it does right after committing, so no write transaction runs
  while gc decides what nothing references, nor while it deletes the objects of blob rows it has just deleted.

Round trips, which on a network (even loopback) cost far more than the statements they carry:

- a write transaction opens with `BEGIN` and the shared lock in one message;
- a write of one part whose blob is stored already (a duplicate) is one statement, `record_stored_write` (the
  function `casstore_record_stored_write`, which takes the shared lock itself): one round trip that commits, like the
  insert of a row;
- a read is one statement, as on SQLite.
"""

import os
import re
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit

from casstore import forks
from casstore.errors import StorageError, StoreClosedError
from casstore.index.postgres_connect import check_url, wait_until_connectable
from casstore.index.postgres_schema import migrate
from casstore.index.work import NOW_SQL, SHIFTED_NOW_SQL, UnitOfWork
from casstore.references import reference_kind

try:
    import psycopg
    import psycopg_pool
except ImportError as error:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "The shared store needs the `shared` extra: pip install 'casstore[shared]' (psycopg, psycopg-pool, obstore)."
    ) from error

# Advisory lock keys: any constant 64-bit numbers, the same for every casstore process.
GC_LOCK_KEY = 0x63617373_746F7265  # "casstore"

# casstore's tables in the index's schema.
CASSTORE_TABLES = (
    "blobs",
    "blob_frames",
    "write_rows",
    "dictionaries",
    "dictionary_samples",
    "offloads",
    "compactions",
    "archives",
    "search_documents",
    "search_text",
    "search_entries",
    "search_namespaces",
    "search_state",
    "search_pending",
    "store_settings",
    "_casstore_migrations",
)

# The tables that hold stored content (frames, dictionaries, searchable text): what `gc --vacuum` rewrites.
CONTENT_TABLES = ("blob_frames", "dictionaries", "search_text")

# A write transaction's first message: BEGIN and the writers' shared lock, in one round trip (the simple-query
# protocol runs both; the key is a constant, not a parameter).
_BEGIN_SHARED = f"BEGIN; SELECT pg_advisory_xact_lock_shared({GC_LOCK_KEY})"
_RECORD_STORED_WRITE = "SELECT casstore_record_stored_write(%s, %s, %s, %s, %s, %s, %s, %s)"

# Times are `timestamptz`, kept to the millisecond as SQLite's are; casstore reads them back as SQLite's text
# (`_UtcText`), so every layer above sees one format.
_PG_NOW = "date_trunc('milliseconds', now())"
_PG_SHIFTED_NOW = "date_trunc('milliseconds', now() + CAST(? AS INTERVAL))"
# Seconds to wait for a pooled connection before a call fails, and to connect, unless the URL says otherwise.
POOL_TIMEOUT_SECONDS = 10.0
DEFAULT_CONNECT_TIMEOUT_SECONDS = 10
RECONNECT_TIMEOUT_SECONDS = 5.0


@lru_cache(maxsize=512)
def translate(sql: str) -> str:
    """:returns: `sql`, written for SQLite, in PostgreSQL's spelling."""
    sql = sql.replace(SHIFTED_NOW_SQL, _PG_SHIFTED_NOW).replace(NOW_SQL, _PG_NOW)
    return sql.replace("?", "%s")


class _UtcText(psycopg.adapt.Loader):
    """Loads a `timestamptz` as the text SQLite keeps times in: UTC, `YYYY-MM-DD HH:MM:SS.SSS`."""

    def load(self, data: Any) -> str:
        moment = datetime.fromisoformat(bytes(data).decode()).astimezone(UTC)
        return f"{moment:%Y-%m-%d %H:%M:%S}.{moment.microsecond // 1000:03d}"


def _configure(connection: "psycopg.Connection[Any]") -> None:
    # UTC: a time given as text (`written_at <= ?`) is read as UTC, as SQLite reads it, whatever the server's zone.
    connection.execute("SET TIME ZONE 'UTC'")
    read_times_as_text(connection)


def read_times_as_text(connection: "psycopg.Connection[Any]") -> None:
    """Make `connection` read `timestamptz` values as casstore does: UTC text, `YYYY-MM-DD HH:MM:SS.SSS`."""
    connection.adapters.register_loader("timestamptz", _UtcText)


class PostgresConnection:
    """A pooled connection as the index layers use it: `execute` and `executemany` in SQLite's spelling."""

    __slots__ = ("raw",)

    def __init__(self, raw: "psycopg.Connection[Any]") -> None:
        self.raw = raw

    def execute(self, sql: str, parameters: Sequence[Any] = ()) -> "psycopg.Cursor[Any]":
        """:returns: The cursor, holding the statement's result."""
        return self.raw.execute(translate(sql), parameters)

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """Run `sql` once per row of parameters."""
        with self.raw.cursor() as cursor:
            cursor.executemany(translate(sql), rows)


class PostgresDatabase:
    """A pool of connections to one PostgreSQL database, with the index schema brought up to date."""

    # What a failed call raises beneath this layer; the repository reports it as `StorageError`.
    failures: tuple[type[Exception], ...] = (psycopg.Error,)
    # PostgreSQL reports no damage of its own files to a client as such: every failure is a failure of the service.
    damage: tuple[type[Exception], ...] = ()
    # A transaction PostgreSQL rolled back to break a deadlock between writers, or a serialization conflict: run again.
    conflicts: tuple[type[Exception], ...] = (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure)
    kind = "PostgreSQL index"
    # What to check when a write fails: the servers, and the disks behind them.
    failure_causes = "free space, the servers"
    # The search index's trigrams (`casstore.search.postgres`), which the repository's search layer asks for.

    def __init__(self, url: str, *, max_connections: int = 16) -> None:
        """
        Connect to the database at `url` and apply pending schema migrations (once, whoever else connects).

        :param url: A `postgresql://user:password@host:port/database` URL (libpq's other forms work too).
        :param max_connections: At most this many connections per store object (one per thread in a call).
        :raises ValueError: If `url` is not a PostgreSQL URL.
        :raises StorageError: At once if PostgreSQL refuses the connection (the message gives the server's reason);
            if it cannot be reached within the timeouts.
        :raises SchemaError: If the database holds a newer casstore schema, or casstore's tables without its record.
        """
        check_url(url)
        self._url = url
        self._max_connections = max_connections
        self.description = describe(url)
        self._closed = False
        # One connection first, so that a refusal (a wrong password, no such database) is reported with the server's
        # reason at once instead of as the pool's timeout.
        wait_until_connectable(self._conninfo(), description=self.description, timeout=POOL_TIMEOUT_SECONDS)
        self._open_pool()
        try:
            with self._connection() as connection:
                migrate(connection.raw, description=self.description)
        except psycopg.Error as error:
            self.close()
            raise StorageError(f"Could not open the PostgreSQL index at {self.description}: {error}") from error
        except BaseException:
            self.close()
            raise

    def _conninfo(self) -> str:
        """:returns: The URL with a `connect_timeout` unless it has one."""
        if "connect_timeout" in self._url:
            return self._url
        if "://" not in self._url:  # libpq's key=value form
            return f"{self._url} connect_timeout={DEFAULT_CONNECT_TIMEOUT_SECONDS}"
        return self._url + ("&" if "?" in self._url else "?") + f"connect_timeout={DEFAULT_CONNECT_TIMEOUT_SECONDS}"

    def _open_pool(self) -> None:
        self._generation = forks.generation
        self._pool = psycopg_pool.ConnectionPool(
            self._conninfo(),
            min_size=1,
            max_size=self._max_connections,
            kwargs={"autocommit": True},
            configure=_configure,
            timeout=POOL_TIMEOUT_SECONDS,
            # A connection checked out after the server restarted would fail the call it serves: check it first.
            check=psycopg_pool.ConnectionPool.check_connection,
            # Give up reconnecting in the background soon, so a call after an outage starts a fresh attempt instead of
            # waiting for the next of exponentially spaced ones.
            reconnect_timeout=RECONNECT_TIMEOUT_SECONDS,
            open=False,
            name="casstore",
        )
        try:
            self._pool.open(wait=True, timeout=POOL_TIMEOUT_SECONDS)
        except psycopg_pool.PoolTimeout as error:
            self._pool.close(timeout=0)
            raise StorageError(
                f"Could not connect to the PostgreSQL index at {self.description} within {POOL_TIMEOUT_SECONDS:.0f} "
                f"s: is the server running and the URL right?"
            ) from error

    @contextmanager
    def _connection(self) -> Iterator[PostgresConnection]:
        if self._closed:
            raise StoreClosedError("This casstore store is closed; open a new store.")
        if self._generation != forks.generation:
            self._reopen_after_fork()
        try:
            with self._pool.connection() as raw:
                yield PostgresConnection(raw)
        except psycopg.OperationalError:
            # The server went away (restarted, or the network): drop every idle connection that went with it, so the
            # next call after the server is back gets a live one.
            self._pool.check()
            raise

    def _reopen_after_fork(self) -> None:
        # The pool's connections and threads belong to the parent. Its sockets are kept open, never closed here:
        # closing them in the child would end the parent's sessions.
        with _FORK_LOCK:
            if self._generation != forks.generation:
                _INHERITED_POOLS.append(self._pool)
                self._open_pool()

    def reading(self) -> Any:
        """:returns: A context manager yielding a connection for reads, each statement on its own."""
        return self._connection()

    @contextmanager
    def snapshot(self) -> Iterator[PostgresConnection]:
        """:returns: A context manager yielding a connection whose reads all see one committed state."""
        with self._connection() as connection:
            connection.raw.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            try:
                yield connection
            finally:
                _end(connection, commit=False)

    @contextmanager
    def transaction(self, *, exclusive: bool = False) -> Iterator[UnitOfWork]:
        """
        Run a write transaction: `COMMIT` at the end, `ROLLBACK` on any error.

        :param exclusive: Take gc's exclusive lock (no write transaction runs meanwhile) instead of the writers'
            shared one; it is held until the transaction's `on_commit` callbacks have run.
        :returns: A context manager yielding the transaction's `UnitOfWork`.
        """
        with self._connection() as connection:
            raw = connection.raw
            if exclusive:
                raw.execute("SELECT pg_advisory_lock(%s)", (GC_LOCK_KEY,))
            try:
                if exclusive:
                    raw.execute("BEGIN")
                else:
                    raw.execute(_BEGIN_SHARED, prepare=False)
                work = UnitOfWork(connection)  # type: ignore[arg-type]
                try:
                    yield work
                except BaseException:
                    _end(connection, commit=False)
                    raise
                raw.execute("COMMIT")
                work._publish()
            finally:
                if exclusive and not raw.closed:
                    raw.execute("SELECT pg_advisory_unlock(%s)", (GC_LOCK_KEY,))

    def record_stored_write(
        self, *, namespace: str, key: str, digest: str, kind: str, size: int, reference: str, seen_ago: str
    ) -> bool:
        """
        Record a write whose blob is stored, as one statement that is a whole write transaction (one round trip): the
        function `casstore_record_stored_write` takes the writers' shared lock, checks that the blob's row exists,
        refreshes its `last_seen` if older than `seen_ago`, and appends the `writes` row, as a write transaction of
        `index.record_write` and `BlobStore.confirm` does.

        :param kind: `text` or `binary`.
        :param seen_ago: `database.ago(LAST_SEEN_RESOLUTION)`: how old a `last_seen` may be and be left alone.
        :returns: True if the write was recorded; False if the blob has no row (then nothing was written).
        """
        with self._connection() as connection:
            row = connection.raw.execute(
                _RECORD_STORED_WRITE,
                (GC_LOCK_KEY, namespace, key, digest, kind, reference_kind(reference)[1], size, seen_ago),
            ).fetchone()
        return bool(row and row[0])

    @contextmanager
    def rolled_back(self) -> Iterator[UnitOfWork]:
        """:returns: A context manager yielding an exclusive transaction that is always rolled back (a dry run)."""
        with self._connection() as connection:
            connection.raw.execute("BEGIN")
            try:
                connection.raw.execute("SELECT pg_advisory_xact_lock(%s)", (GC_LOCK_KEY,))
                yield UnitOfWork(connection)  # type: ignore[arg-type]
            finally:
                _end(connection, commit=False)

    def table_bytes(self) -> int:
        """:returns: Bytes casstore's tables take in PostgreSQL, their indexes and TOAST included."""
        with self._connection() as connection:
            row = connection.raw.execute(
                "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::BIGINT FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = current_schema() AND c.relkind = 'r' AND c.relname = ANY(%s)",
                (list(CASSTORE_TABLES),),
            ).fetchone()
        return int(row[0]) if row else 0

    # Giving space back: PostgreSQL's autovacuum makes the space of deleted rows reusable by later rows of the same
    # table; it gives the file system only empty pages at a table's end. gc therefore returns nothing itself.

    returns_free_space = False
    # The bytes of deleted rows stay in the tables' files until `rebuild` (VACUUM FULL, an exclusive lock per table):
    # gc rebuilds only when asked (`gc --vacuum`; docs/gc.md).
    rebuilds_to_delete = False

    def space_policy(self, *, rebuilt: bool) -> str:
        """:returns: What a collection's deleted rows become: `vacuumed` now, or `reused-after-autovacuum`."""
        return "vacuumed" if rebuilt else "reused-after-autovacuum"

    def estimated_bytes(self, work: UnitOfWork, *, rebuilt: bool) -> None:  # noqa: ARG002 - SQLite's question
        """:returns: None: the tables keep their size after rows are deleted (their space is reused, not given back)."""
        return None

    def return_free_space(self) -> bool:
        """:returns: False: autovacuum, not gc, makes the space of deleted rows reusable (nothing is given back)."""
        return False

    def yield_to_writers(self, held: float) -> None:
        """No pause: writers waiting for PostgreSQL's advisory lock queue for it, and get it in turn."""

    def rebuild(self) -> bool:
        """
        Rewrite the tables that hold content (`VACUUM FULL`), so the bytes of deleted rows leave PostgreSQL's files,
        and `VACUUM (ANALYZE)` the rest. `VACUUM FULL` takes an ACCESS EXCLUSIVE lock on each table while it rewrites
        it: reads and writes of the store wait for it (seconds per gigabyte of frames).

        :returns: True: once it returns, the tables' files hold only the rows kept.
        """
        with self._connection() as connection:
            connection.raw.execute(f"VACUUM FULL {', '.join(CONTENT_TABLES)}")
            rest = [table for table in CASSTORE_TABLES if table not in CONTENT_TABLES]
            connection.raw.execute(f"VACUUM (ANALYZE) {', '.join(rest)}")
        return True

    def close(self) -> None:
        """Close every connection. Later use raises `StoreClosedError`; closing twice is harmless."""
        if self._closed:
            return
        self._closed = True
        if self._generation == forks.generation:
            self._pool.close(timeout=5)


def _end(connection: PostgresConnection, *, commit: bool) -> None:
    raw = connection.raw
    if raw.closed or raw.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
        return
    raw.execute("COMMIT" if commit else "ROLLBACK")


def describe(url: str) -> str:
    """:returns: `host:port/database` of a PostgreSQL URL, with no user name or password, for messages."""
    parts = urlsplit(url)
    if parts.scheme.startswith("postgres"):
        host = parts.hostname or "localhost"
        return f"{host}:{parts.port or 5432}{parts.path or '/'}"
    return re.sub(r"password\s*=\s*\S+", "password=***", url)


# Pools inherited across fork(): kept alive so that their connections are never closed in the child.
_INHERITED_POOLS: list[Any] = []
_FORK_LOCK = threading.Lock()


def _reset_fork_lock() -> None:
    global _FORK_LOCK  # noqa: PLW0603 - a lock held at fork time must not stay held in the child
    _FORK_LOCK = threading.Lock()


os.register_at_fork(after_in_child=_reset_fork_lock)
