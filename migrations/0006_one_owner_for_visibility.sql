-- `visible_references` gets one owner: casstore's index layer inserts a write's visibility row in the same
-- transaction as the write, and deletes the rows no write is left for when gc forgets writes. Until now a trigger did
-- the first half and Python the second.
DROP TRIGGER writes_make_references_visible;

-- Where each blob is kept and what a read of it needs, with the one rule for a damaged index written once: a frame in
-- `blob_frames` is what is read, whatever the `blobs` row says. `stored_in` is 'index' for a blob whose frame is in
-- `blob_frames`, 'file' for one in `blobs/`.
CREATE VIEW blob_locations AS
SELECT
    b.digest,
    coalesce(f.size, b.size) AS size,
    CASE WHEN f.frame IS NOT NULL THEN 'index' ELSE b.stored_in END AS stored_in,
    f.frame
FROM blobs b
LEFT JOIN blob_frames f ON f.blob_id = b.id;

DROP VIEW readable_blobs;

-- A reference a namespace may read, with its blob's location. A visible reference whose blob row is gone still
-- appears, with NULL blob columns, so a damaged index reads as such.
CREATE VIEW readable_blobs AS
SELECT
    v.namespace,
    v.reference,
    v.digest,
    l.size,
    l.stored_in,
    l.frame
FROM visible_references v
LEFT JOIN blob_locations l ON l.digest = v.digest;
