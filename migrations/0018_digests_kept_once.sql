-- A reference's digest kept once, in its blob's row (docs/index.md). Since migration 0016 every reference names its
-- content by `blob_id`; it also kept the 64-character digest, which its blob's row holds already, and an index of the
-- reference's text made from it (`namespace_references_by_text`). Together about 150 bytes a reference, a twelfth of
-- the medium trace's store (docs/compression.md, "Digests kept once").
--
-- - `namespace_references.digest` is NULL while the reference has its blob row (`blob_id` is set): the views take the
--   digest from `blobs`. It holds the digest only while the blob row is missing (a damaged index, which `verify`
--   reports), so that such a reference still says which content it names: the trigger that leaves a reference
--   without its blob when a blob row is deleted writes the digest into the reference, and the one that attaches the
--   references waiting for a blob row made again takes it out.
-- - `namespace_references_by_text` goes. It served one question of the docs, every part of every offloaded result,
--   which joined `writes` by the reference's text. The new view `offloaded_parts` answers it by the digest a
--   reference names, read out of its text, through the index of `blobs`: in one pass, with no index of the text. The
--   old question still runs, and answers the same; each of its parts now looks through the namespace's references.
--
-- The table is rebuilt with its rows and ids as they were (a column's NOT NULL cannot be dropped in place), after the
-- views and triggers that name it, which come back over it with the same columns.
DROP VIEW writes;
DROP VIEW visible_references;
DROP VIEW dedup_summary;
DROP VIEW namespace_summary;
DROP VIEW repeated_results;
DROP VIEW readable_blobs;
DROP TRIGGER blobs_attach_references;
DROP TRIGGER blobs_detach_references;
DROP TRIGGER blobs_follow_references;

CREATE TABLE namespace_references_0018 (
    id INTEGER PRIMARY KEY,
    namespace_id INTEGER NOT NULL,                           -- namespaces.id
    digest TEXT,                                             -- NULL while blob_id is set; else the missing blob's
    is_binary INTEGER NOT NULL CHECK (is_binary IN (0, 1)),  -- written as bytes: `kind` 'binary', a `bin/` reference
    extension TEXT NOT NULL,                                 -- the reference's extension, such as '.txt', or ''
    size INTEGER NOT NULL,                                   -- content bytes (blobs.size)
    blob_id INTEGER,                                         -- blobs.id of its content; NULL: its blob row is missing
    CHECK ((blob_id IS NULL) = (digest IS NOT NULL))
);

-- Every row, with its id: the digest only where the blob row is missing.
INSERT INTO namespace_references_0018 (id, namespace_id, digest, is_binary, extension, size, blob_id)
SELECT id, namespace_id, CASE WHEN blob_id IS NULL THEN digest END, is_binary, extension, size, blob_id
FROM namespace_references ORDER BY id;

-- The new table takes the old one's name (the views and triggers that name it were dropped above).
DROP TABLE namespace_references;

ALTER TABLE namespace_references_0018 RENAME TO namespace_references;

-- What a read, a write and gc's "does anything still reference this blob?" look up (0016). Its NULL entries are the
-- references whose blob row is missing, found by `blob_id IS NULL AND digest = ?`.
CREATE UNIQUE INDEX namespace_references_by_blob
    ON namespace_references (blob_id, namespace_id, is_binary, extension);

-- A blob row made (again) takes the references that wait for it, which no longer need their own copy of its digest;
-- one deleted leaves its references without an id, each keeping the digest it named; one whose id or digest a person
-- changes is followed.
CREATE TRIGGER blobs_attach_references AFTER INSERT ON blobs
BEGIN
    UPDATE namespace_references SET blob_id = NEW.id, digest = NULL WHERE blob_id IS NULL AND digest = NEW.digest;
END;

CREATE TRIGGER blobs_detach_references AFTER DELETE ON blobs
BEGIN
    UPDATE namespace_references SET blob_id = NULL, digest = OLD.digest WHERE blob_id = OLD.id;
END;

CREATE TRIGGER blobs_follow_references AFTER UPDATE OF id, digest ON blobs
BEGIN
    UPDATE namespace_references SET blob_id = NULL, digest = OLD.digest WHERE blob_id = OLD.id;
    UPDATE namespace_references SET blob_id = NEW.id, digest = NULL WHERE blob_id IS NULL AND digest = NEW.digest;
END;

-- The views as they were (0011, 0016, 0017), with the same columns: a reference's digest is its blob's, or its own
-- while the blob row is missing. Flat joins by the blob's id (its row id), so SQLite looks each up by key.
CREATE VIEW writes AS
SELECT
    w.id,
    n.namespace,
    w.key,
    coalesce(r.digest, b.digest) AS digest,
    CASE r.is_binary WHEN 1 THEN 'binary' ELSE 'text' END AS kind,
    r.size,
    'blake3/' || CASE r.is_binary WHEN 1 THEN 'bin/' ELSE '' END || substr(coalesce(r.digest, b.digest), 1, 2) || '/'
        || substr(coalesce(r.digest, b.digest), 3) || r.extension AS reference,
    strftime('%Y-%m-%d %H:%M:%S', w.written_at / 1000, 'unixepoch') || printf('.%03d', w.written_at % 1000)
        AS written_at
FROM write_log w
JOIN namespace_references r ON r.id = w.reference_id
JOIN namespaces n ON n.id = r.namespace_id
LEFT JOIN blobs b ON b.id = r.blob_id;

CREATE VIEW visible_references AS
SELECT
    coalesce(r.digest, b.digest) AS digest,
    n.namespace,
    'blake3/' || CASE r.is_binary WHEN 1 THEN 'bin/' ELSE '' END || substr(coalesce(r.digest, b.digest), 1, 2) || '/'
        || substr(coalesce(r.digest, b.digest), 3) || r.extension AS reference
FROM namespace_references r
JOIN namespaces n ON n.id = r.namespace_id
LEFT JOIN blobs b ON b.id = r.blob_id;

CREATE VIEW dedup_summary AS
WITH
    w AS (
        SELECT count(*) AS writes, coalesce(sum(r.size), 0) AS logical_bytes
        FROM write_log l JOIN namespace_references r ON r.id = l.reference_id
    ),
    b AS (
        SELECT count(*) AS blobs, coalesce(sum(size), 0) AS unique_bytes, coalesce(sum(stored_size), 0) AS stored_bytes
        FROM blobs
    )
SELECT
    w.writes,
    b.blobs,
    w.logical_bytes,
    b.unique_bytes,
    b.stored_bytes,
    round(1.0 * w.logical_bytes / nullif(b.unique_bytes, 0), 2) AS dedup_ratio,
    round(1.0 * b.unique_bytes / nullif(b.stored_bytes, 0), 2) AS compression_ratio,
    round(1.0 * w.logical_bytes / nullif(b.stored_bytes, 0), 2) AS total_ratio,
    w.logical_bytes - b.stored_bytes AS bytes_saved
FROM w, b;

-- Distinct results counted by content: a reference with its blob row by the blob's id, one without by its digest (a
-- digest is never both: a blob row made takes every reference that waits for its digest).
CREATE VIEW namespace_summary AS
SELECT
    namespace,
    writes,
    distinct_results,
    logical_bytes,
    strftime('%Y-%m-%d %H:%M:%S', first_ms / 1000, 'unixepoch') || printf('.%03d', first_ms % 1000) AS first_write,
    strftime('%Y-%m-%d %H:%M:%S', last_ms / 1000, 'unixepoch') || printf('.%03d', last_ms % 1000) AS last_write
