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

-- `readable_blobs` (0005) keeps its flat three-table join, which follows the same rule: a view built on this one
-- would be the right side of a LEFT JOIN that SQLite cannot flatten, and a read through it would scan every blob.
