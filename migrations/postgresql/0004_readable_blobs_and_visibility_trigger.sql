-- What a read asks: a reference visible in a namespace, with its blob's row and frame. The SQLite index had a
-- trigger here that made writes visible; a PostgreSQL index never had one: casstore's index layer keeps
-- `visible_references` itself (the SQLite index dropped its trigger in 0006).
CREATE VIEW readable_blobs AS
SELECT
    v.namespace,
    v.reference,
    v.digest,
    b.size,
    b.stored_in,
    f.frame
FROM visible_references v
LEFT JOIN blobs b ON b.digest = v.digest
LEFT JOIN blob_frames f ON f.blob_id = b.id;