FROM (
    SELECT
        n.namespace,
        count(*) AS writes,
        count(DISTINCT coalesce(r.blob_id, r.digest)) AS distinct_results,
        sum(r.size) AS logical_bytes,
        min(l.written_at) AS first_ms,
        max(l.written_at) AS last_ms
    FROM write_log l
    JOIN namespace_references r ON r.id = l.reference_id
    JOIN namespaces n ON n.id = r.namespace_id
    GROUP BY n.namespace
);

CREATE VIEW repeated_results AS
SELECT
    digest,
    times_written,
    namespaces,
    size,
    bytes_deduplicated,
    strftime('%Y-%m-%d %H:%M:%S', first_ms / 1000, 'unixepoch') || printf('.%03d', first_ms % 1000) AS first_written,
    strftime('%Y-%m-%d %H:%M:%S', last_ms / 1000, 'unixepoch') || printf('.%03d', last_ms % 1000) AS last_written,
    example_key
FROM (
    SELECT
        coalesce(r.digest, b.digest) AS digest,
        count(*) AS times_written,
        count(DISTINCT r.namespace_id) AS namespaces,
        max(r.size) AS size,
        (count(*) - 1) * max(r.size) AS bytes_deduplicated,
        min(l.written_at) AS first_ms,
        max(l.written_at) AS last_ms,
        min(l.key) AS example_key
    FROM write_log l
    JOIN namespace_references r ON r.id = l.reference_id
    LEFT JOIN blobs b ON b.id = r.blob_id
    GROUP BY coalesce(r.digest, b.digest)
    HAVING count(*) > 1
);

CREATE VIEW readable_blobs AS
SELECT
    n.namespace,
    'blake3/' || CASE r.is_binary WHEN 1 THEN 'bin/' ELSE '' END || substr(coalesce(r.digest, b.digest), 1, 2) || '/'
        || substr(coalesce(r.digest, b.digest), 3) || r.extension AS reference,
    coalesce(r.digest, b.digest) AS digest,
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

-- As in 0011: only `written_at` of the view `writes` can be changed, by hand.
CREATE TRIGGER writes_set_written_at INSTEAD OF UPDATE ON writes
BEGIN
    SELECT RAISE(ABORT, 'only written_at of the view writes can be changed; casstore records which reference was written')
    WHERE (NEW.id, NEW.namespace, NEW.key, NEW.digest, NEW.kind, NEW.size, NEW.reference)
        IS NOT (OLD.id, OLD.namespace, OLD.key, OLD.digest, OLD.kind, OLD.size, OLD.reference);
    UPDATE write_log SET written_at = CAST(round((julianday(NEW.written_at) - 2440587.5) * 86400000) AS INTEGER)
    WHERE id = OLD.id;
END;

-- One row per part of each offloaded result (`offloads.refs`), with the blob its reference names: found by the digest,
-- which a reference carries after `blake3/` (and `bin/` for bytes) as two hex characters, `/`, and the other 62.
-- The blob's columns are NULL once gc has deleted it.
CREATE VIEW offloaded_parts AS
SELECT
    o.id AS offload_id,
    o.compaction_id,
    o.namespace,
    o.tool_name,
    o.tool_call_id,
    CAST(part.key AS INTEGER) AS part,
    part.value AS reference,
    b.digest,
    b.size,
    b.stored_size,
    b.stored_in,
    o.offloaded_at
FROM offloads o
JOIN json_each(o.refs) part
LEFT JOIN blobs b ON b.digest = replace(
    substr(part.value, CASE WHEN substr(part.value, 1, 11) = 'blake3/bin/' THEN 12 ELSE 8 END, 65), '/', ''
);
