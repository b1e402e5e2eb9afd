"""
What migration 0017 (a learned frame's dependency kept in its slot) needs of a SQLite index before it runs: every row
of the table `blob_dependencies` must belong to a blob whose frame is kept in the index (it has a `frame_slots` row),
as every learned frame is. A row that does not (a damaged index, or one edited by hand) would have nowhere to go, and
dropping it could let gc delete a blob it names; such rows are named, with what to do, before anything changes.
"""

import sqlite3
from collections.abc import Sequence

from casstore.errors import SchemaError

# The migration that moves `blob_dependencies` rows into `frame_slots`.
DEPENDENCIES_IN_SLOTS = "0017_dependencies_in_slots"
_EXAMPLES = 3
# `{frames}`: the table with a row per frame kept in the index, `frame_slots`, or `blob_frames` before 0013 (which
# makes a slot of each of its rows in the same upgrade).
_UNSLOTTED_SQL = """
    SELECT d.blob_id, d.needs_id, d.encoding, b.digest, b.stored_in
    FROM blob_dependencies d LEFT JOIN blobs b ON b.id = d.blob_id
    WHERE NOT EXISTS (SELECT 1 FROM {frames} s WHERE s.blob_id = d.blob_id)
    ORDER BY d.blob_id
"""


def refuse_unslotted_dependencies(connection: sqlite3.Connection, *, pending: Sequence[str], path: object) -> None:
    """
    Before migration 0017 runs: every row of `blob_dependencies` must have the `frame_slots` row of its blob, where
    0017 keeps it. Otherwise the upgrade is refused, naming the rows and the statement that removes them; nothing is
    changed.

    :param connection: The index's connection, inside the transaction that will apply `pending`.
    :param pending: The names of the migrations about to be applied.
    :param path: The index file, for the message.
    :raises SchemaError: If a dependency row's blob has no frame in the index.
    """
    if DEPENDENCIES_IN_SLOTS not in pending:
        return
    tables = {
        row[0]
        for row in connection.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ('blob_dependencies', 'frame_slots', "
            "'blob_frames')"
        )
    }
    if "blob_dependencies" not in tables:
        return  # made before 0008 (or new): its dependencies are made after this check, by this release
    frames = "frame_slots" if "frame_slots" in tables else "blob_frames"
    unslotted = connection.execute(_UNSLOTTED_SQL.format(frames=frames)).fetchall()
    if unslotted:
        raise SchemaError(unslotted_message(unslotted, place=str(path), frames=frames))


def unslotted_message(
    unslotted: Sequence[tuple[int, int, str, str | None, str | None]], *, place: str, frames: str = "frame_slots"
) -> str:
    """
    :param unslotted: `(blob_id, needs_id, encoding, digest, stored_in)` of each `blob_dependencies` row whose blob has
        no `frame_slots` row (`digest` and `stored_in` None when the blob has no `blobs` row either).
    :param place: The index, as the message names it.
    :param frames: The table with a row per frame kept in the index (`blob_frames` in an index made before 0013).
    :returns: What `SchemaError` says: the rows, what they mean, and the statement that removes them (by a condition,
        not by their ids, so that it stays short however many there are).
    """
    examples = "; ".join(
        f"blob_id {blob_id} ({'no blobs row' if digest is None else f'{digest}, stored in {stored_in}'}) needs "
        f"blob_id {needs_id} as its {encoding}"
        for blob_id, needs_id, encoding, digest, stored_in in unslotted[:_EXAMPLES]
    )
    more = f"; and {len(unslotted) - _EXAMPLES} more" if len(unslotted) > _EXAMPLES else ""
    rows = (
        "1 row of the table blob_dependencies belongs"
        if len(unslotted) == 1
        else f"{len(unslotted)} rows of the table blob_dependencies belong"
    )
    return (
        f"{place} cannot be upgraded: {rows} to a blob whose frame is not kept in the index ({examples}{more}). "
        f"A frame that needs another blob is only ever kept in the index, and this release keeps the dependency in the "
        f"frame's row (migration {DEPENDENCIES_IN_SLOTS}), so such a row is damage, or was made by hand. Nothing was "
        "changed. Remove those rows with sqlite3: "
        f"DELETE FROM blob_dependencies WHERE blob_id NOT IN (SELECT blob_id FROM {frames}); then open the store "
        "again and run `casstore verify`, which reports a blob whose frame cannot be read without them."
    )
