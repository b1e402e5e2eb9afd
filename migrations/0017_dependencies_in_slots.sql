-- A learned frame's dependency kept in its `frame_slots` row (0013), where the table `blob_dependencies` (0008) kept
-- it in a row of its own. Every learned frame (`dictionary` or `delta`) is kept inside the index, never in a file, so
-- every blob with a dependency has a slot: a learned write now writes one row, not two, and its commit writes the
-- slots' pages and their small index of what is needed, not also a table and its index. `blob_dependencies` becomes
-- a view of the slots with its columns as they were, and writes to it go through to them. A dependency row whose blob
-- has no slot (a damaged index, or one edited by hand) has nowhere to go: casstore refuses the upgrade naming those
-- rows before anything changes (`casstore/dependencies_upgrade.py`), so none is lost silently.
ALTER TABLE frame_slots ADD COLUMN needs_id INTEGER;             -- blobs.id of the blob the frame needs; NULL: plain

-- With a needs_id, 1 for a delta against it (its base), 0 for a frame compressed with it (its dictionary); NULL
-- without one. An integer, as namespace_references.is_binary: SQLite stores 0 and 1 in the row's header alone, where
-- the text 'dictionary' would take 10 bytes of each of the most common learned rows (0.07 MB on the medium trace).
ALTER TABLE frame_slots ADD COLUMN is_delta INTEGER
    CHECK ((is_delta IS NULL) = (needs_id IS NULL) AND (is_delta IS NULL OR is_delta IN (0, 1)));

UPDATE frame_slots
SET (needs_id, is_delta) = (
    SELECT d.needs_id, d.encoding = 'delta' FROM blob_dependencies d WHERE d.blob_id = frame_slots.blob_id
)
WHERE blob_id IN (SELECT blob_id FROM blob_dependencies);

DROP VIEW blob_encodings;

DROP VIEW readable_blobs;

DROP VIEW blob_locations;

DROP INDEX blob_dependencies_by_needs;

DROP TABLE blob_dependencies;

-- gc's question "does any blob still need this one?" (what a blob needs, `Repository.blob_dependencies`, is its slot's
-- row, by the primary key). Partial: the index holds an entry per learned blob and none per plain one.
CREATE INDEX frame_slots_by_needs ON frame_slots (needs_id) WHERE needs_id IS NOT NULL;

-- `blob_dependencies` as it was (0008): one row per blob whose frame does not decode alone.
CREATE VIEW blob_dependencies AS
SELECT blob_id, needs_id, CASE is_delta WHEN 1 THEN 'delta' ELSE 'dictionary' END AS encoding
FROM frame_slots WHERE needs_id IS NOT NULL;

-- A person (or a test forging a dependency) may still write `blob_dependencies`, with the table's constraints: both
-- columns required, one row per blob. A dependency belongs to a frame kept in the index, so one for a blob without a
-- slot (a file blob, or no blob at all) is refused, and so is an encoding other than the two.
CREATE TRIGGER blob_dependencies_insert INSTEAD OF INSERT ON blob_dependencies
BEGIN
    SELECT RAISE(ABORT, 'NOT NULL constraint failed: blob_dependencies.needs_id and encoding are required')
    WHERE NEW.needs_id IS NULL OR NEW.encoding IS NULL;
    SELECT RAISE(ABORT, 'CHECK constraint failed: blob_dependencies.encoding is dictionary or delta')
    WHERE NEW.encoding NOT IN ('dictionary', 'delta');
    SELECT RAISE(ABORT, 'UNIQUE constraint failed: blob_dependencies.blob_id')
    WHERE EXISTS (SELECT 1 FROM frame_slots WHERE blob_id = NEW.blob_id AND needs_id IS NOT NULL);
    SELECT RAISE(ABORT, 'blob_dependencies: the blob has no frame in the index (frame_slots), and only a frame kept in the index may need another blob')
    WHERE NOT EXISTS (SELECT 1 FROM frame_slots WHERE blob_id = NEW.blob_id);
    UPDATE frame_slots SET needs_id = NEW.needs_id, is_delta = NEW.encoding = 'delta' WHERE blob_id = NEW.blob_id;
END;

CREATE TRIGGER blob_dependencies_update INSTEAD OF UPDATE ON blob_dependencies
BEGIN
    SELECT RAISE(ABORT, 'NOT NULL constraint failed: blob_dependencies.needs_id and encoding are required')
    WHERE NEW.needs_id IS NULL OR NEW.encoding IS NULL;
    SELECT RAISE(ABORT, 'CHECK constraint failed: blob_dependencies.encoding is dictionary or delta')
    WHERE NEW.encoding NOT IN ('dictionary', 'delta');
    SELECT RAISE(ABORT, 'UNIQUE constraint failed: blob_dependencies.blob_id')
    WHERE NEW.blob_id IS NOT OLD.blob_id
        AND EXISTS (SELECT 1 FROM frame_slots WHERE blob_id = NEW.blob_id AND needs_id IS NOT NULL);
    SELECT RAISE(ABORT, 'blob_dependencies: the blob has no frame in the index (frame_slots), and only a frame kept in the index may need another blob')
    WHERE NOT EXISTS (SELECT 1 FROM frame_slots WHERE blob_id = NEW.blob_id);
    UPDATE frame_slots SET needs_id = NULL, is_delta = NULL WHERE blob_id = OLD.blob_id AND NEW.blob_id IS NOT OLD.blob_id;
    UPDATE frame_slots SET needs_id = NEW.needs_id, is_delta = NEW.encoding = 'delta' WHERE blob_id = NEW.blob_id;
