-- Each frame kept in the index carries its content size, as in the SQLite index.
ALTER TABLE blob_frames ADD COLUMN size BIGINT;

UPDATE blob_frames SET size = (SELECT blobs.size FROM blobs WHERE blobs.id = blob_frames.blob_id);

DROP VIEW readable_blobs;

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
