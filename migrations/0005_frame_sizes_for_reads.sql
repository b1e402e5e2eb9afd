-- Each frame kept in the index carries its content size, so that `readable_blobs` finds what a read needs in
-- `visible_references`, the digest index of `blobs` and `blob_frames`: SQLite then never visits the `blobs` row
-- itself for such a blob (it defers that seek until a column only the row has is needed).
ALTER TABLE blob_frames ADD COLUMN size INTEGER;             -- content bytes, as blobs.size

UPDATE blob_frames SET size = (SELECT blobs.size FROM blobs WHERE blobs.id = blob_frames.blob_id);

DROP VIEW readable_blobs;

-- What `read` asks in one statement: a reference visible in a namespace, with its blob's size, where the blob is kept,
-- and its frame if it is kept in the index. A visible reference whose blob row is gone still appears, with NULL blob
-- columns, so a damaged index reads as such.
CREATE VIEW readable_blobs AS
SELECT
    v.namespace,
    v.reference,
    v.digest,
    coalesce(f.size, b.size) AS size,
    CASE WHEN f.frame IS NOT NULL THEN 'index' ELSE b.stored_in END AS stored_in,
    f.frame
FROM visible_references v
LEFT JOIN blobs b ON b.digest = v.digest
LEFT JOIN blob_frames f ON f.blob_id = b.id;
