"""What `repository.retention` answers: a verify's snapshot and blob checks, a collection and its preview."""

from dataclasses import dataclass

from casstore.blobs.collection import WaitingBlobs


@dataclass(frozen=True, slots=True)
class IntegritySnapshot:
    """What `verify` starts from, read in one consistent state of the index."""

    digests: list[str]
    dictionaries: list[str]
    dangling_writes: list[tuple[str, str]]
    unreferenced: set[str]


@dataclass(frozen=True, slots=True)
class BlobCheck:
    """One blob re-read and re-hashed: `ok`, `corrupt` (with `message`), `missing`, or `collected` meanwhile."""

    status: str
    message: str = ""


@dataclass(frozen=True, slots=True)
class Collection:
    """
    What a collection removed, or with a dry run would remove. With a size limit (`max_size`), also the stored
    bytes of the blobs the writes in scope needed before it, and the digests the forgotten writes referenced.

    `dictionaries_deleted` counts trained dictionaries deleted (retired, or trained only on deleted results, and
    used by no kept blob). `bases_kept` and `dictionaries_kept` count what holds bytes of deleted results and stays
    because a kept blob needs it: blobs no write names kept as a delta base, and dictionaries trained on deleted
    results that a kept blob uses. `texts_unindexed` counts the search index's documents removed because no write
    references their blob any more (deleted with it, or kept for the blob layer only).
    """

    writes_forgotten: int = 0
    offloads_forgotten: int = 0
    blobs_deleted: int = 0
    blob_bytes_freed: int = 0
    dictionaries_deleted: int = 0
    bases_kept: int = 0
    dictionaries_kept: int = 0
    texts_unindexed: int = 0
    needed_bytes_before: int | None = None
    released: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class CollectionPreview:
    """
    What a collection would do now, found in a transaction that is rolled back.

    `index_bytes_after` estimates what the index takes once the space of what it deletes is given back (None: the
    engine does not give it back, as PostgreSQL's, whose size stays); `outside_bytes_freed` is the stored bytes of
    the deleted blobs kept outside the index; `waiting` the blobs the grace period would keep, and
    `released_waiting` those of them the forgotten writes referenced; `needed_bytes_after` (with `max_size`) the
    stored bytes of the blobs the writes in scope would still need.
    """

    collection: Collection
    index_bytes_after: int | None
    outside_bytes_freed: int
    waiting: WaitingBlobs
    released_waiting: WaitingBlobs
    needed_bytes_after: int | None
