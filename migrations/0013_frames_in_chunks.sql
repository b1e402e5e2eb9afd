-- The frames kept in the index, laid end to end in rows that fill one page each (casstore/frame_chunks.py). One row
-- per frame left parts of most leaf pages unused (SQLite starts a new page for a row that does not fit what is left,
-- and frames of 1 to 4 KB rarely do). A chunk holds at most 4,057 bytes, the most a row keeps inside a 4 KiB page,
-- except the chunks this migration makes: one per frame that was here (gc moves their frames to full chunks later).
CREATE TABLE frame_chunks (
    id INTEGER PRIMARY KEY,
    data BLOB NOT NULL                                       -- frames, or parts of frames, end to end
);

-- Where each blob's frame is: from byte `start` of chunk `chunk` on, `length` bytes, running on through the chunks
-- after it up to `last_chunk` (every chunk between is full). gc deletes a chunk once no slot touches it.
CREATE TABLE frame_slots (
    blob_id INTEGER PRIMARY KEY,                             -- blobs.id
    size INTEGER,                                            -- content bytes, as blobs.size (0005)
    chunk INTEGER NOT NULL,                                  -- frame_chunks.id of the frame's first byte
    start INTEGER NOT NULL,                                  -- where in that chunk it starts, from 0
    length INTEGER NOT NULL,                                 -- the frame's bytes (blobs.stored_size)
    last_chunk INTEGER NOT NULL                              -- frame_chunks.id of its last byte
);

INSERT INTO frame_chunks (id, data) SELECT blob_id, frame FROM blob_frames ORDER BY blob_id;

INSERT INTO frame_slots (blob_id, size, chunk, start, length, last_chunk)
SELECT blob_id, size, blob_id, 0, length(frame), blob_id FROM blob_frames ORDER BY blob_id;

DROP TABLE blob_frames;

-- `blob_frames` as it was (0001, 0005): one row per blob kept in the index, with its frame put back together. A frame
-- in one chunk is a slice of it; one across chunks joins them in the order of their ids, asked for by the ORDER BY of
-- the subquery (group_concat's order is otherwise SQLite's choice: `PRAGMA reverse_unordered_selects` in a person's
-- session reverses the rowid range, and the view would give other bytes), and every read checks the content's BLAKE3
-- digest whatever the view returns. An empty frame in an empty chunk is x'' (substr gives NULL for an empty BLOB); a
-- frame whose chunk is gone is NULL.
CREATE VIEW blob_frames AS
SELECT
    s.blob_id,
    CASE WHEN s.chunk = s.last_chunk
        THEN (SELECT coalesce(substr(c.data, s.start + 1, s.length), x'') FROM frame_chunks c WHERE c.id = s.chunk)
        ELSE (
            SELECT substr(CAST(group_concat(o.data, x'') AS BLOB), s.start + 1, s.length)
            FROM (SELECT c.data FROM frame_chunks c WHERE c.id BETWEEN s.chunk AND s.last_chunk ORDER BY c.id) o
        )
    END AS frame,
    s.size
FROM frame_slots s;

-- A person (or a test forging a frame) may still write `blob_frames`: a frame written so goes into a chunk of its
-- own after the last; deleting a row forgets the blob's slot (gc deletes the chunks no slot touches).
CREATE TRIGGER blob_frames_insert INSTEAD OF INSERT ON blob_frames
BEGIN
    INSERT INTO frame_chunks (id, data) SELECT coalesce(max(id), 0) + 1, NEW.frame FROM frame_chunks;
    INSERT OR REPLACE INTO frame_slots (blob_id, size, chunk, start, length, last_chunk)
    SELECT NEW.blob_id, NEW.size, max(id), 0, length(NEW.frame), max(id) FROM frame_chunks;
END;

CREATE TRIGGER blob_frames_update INSTEAD OF UPDATE ON blob_frames
BEGIN
    INSERT INTO frame_chunks (id, data) SELECT coalesce(max(id), 0) + 1, NEW.frame FROM frame_chunks;
    DELETE FROM frame_slots WHERE blob_id = OLD.blob_id;
    INSERT INTO frame_slots (blob_id, size, chunk, start, length, last_chunk)
    SELECT NEW.blob_id, NEW.size, max(id), 0, length(NEW.frame), max(id) FROM frame_chunks;
END;

CREATE TRIGGER blob_frames_delete INSTEAD OF DELETE ON blob_frames
BEGIN
    DELETE FROM frame_slots WHERE blob_id = OLD.blob_id;
END;

-- `readable_blobs` (0011) and `blob_locations` (0008) as they were, except that a blob's frame is in the index when
-- its `blob_frames` row is there (which is what `f.frame IS NOT NULL` meant of the table): asking the view's frame
-- twice would put it together twice.
DROP VIEW readable_blobs;

CREATE VIEW readable_blobs AS
SELECT
    n.namespace,
    'blake3/' || CASE r.is_binary WHEN 1 THEN 'bin/' ELSE '' END || substr(r.digest, 1, 2) || '/'
        || substr(r.digest, 3) || r.extension AS reference,
    r.digest,
    r.is_binary,
    r.extension,
    coalesce(f.size, b.size) AS size,
    CASE WHEN f.blob_id IS NOT NULL THEN 'index' ELSE b.stored_in END AS stored_in,
    f.frame,
    d.encoding,
    nb.digest AS needs
FROM namespace_references r
JOIN namespaces n ON n.id = r.namespace_id
LEFT JOIN blobs b ON b.digest = r.digest
LEFT JOIN blob_frames f ON f.blob_id = b.id
LEFT JOIN blob_dependencies d ON d.blob_id = b.id
LEFT JOIN blobs nb ON nb.id = d.needs_id;

DROP VIEW blob_locations;

CREATE VIEW blob_locations AS
SELECT
    b.digest,
    coalesce(f.size, b.size) AS size,
    CASE WHEN f.blob_id IS NOT NULL THEN 'index' ELSE b.stored_in END AS stored_in,
    f.frame,
    d.encoding,
    n.digest AS needs
FROM blobs b
LEFT JOIN blob_frames f ON f.blob_id = b.id
LEFT JOIN blob_dependencies d ON d.blob_id = b.id
LEFT JOIN blobs n ON n.id = d.needs_id;
