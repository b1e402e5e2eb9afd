"""
The two backends of the store's contract tests (`tests/stores/contract/`), behind one interface: the local store
(SQLite and a folder) and the shared store (PostgreSQL and S3 on real servers, `tests/servers.py`).

A `Backend` opens stores on one index and one blob area (every store a test opens sees the others' writes), and
looks into them the way a person would: SQL on the index (written with `?` placeholders, turned into `%s` for
PostgreSQL), and the blob files or objects listed or overwritten directly.
"""

import contextlib
import re
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import obstore
import psycopg
import pytest
from haystack.utils import Secret
from obstore.store import from_url

from casstore import ContentAddressedToolResultStore, ReferenceNotFoundError, SharedToolResultStore
from casstore.blobs.location import MARKER_NAME
from casstore.blobs.objects import object_name
from casstore.index.postgres import read_times_as_text
from casstore.stores.local import DEFAULT_INLINE_MAX, RepositoryToolResultStore
from tests.helpers import create_store
from tests.servers import S3Location

INDEX_URL_VARIABLE = "CASSTORE_INDEX_URL"
TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}$")
"""How either index's times read back: UTC, to the millisecond."""
LONG_AGO = "2020-01-01 00:00:00.000"
"""A `last_seen` older than any grace period."""


class StoreFactory(Protocol):
    """`open_store(namespace=..., inline_max=...)`: a store on the backend's index and blobs, closed after the test."""

    def __call__(
        self,
        namespace: str = "default",
        inline_max: int = DEFAULT_INLINE_MAX,
        compression_level: int = 3,
        learn: bool = True,
        search_index: bool = False,
        *,
        dedup_scope: str | None = None,
    ) -> RepositoryToolResultStore:
        """:returns: An opened store."""
        ...


