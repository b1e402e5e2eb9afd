-- A leaner history (docs/index.md). A write row used to carry its namespace, digest, kind, size and reference as text
-- (about 230 bytes), and `visible_references` repeated the digest and the reference. Now each is stored once:
--
-- - `namespaces`: one row per namespace ever written in (kept when its writes are forgotten: a few bytes each);
-- - `namespace_references`: one row per distinct (namespace, reference) written and not forgotten, holding the digest,
--   whether the content was written as binary, the reference's extension and the content's size: the reference itself
--   is `blake3/[bin/]` + the digest's first two characters + `/` + the other 62 + the extension, so it is derived;
--   a reference is visible in a namespace exactly while this row is there (gc deletes it with the last write of it);
-- - `write_log`: one row per call to `write`: which namespace reference, the key, and when (milliseconds since
--   1970-01-01 UTC, an integer).
--
-- `writes` and `visible_references` become views with the columns they had, so every query that read them reads them
-- unchanged (a view cannot be written: casstore's index layer writes the tables above). Their row ids are kept.

CREATE TABLE namespaces (
    id INTEGER PRIMARY KEY,
    namespace TEXT NOT NULL UNIQUE
);

CREATE TABLE namespace_references (
    id INTEGER PRIMARY KEY,
    namespace_id INTEGER NOT NULL,                           -- namespaces.id
    digest TEXT NOT NULL,                                    -- blobs.digest (kept here so a damaged index still says)
    is_binary INTEGER NOT NULL CHECK (is_binary IN (0, 1)),  -- written as bytes: `kind` 'binary', a `bin/` reference
    extension TEXT NOT NULL,                                 -- the reference's extension, such as '.txt', or ''
    size INTEGER NOT NULL                                    -- content bytes (blobs.size)
);

-- What a read and a write look up (digest first, as gc's "does anything still reference this blob?" asks too).
CREATE UNIQUE INDEX namespace_references_by_digest
    ON namespace_references (digest, namespace_id, is_binary, extension);

CREATE TABLE write_log (
    id INTEGER PRIMARY KEY,
    reference_id INTEGER NOT NULL,                           -- namespace_references.id
    key TEXT NOT NULL,                                       -- the key the caller passed, only recorded
    written_at INTEGER NOT NULL                              -- milliseconds since 1970-01-01 00:00:00 UTC
);

-- The old rows, moved. Namespaces in name order; each reference's extension and kind read from the reference itself
-- (`blake3/` is 7 characters, `bin/` 4, the digest with its `/` 65), its size from its writes (or its blob).
INSERT INTO namespaces (namespace)
SELECT namespace FROM writes UNION SELECT namespace FROM visible_references ORDER BY 1;

INSERT INTO namespace_references (namespace_id, digest, is_binary, extension, size)
SELECT n.id, v.digest, v.is_binary, substr(v.reference, CASE v.is_binary WHEN 1 THEN 77 ELSE 73 END), v.size
FROM (
    SELECT namespace, digest, reference, reference LIKE 'blake3/bin/%' AS is_binary, max(size) AS size
    FROM (
        SELECT namespace, digest, reference, size FROM writes
        UNION ALL
        SELECT v.namespace, v.digest, v.reference, coalesce(b.size, 0)
        FROM visible_references v LEFT JOIN blobs b ON b.digest = v.digest
    )
    GROUP BY namespace, digest, reference
) AS v
JOIN namespaces n ON n.namespace = v.namespace
ORDER BY v.digest, n.id;

INSERT INTO write_log (id, reference_id, key, written_at)
SELECT w.id, r.id, w.key, CAST(round((julianday(w.written_at) - 2440587.5) * 86400000) AS INTEGER)
FROM writes w
JOIN namespaces n ON n.namespace = w.namespace
JOIN namespace_references r
    ON r.digest = w.digest AND r.namespace_id = n.id AND r.is_binary = (w.reference LIKE 'blake3/bin/%')
    AND r.extension = substr(w.reference, CASE WHEN w.reference LIKE 'blake3/bin/%' THEN 77 ELSE 73 END)
ORDER BY w.id;

-- The views that read the old tables go first, then the tables; the views come back, over the new ones.
DROP VIEW dedup_summary;
DROP VIEW namespace_summary;
DROP VIEW repeated_results;
DROP VIEW readable_blobs;
DROP TABLE writes;
DROP TABLE visible_references;

-- One row per call to `write`, as the table of this name held them.
CREATE VIEW writes AS
SELECT
    w.id,
    n.namespace,
    w.key,
    r.digest,
    CASE r.is_binary WHEN 1 THEN 'binary' ELSE 'text' END AS kind,
    r.size,
    'blake3/' || CASE r.is_binary WHEN 1 THEN 'bin/' ELSE '' END || substr(r.digest, 1, 2) || '/'
        || substr(r.digest, 3) || r.extension AS reference,
    strftime('%Y-%m-%d %H:%M:%S', w.written_at / 1000, 'unixepoch') || printf('.%03d', w.written_at % 1000)
        AS written_at
FROM write_log w
JOIN namespace_references r ON r.id = w.reference_id
JOIN namespaces n ON n.id = r.namespace_id;

-- One row per reference a namespace may read, as the table of this name held them.
CREATE VIEW visible_references AS
SELECT
    r.digest,
    n.namespace,
    'blake3/' || CASE r.is_binary WHEN 1 THEN 'bin/' ELSE '' END || substr(r.digest, 1, 2) || '/'
        || substr(r.digest, 3) || r.extension AS reference
FROM namespace_references r
JOIN namespaces n ON n.id = r.namespace_id;

-- As in 0003, with the same columns, over the stored tables rather than the view `writes`: a sum or a count needs no
-- reference made, and a first or last time is formatted once per group rather than once per write.
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
        count(DISTINCT r.digest) AS distinct_results,
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
        r.digest,
        count(*) AS times_written,
        count(DISTINCT r.namespace_id) AS namespaces,
        max(r.size) AS size,
        (count(*) - 1) * max(r.size) AS bytes_deduplicated,
        min(l.written_at) AS first_ms,
        max(l.written_at) AS last_ms,
        min(l.key) AS example_key
    FROM write_log l
    JOIN namespace_references r ON r.id = l.reference_id
    GROUP BY r.digest
    HAVING count(*) > 1
);

-- As in 0008, over the new tables: one statement for a read, a visible reference whose blob row is gone still appears
-- (with NULL blob columns). Flat joins, so SQLite looks up the namespace, then the reference by its digest. A read asks
-- by `is_binary` and `extension` (which with the digest make the reference) rather than by `reference`: making the
-- reference's text to compare would cost a read a fifth more instructions (measured with callgrind).
CREATE VIEW readable_blobs AS
SELECT
    n.namespace,
    'blake3/' || CASE r.is_binary WHEN 1 THEN 'bin/' ELSE '' END || substr(r.digest, 1, 2) || '/'
        || substr(r.digest, 3) || r.extension AS reference,
    r.digest,
    r.is_binary,
    r.extension,
    coalesce(f.size, b.size) AS size,
    CASE WHEN f.frame IS NOT NULL THEN 'index' ELSE b.stored_in END AS stored_in,
    f.frame,
    d.encoding,
    nb.digest AS needs
FROM namespace_references r
JOIN namespaces n ON n.id = r.namespace_id
LEFT JOIN blobs b ON b.digest = r.digest
LEFT JOIN blob_frames f ON f.blob_id = b.id
LEFT JOIN blob_dependencies d ON d.blob_id = b.id
LEFT JOIN blobs nb ON nb.id = d.needs_id;

-- A person (or a test) may still move a write in time by hand, as when `writes` was a table:
-- `UPDATE writes SET written_at = '2020-01-01 00:00:00.000' WHERE ...` sets the `write_log` row's milliseconds. No
-- other column of the view can be changed (it says which reference was written, which only casstore records).
CREATE TRIGGER writes_set_written_at INSTEAD OF UPDATE ON writes
BEGIN
    SELECT RAISE(ABORT, 'only written_at of the view writes can be changed; casstore records which reference was written')
    WHERE (NEW.id, NEW.namespace, NEW.key, NEW.digest, NEW.kind, NEW.size, NEW.reference)
        IS NOT (OLD.id, OLD.namespace, OLD.key, OLD.digest, OLD.kind, OLD.size, OLD.reference);
    UPDATE write_log SET written_at = CAST(round((julianday(NEW.written_at) - 2440587.5) * 86400000) AS INTEGER)
    WHERE id = OLD.id;
END;

-- A person's query that joins by a reference's text (`JOIN writes w ON w.reference = part.value`, as docs/index.md's
-- question of every offloaded part does) finds it through this index of the text the views make; without it, SQLite
-- scans a namespace's references for each one (quadratic in the history). It costs about 88 bytes a reference.
CREATE INDEX namespace_references_by_text ON namespace_references (
    ('blake3/' || CASE is_binary WHEN 1 THEN 'bin/' ELSE '' END || substr(digest, 1, 2) || '/' || substr(digest, 3)
        || extension),
    namespace_id
);
