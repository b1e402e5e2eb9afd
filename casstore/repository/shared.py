"""
Opening a shared store's repository: its index on PostgreSQL (`casstore.index.postgres`), its blobs in an object
store (`casstore.blobs.objects`), checked to belong together; and recording that the objects moved.

Needs the `shared` extra (psycopg, psycopg-pool, obstore), imported only here and only when a shared store is opened.
"""

from casstore.blobs import location as blob_location
from casstore.index import scope as dedup_scopes
from casstore.repository import Repository


def open_shared_repository(
    *,
    index_url: str,
    blob_url: str,
    blob_options: dict[str, str] | None,
    compression_level: int,
    inline_max: int,
    learn: bool = True,
    search_index: bool = False,
    dedup_scope: str | None = None,
) -> Repository:
    """
    Open the repository of a shared store: the PostgreSQL index and the object store.

    :param search_index: Index the text of every write (docs/search.md).
    :param dedup_scope: `store`, `namespace` or None (what the index records; `store` for a new store).
    :raises ValueError: If `dedup_scope` is not the scope the index records.
    :raises StorageError: If either cannot be reached.
    :raises BlobLocationError: If the index records another blob location, or `blob_url` holds another store's blobs.
    :raises SearchUnavailableError: With `search_index`, if the server cannot hold the search index.
    """
    try:
        from casstore.blobs.objects import ObjectBlobs
        from casstore.index.postgres import PostgresDatabase
        from casstore.search.postgres import TRIGRAM_TEXT
    except ImportError as error:
        raise ImportError(
            f"The shared store needs the `shared` extra: pip install 'casstore[shared]' (psycopg, psycopg-pool and "
            f"obstore); {error}."
        ) from error

    objects = ObjectBlobs(blob_url, options=blob_options)
    try:
        database = PostgresDatabase(index_url)
    except BaseException:
        objects.close()
        raise
    try:
        with database.reading() as connection:
            blob_location.settle(connection, objects, index=database.description)
            scope = dedup_scopes.settle(connection, dedup_scope, index=database.description)
    except BaseException:
        database.close()
        objects.close()
        raise

    def footprint() -> tuple[int, int]:
        return database.table_bytes(), objects.total_bytes()

    return Repository(
        database=database,
        blob_backend=objects,
        compression_level=compression_level,
        inline_max=inline_max,
        footprint=footprint,
        description=f"{database.description} and {blob_url}",
        learn=learn,
        searchable=True,
        search_index_writes=search_index,
        search_text=TRIGRAM_TEXT,
        dedup_scope=scope,
    )


def relocate_blobs(*, index_url: str, blob_url: str, blob_options: dict[str, str] | None = None) -> str:
    """
    Record that a shared store's blob objects now live at `blob_url`, once they were copied there (every object under
    the old prefix, its marker `casstore-store.json` too).

    :param index_url: The store's PostgreSQL URL.
    :param blob_url: The new location.
    :param blob_options: The object-store client's settings, as for `SharedToolResultStore`.
    :returns: The location recorded before.
    :raises BlobLocationError: If `blob_url` has no marker naming this store, or lacks its blobs; nothing is changed.
    :raises StorageError: If either service cannot be reached.
    """
    from casstore.blobs.objects import ObjectBlobs
    from casstore.index.postgres import PostgresDatabase

    objects = ObjectBlobs(blob_url, options=blob_options)
    try:
        database = PostgresDatabase(index_url)
        try:
            with database.reading() as connection:
                return blob_location.relocate(connection, objects, index=database.description)
        finally:
            database.close()
    finally:
        objects.close()