class Backend:
    """One index and one blob area, and the stores opened on them."""

    kind: str
    stored_elsewhere: str
    """What `blobs.stored_in` says of a blob kept outside the index: `file` or `object`."""

    def __init__(self) -> None:
        self._opened: list[RepositoryToolResultStore] = []

    def _make(
        self,
        namespace: str,
        inline_max: int,
        compression_level: int,
        learn: bool,
        search_index: bool,
        *,
        dedup_scope: str | None,
    ) -> RepositoryToolResultStore:
        raise NotImplementedError

    def open(
        self,
        namespace: str = "default",
        inline_max: int = DEFAULT_INLINE_MAX,
        compression_level: int = 3,
        learn: bool = True,
        search_index: bool = False,
        *,
        dedup_scope: str | None = None,
    ) -> RepositoryToolResultStore:
        """:returns: A new store object on this backend's index and blobs, closed when the test ends."""
        store = self._make(namespace, inline_max, compression_level, learn, search_index, dedup_scope=dedup_scope)
        self._opened.append(store)
        return store

    def rows(self, sql: str, parameters: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """:returns: The rows of a query on the index (`?` placeholders)."""
        raise NotImplementedError

    def execute(self, sql: str, parameters: Sequence[Any] = ()) -> None:
        """Run a statement on the index and commit it."""
        raise NotImplementedError

    def blob_names(self) -> list[str]:
        """:returns: Every blob file (`<2 hex>/<62 hex>.zst`) or object (`blake3/<2 hex>/<62 hex>`), sorted."""
        raise NotImplementedError

    def blob_name(self, digest: str) -> str:
        """:returns: The name `blob_names` gives the blob of `digest`."""
        raise NotImplementedError

    def put_raw(self, name: str, data: bytes) -> None:
        """Write `data` (over anything there) as the blob file or object of that name, as an intruder would."""
        raise NotImplementedError

    def remove_raw(self, name: str) -> None:
        """Remove the blob file or object of that name behind the store's back."""
        raise NotImplementedError

    def count(self, table: str) -> int:
        return int(self.rows(f"SELECT count(*) FROM {table}")[0][0])

    def snapshot(self) -> tuple[int, int, int, list[str]]:
        """(writes, blob rows, frames, blob files or objects): what a refused write must leave unchanged."""
        return self.count("writes"), self.count("blobs"), self.count("blob_frames"), self.blob_names()

    def fail_writes_of_key(self, key: str) -> None:
        """Install a trigger that makes the index refuse any `writes` row with this key, as a full disk would."""
        raise NotImplementedError

    def close(self) -> None:
        for store in self._opened:
            store.close()


class LocalBackend(Backend):
    kind = "local"
    stored_elsewhere = "file"

    def __init__(self, root: Path) -> None:
        super().__init__()
        self.root = root
        create_store(root)  # the index exists from the start, as the shared store's tables do

    def _make(
        self,
        namespace: str,
        inline_max: int,
        compression_level: int,
        learn: bool,
        search_index: bool,
        *,
        dedup_scope: str | None,
    ) -> RepositoryToolResultStore:
        return ContentAddressedToolResultStore(
            self.root,
            namespace=namespace,
            inline_max=inline_max,
            compression_level=compression_level,
            learn=learn,
            search_index=search_index,
            dedup_scope=dedup_scope,
        )

    def rows(self, sql: str, parameters: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with contextlib.closing(sqlite3.connect(self.root / "index.db")) as connection:
            return [tuple(row) for row in connection.execute(sql, parameters)]

    def execute(self, sql: str, parameters: Sequence[Any] = ()) -> None:
        with contextlib.closing(sqlite3.connect(self.root / "index.db")) as connection, connection:
            connection.execute(sql, parameters)

    def blob_names(self) -> list[str]:
        blobs = self.root / "blobs"
        if not blobs.exists():
            return []
        return sorted(str(path.relative_to(blobs)) for path in blobs.rglob("*") if path.is_file())

    def blob_name(self, digest: str) -> str:
        return f"{digest[:2]}/{digest[2:]}.zst"

    def put_raw(self, name: str, data: bytes) -> None:
        path = self.root / "blobs" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)

    def remove_raw(self, name: str) -> None:
        (self.root / "blobs" / name).unlink()

    def fail_writes_of_key(self, key: str) -> None:
        self.execute(
            f"CREATE TRIGGER fail_key BEFORE INSERT ON write_rows WHEN NEW.key = '{key}' "
            "BEGIN SELECT RAISE(ABORT, 'no space left on device'); END"
        )


class SharedBackend(Backend):
    kind = "shared"
    stored_elsewhere = "object"

    def __init__(self, index_url: str, s3: S3Location, monkeypatch: pytest.MonkeyPatch) -> None:
        super().__init__()
        self.index_url = index_url
        self.s3 = s3
        monkeypatch.setenv(INDEX_URL_VARIABLE, index_url)
        self._connection: psycopg.Connection[Any] | None = None
        self.bucket, self.prefix = open_bucket(s3)

    def _make(
        self,
        namespace: str,
        inline_max: int,
        compression_level: int,
        learn: bool,
        search_index: bool,
        *,
        dedup_scope: str | None,
    ) -> RepositoryToolResultStore:
        return SharedToolResultStore(
            index_url=Secret.from_env_var(INDEX_URL_VARIABLE),
            blob_url=self.s3.url,
            blob_options=self.s3.options,
            namespace=namespace,
            inline_max=inline_max,
            compression_level=compression_level,
            learn=learn,
            search_index=search_index,
            dedup_scope=dedup_scope,
        )

    @property
    def connection(self) -> "psycopg.Connection[Any]":
        if self._connection is None:
            self._connection = psycopg.connect(self.index_url, autocommit=True, options="-c TimeZone=UTC")
            read_times_as_text(self._connection)  # times compared with the local store's, as casstore reads them
        return self._connection

    def rows(self, sql: str, parameters: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return [tuple(row) for row in self.connection.execute(sql.replace("?", "%s"), parameters).fetchall()]

    def execute(self, sql: str, parameters: Sequence[Any] = ()) -> None:
        self.connection.execute(sql.replace("?", "%s"), parameters)

    def full_object_names(self) -> list[str]:
        """:returns: The names, in the bucket, of every object under the store's prefix, sorted."""
        return sorted(meta["path"] for batch in obstore.list(self.bucket, prefix=self.prefix) for meta in batch)

    def blob_names(self) -> list[str]:
        names = (name.removeprefix(self.prefix + "/") for name in self.full_object_names())
        return sorted(name for name in names if name != MARKER_NAME)  # the store's marker is no blob

    def blob_name(self, digest: str) -> str:
        return object_name(digest)

    def put_raw(self, name: str, data: bytes) -> None:
        obstore.put(self.bucket, f"{self.prefix}/{name}", data)

    def remove_raw(self, name: str) -> None:
        obstore.delete(self.bucket, f"{self.prefix}/{name}")

    def fail_writes_of_key(self, key: str) -> None:
        self.execute(
            "CREATE FUNCTION fail_key() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            f"IF NEW.key = '{key}' THEN RAISE EXCEPTION 'no space left on device'; END IF; RETURN NEW; END $$"
        )
        self.execute("CREATE TRIGGER fail_key BEFORE INSERT ON write_rows FOR EACH ROW EXECUTE FUNCTION fail_key()")

    def close(self) -> None:
        try:
            super().close()
        finally:
            if self._connection is not None:
                self._connection.close()


def open_bucket(s3: S3Location) -> tuple[Any, str]:
    """
    :returns: The whole bucket of `s3` as an obstore store (so that names are seen as any client of the bucket sees
        them: `<prefix>/blake3/...`), and the location's prefix.
    """
    bucket, _, prefix = s3.url.removeprefix("s3://").partition("/")
    options: Any = {"endpoint": s3.options["endpoint"], "region": s3.options["region"]}
    return from_url(f"s3://{bucket}", config=options, client_options={"allow_http": True}), prefix


def make_backend(kind: str, request: pytest.FixtureRequest, folder: Path) -> Backend:
    """:returns: A fresh backend of `kind` (`local`: a root under `folder`; `shared`: a fresh database and prefix)."""
    if kind == "local":
        return LocalBackend(folder / f"store-{kind}")
    if kind == "shared":
        return SharedBackend(
            request.getfixturevalue("postgres_url"),
            request.getfixturevalue("s3_bucket_url"),
            request.getfixturevalue("monkeypatch"),
        )
    raise ValueError(kind)


def readable(store: RepositoryToolResultStore, references: list[str]) -> list[bool]:
    """:returns: For each reference, whether `store` reads it (False: not found, as a forgotten one is)."""
    answers = []
    for reference in references:
        try:
            store.read(reference)
            answers.append(True)
        except ReferenceNotFoundError:
            answers.append(False)
    return answers


def blob_digests(backend: Backend) -> list[str]:
    """:returns: The digest of every blob row, sorted."""
    return [row[0] for row in backend.rows("SELECT digest FROM blobs ORDER BY digest")]


def where_blobs_are(backend: Backend) -> dict[str, str]:
    """:returns: Each blob's digest, and where it is kept (`blobs.stored_in`: `index`, `file` or `object`)."""
    return {row[0]: row[1] for row in backend.rows("SELECT digest, stored_in FROM blobs")}


def age_every_blob(backend: Backend) -> None:
    """Date every blob's `last_seen` back to `LONG_AGO`, so that gc's grace period keeps none of them."""
    backend.execute(f"UPDATE blobs SET last_seen = '{LONG_AGO}'")
