"""
The frames kept in a SQLite index, laid end to end in rows that fill one page each (migration 0013).

One row per frame (`blob_frames` until 0013) left parts of most leaf pages unused: SQLite puts a row that does not fit
in the last page on a new page, and frames of 1 to 4 KB rarely fit what is left (on the benchmark's medium trace, 2.0
MB of 17.7 MB). Here each frame is appended to the last row of `frame_chunks`, and rows past it, each holding
`CHUNK_BYTES`, the most a row keeps inside one 4 KiB page; `frame_slots` says, per blob, which chunks hold its frame
and where in the first it starts, and (since migration 0017) for a learned frame which blob it needs and how
(`needs_id`, `is_delta`: what a row of `blob_dependencies` said before). The view `blob_frames` puts each frame back
together, and the view `blob_dependencies` lists the slots that need another blob, so every question that read the
tables reads the views unchanged.

Every change happens inside the caller's write transaction, so a frame and its slot commit together with the blob's
row, or not at all. A frame that is no longer needed leaves its bytes in its chunks until `compact` (run by gc) moves
the frames of chunks mostly unused to the end and deletes the chunks no frame touches any more.

PostgreSQL keeps `blob_frames` a table (its heap pages take rows wherever there is room, and large values go to TOAST
in chunks of its own): this module is SQLite's alone.
"""

import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass

# The most bytes a row of one BLOB column keeps inside a 4 KiB page of a table (more spills to an overflow page):
# `benchmarks.index_levers.chunk_bytes(4096)`, checked by the tests. Fixed: a chunk's length says nothing else.
CHUNK_BYTES = 4057
# A chunk whose frames use less than this share of it is emptied by `compact` (its frames moved to the end): so after a
# gc at most a quarter of each chunk is unused, besides the last chunk and the first of a frame reaching into it.
COMPACT_BELOW = 0.75

# The last chunk's length in bytes, whatever its type: a frame a person writes through the view `blob_frames` as text
# is a chunk of text, whose `length` counts characters, and appending at that count would put the next frame's slot
# before where its bytes are.
_TAIL_SQL = "SELECT id, length(CAST(data AS BLOB)) FROM frame_chunks ORDER BY id DESC LIMIT 1"
_SLOTS_SQL = "SELECT blob_id, chunk, start, length, last_chunk FROM frame_slots"
# A slot written anew says what its frame needs too (migration 0017): a frame replaced by a plain one needs nothing.
_SLOT_SQL = (
    "INSERT INTO frame_slots (blob_id, size, chunk, start, length, last_chunk, needs_id, is_delta) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (blob_id) DO UPDATE SET size = excluded.size, chunk = excluded.chunk, start = excluded.start, "
    "length = excluded.length, last_chunk = excluded.last_chunk, needs_id = excluded.needs_id, "
    "is_delta = excluded.is_delta"
)
# The same, written only if the blob the frame needs is still the one the writer knew by that id, kept in the index:
# the check a learned write makes of a needed blob it knows the id of, in the statement that records the need.
_CHECKED_SLOT_SQL = (
    "INSERT INTO frame_slots (blob_id, size, chunk, start, length, last_chunk, needs_id, is_delta) "
    "SELECT ?, ?, ?, ?, ?, ?, ?, ? WHERE EXISTS "
    "(SELECT 1 FROM blobs WHERE id = ? AND digest = ? AND stored_in = 'index') "
    "ON CONFLICT (blob_id) DO UPDATE SET size = excluded.size, chunk = excluded.chunk, start = excluded.start, "
    "length = excluded.length, last_chunk = excluded.last_chunk, needs_id = excluded.needs_id, "
    "is_delta = excluded.is_delta"
)
# A frame moved by `compact` is the same frame: only where it is changes, never what it needs.
_MOVE_SQL = "UPDATE frame_slots SET chunk = ?, start = ?, length = ?, last_chunk = ? WHERE blob_id = ?"


@dataclass(frozen=True, slots=True)
class Compaction:
    """
    What one `compact` did: frames moved to the end, chunks deleted, and whether to call it again (`more`: it moved
    frames, so chunks they left may have become sparse, or frames were left for the next call by `max_bytes`).
    """

    moved: int
    deleted_chunks: int
    more: bool


def append(
    connection: sqlite3.Connection,
    *,
    blob_id: int,
    size: int,
    frame: bytes,
    needs_id: int | None = None,
    is_delta: bool = False,
    needs_digest: str | None = None,
) -> bool:
    """
    Append `frame` to the chunks and record (or replace) `blob_id`'s slot, inside the caller's write transaction.

    :param size: The content bytes (as `blobs.size`), kept in the slot for reads.
    :param needs_id: For a learned frame, `blobs.id` of the blob it needs to decode (migration 0017); None for a
        plain frame, which replaces whatever the slot said before.
    :param is_delta: With `needs_id`: the frame is a delta against that blob (else compressed with it, a dictionary).
    :param needs_digest: With `needs_id`, not yet checked: the digest the blob `needs_id` must have, with its frame in
        the index; the slot is recorded only if it does.
    :returns: Whether the slot was recorded: False only if `needs_digest` was given and the check failed (the caller
        then rolls the transaction back, which takes the appended bytes with it).
    """
    first, start, last = _place(connection, frame)
    delta = None if needs_id is None else int(is_delta)
    slot = (blob_id, size, first, start, len(frame), last, needs_id, delta)
    if needs_digest is None:
        connection.execute(_SLOT_SQL, slot)
        return True
    return connection.execute(_CHECKED_SLOT_SQL, (*slot, needs_id, needs_digest)).rowcount == 1