END;

CREATE TRIGGER blob_dependencies_delete INSTEAD OF DELETE ON blob_dependencies
BEGIN
    UPDATE frame_slots SET needs_id = NULL, is_delta = NULL WHERE blob_id = OLD.blob_id;
END;

-- `blob_frames`' triggers (0013), except that a frame written through the view keeps its slot's dependency: a slot is
-- now also what the frame needs, which a frame replaced by hand (a test forging one) does not change. Deleting a row
-- forgets the slot, and with it what its frame needed (the blob then reads as damaged: its frame is gone).
DROP TRIGGER blob_frames_insert;

DROP TRIGGER blob_frames_update;

CREATE TRIGGER blob_frames_insert INSTEAD OF INSERT ON blob_frames
BEGIN
    INSERT INTO frame_chunks (id, data) SELECT coalesce(max(id), 0) + 1, NEW.frame FROM frame_chunks;
    INSERT INTO frame_slots (blob_id, size, chunk, start, length, last_chunk)
    SELECT NEW.blob_id, NEW.size, max(id), 0, length(NEW.frame), max(id) FROM frame_chunks WHERE true
    ON CONFLICT (blob_id) DO UPDATE SET
        size = excluded.size, chunk = excluded.chunk, start = excluded.start, length = excluded.length,
        last_chunk = excluded.last_chunk;
END;

CREATE TRIGGER blob_frames_update INSTEAD OF UPDATE ON blob_frames
BEGIN
    INSERT INTO frame_chunks (id, data) SELECT coalesce(max(id), 0) + 1, NEW.frame FROM frame_chunks;
    UPDATE frame_slots SET
        blob_id = NEW.blob_id, size = NEW.size, chunk = (SELECT max(id) FROM frame_chunks), start = 0,
        length = length(NEW.frame), last_chunk = (SELECT max(id) FROM frame_chunks)
    WHERE blob_id = OLD.blob_id;
END;

-- `readable_blobs` (0016), `blob_locations` (0013) and `blob_encodings` (0008) as they were, reading a blob's frame,
-- encoding and needed blob from its one slot row: the frame as `blob_frames` puts it together (NULL without a slot,
-- or when its chunk is gone), the encoding and needed digest NULL for a plain frame.
CREATE VIEW readable_blobs AS
SELECT
    n.namespace,
    'blake3/' || CASE r.is_binary WHEN 1 THEN 'bin/' ELSE '' END || substr(r.digest, 1, 2) || '/'
        || substr(r.digest, 3) || r.extension AS reference,
    r.digest,
    r.is_binary,
    r.extension,
    coalesce(s.size, b.size) AS size,
    CASE WHEN s.blob_id IS NOT NULL THEN 'index' ELSE b.stored_in END AS stored_in,
    CASE
        WHEN s.blob_id IS NULL THEN NULL
        WHEN s.chunk = s.last_chunk
        THEN (SELECT coalesce(substr(c.data, s.start + 1, s.length), x'') FROM frame_chunks c WHERE c.id = s.chunk)
        ELSE (
            SELECT substr(CAST(group_concat(o.data, x'') AS BLOB), s.start + 1, s.length)
            FROM (SELECT c.data FROM frame_chunks c WHERE c.id BETWEEN s.chunk AND s.last_chunk ORDER BY c.id) o
        )
    END AS frame,
    CASE s.is_delta WHEN 1 THEN 'delta' WHEN 0 THEN 'dictionary' END AS encoding,
    nb.digest AS needs,
    r.blob_id
FROM namespace_references r
JOIN namespaces n ON n.id = r.namespace_id
LEFT JOIN blobs b ON b.id = r.blob_id
LEFT JOIN frame_slots s ON s.blob_id = b.id
LEFT JOIN blobs nb ON nb.id = s.needs_id;

CREATE VIEW blob_locations AS
SELECT
    b.digest,
    coalesce(s.size, b.size) AS size,
    CASE WHEN s.blob_id IS NOT NULL THEN 'index' ELSE b.stored_in END AS stored_in,
    CASE
        WHEN s.blob_id IS NULL THEN NULL
        WHEN s.chunk = s.last_chunk
        THEN (SELECT coalesce(substr(c.data, s.start + 1, s.length), x'') FROM frame_chunks c WHERE c.id = s.chunk)
        ELSE (
            SELECT substr(CAST(group_concat(o.data, x'') AS BLOB), s.start + 1, s.length)
            FROM (SELECT c.data FROM frame_chunks c WHERE c.id BETWEEN s.chunk AND s.last_chunk ORDER BY c.id) o
        )
    END AS frame,
    CASE s.is_delta WHEN 1 THEN 'delta' WHEN 0 THEN 'dictionary' END AS encoding,
    n.digest AS needs
FROM blobs b
LEFT JOIN frame_slots s ON s.blob_id = b.id
LEFT JOIN blobs n ON n.id = s.needs_id;

CREATE VIEW blob_encodings AS
SELECT
    b.digest,
    CASE s.is_delta WHEN 1 THEN 'delta' WHEN 0 THEN 'dictionary' ELSE 'plain' END AS encoding,
    n.digest AS needs,
    b.size,
    b.stored_size,
    b.stored_in
FROM blobs b
LEFT JOIN frame_slots s ON s.blob_id = b.id
LEFT JOIN blobs n ON n.id = s.needs_id;