def _place(connection: sqlite3.Connection, frame: bytes) -> tuple[int, int, int]:
    """
    Write `frame`'s bytes after the last chunk's.

    :returns: Its first chunk, where in that chunk it starts, and its last chunk.
    """
    row = connection.execute(_TAIL_SQL).fetchone()
    if not frame:
        # An empty frame (never made by the codec; a person may write one through the view) is a slot of no bytes at
        # the end of the last chunk. In a chunk of its own, `compact` would move it to a new last chunk every time,
        # and two such frames would keep each other moving as long as gc lets it.
        if row is None:
            connection.execute("INSERT INTO frame_chunks (id, data) VALUES (1, x'')")
        tail, used = (1, 0) if row is None else (int(row[0]), int(row[1]))
        return tail, used, tail
    tail, used = (0, CHUNK_BYTES) if row is None else (int(row[0]), int(row[1]))
    room = max(CHUNK_BYTES - used, 0)
    if room:
        first, start = tail, used
        connection.execute("UPDATE frame_chunks SET data = CAST(data || ? AS BLOB) WHERE id = ?", (frame[:room], tail))
        rest = frame[room:]
    else:
        first, start = tail + 1, 0
        rest = frame
    last = first if not rest else tail
    for offset in range(0, len(rest), CHUNK_BYTES):
        last += 1
        connection.execute(
            "INSERT INTO frame_chunks (id, data) VALUES (?, ?)", (last, rest[offset : offset + CHUNK_BYTES])
        )
    return first, start, last


def release(connection: sqlite3.Connection, blob_id: int) -> None:
    """Forget `blob_id`'s slot; its bytes stay in their chunks until `compact`."""
    connection.execute("DELETE FROM frame_slots WHERE blob_id = ?", (blob_id,))


def compact(connection: sqlite3.Connection, *, max_bytes: int) -> Compaction:
    """
    Delete the chunks no frame touches, and move the frames of chunks whose frames use less than `COMPACT_BELOW` of
    them, or that are longer than `CHUNK_BYTES`, to the end (about `max_bytes` of frames at most), inside the
    caller's write transaction.

    A frame is moved by appending it anew and pointing its slot there, in the same transaction: a crash before the
    commit leaves it where it was, after it where it is now. Only where the frame is changes: its size and what it
    needs (its dependency, kept in the slot since migration 0017) stay. The last chunk (where frames are appended) is
    never emptied nor deleted here, so a move never writes into a chunk it is deleting; nor is a frame that reaches
    into it moved.
    """
    used = _used_bytes(connection.execute(_SLOTS_SQL))
    tail_row = connection.execute(_TAIL_SQL).fetchone()
    if tail_row is None:
        return Compaction(moved=0, deleted_chunks=0, more=False)
    tail = int(tail_row[0])
    lengths = dict(connection.execute("SELECT id, length(data) FROM frame_chunks WHERE id < ?", (tail,)).fetchall())
    unused = [chunk for chunk in lengths if chunk not in used]
    # Sparse chunks, and those longer than a chunk (migration 0013 made one per frame it found; a frame written through
    # the view `blob_frames` gets one too): their rows spill to overflow pages and leave leaf pages part unused.
    sparse = {
        chunk
        for chunk, length in lengths.items()
        if chunk in used and (used[chunk] < COMPACT_BELOW * CHUNK_BYTES or length > CHUNK_BYTES)
    }
    # The frames to move, in the order they are kept, up to `max_bytes` (the slots are read as a stream, so what is
    # held in memory is that much, and a count per chunk). A frame that reaches into the last chunk stays: moved, it
    # would land where it is, and leave the same gap again.
    moving: list[tuple[int, int, int, int, int]] = []
    planned = 0
    if sparse:
        for slot in connection.execute(f"{_SLOTS_SQL} ORDER BY chunk, start"):
            if planned >= max_bytes and moving:
                break
            if slot[4] < tail and any(number in sparse for number in range(slot[1], slot[4] + 1)):
                moving.append(slot)
                planned += slot[3]
    moved = 0
    left: set[int] = set()
    for blob_id, chunk, _, _, last in moving:
        move(connection, blob_id)
        left.update(range(chunk, last + 1))
        moved += 1
    if moved:
        # The chunks the moved frames left that no frame still there touches (the slots as they are now).
        still = _used_bytes(connection.execute(_SLOTS_SQL))
        unused.extend(chunk for chunk in left if chunk < tail and chunk not in still)
    for chunk in unused:
        connection.execute("DELETE FROM frame_chunks WHERE id = ?", (chunk,))
    return Compaction(moved=moved, deleted_chunks=len(unused), more=moved > 0)


def move(connection: sqlite3.Connection, blob_id: int) -> None:
    """
    Move `blob_id`'s frame to the end of the chunks, inside the caller's write transaction: its slot then says where
    the frame is now, and still what it needs (its size, `needs_id` and `is_delta` are left as they are).
    """
    (frame,) = connection.execute("SELECT frame FROM blob_frames WHERE blob_id = ?", (blob_id,)).fetchone()
    frame = bytes(frame)
    first, start, last = _place(connection, frame)
    connection.execute(_MOVE_SQL, (first, start, len(frame), last, blob_id))


def _used_bytes(slots: Iterable[tuple[int, int, int, int, int]]) -> dict[int, int]:
    """:returns: For each chunk some slot touches, how many of its bytes the slots use."""
    used: dict[int, int] = {}
    for _, chunk, start, length, last in slots:
        for number in range(chunk, last + 1):
            begins = start if number == chunk else 0
            # Chunks after a frame's first are full ones (`append`), so its end in the last is counted from there.
            ends = start + length - (last - chunk) * CHUNK_BYTES if number == last else CHUNK_BYTES
            used[number] = used.get(number, 0) + max(ends - begins, 0)
    return used
