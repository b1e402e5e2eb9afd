-- A namespace's references found by their blob's id rather than by its digest (docs/index.md). The unique index
-- `namespace_references_by_digest` (0011) led with the 64-character digest: about 86 bytes a reference, in random
-- order. Each reference now also holds `blob_id`, the `blobs.id` of its content, and the unique index leads with that
-- integer instead: about a fifth of the bytes, appended in the order blobs are made. Every look-up by digest asks
-- `blobs` for the id first (its own unique index of digests, which a write and a read consulted anyway).
--
-- `digest` stays: it says which content a reference names when its blob row is missing (a damaged index, which
-- `verify` reports). Such a reference has no blob id (NULL), and is found by `blob_id IS NULL AND digest = ?`, which
-- the same index answers (its NULL entries are the damaged references only). Three triggers keep the rule that
-- `blob_id` is the id of the blob row whose digest the reference holds, or NULL when there is none: a blob row made
-- (again) takes the references that wait for it, one deleted leaves its references without an id (gc deletes only a
-- blob no reference names; a person may delete any), and one whose id or digest a person changes is followed.
ALTER TABLE namespace_references ADD COLUMN blob_id INTEGER;  -- blobs.id of its content; NULL: its blob row is missing

UPDATE namespace_references SET blob_id = (SELECT b.id FROM blobs b WHERE b.digest = namespace_references.digest);

DROP INDEX namespace_references_by_digest;

-- What a read, a write and gc's "does anything still reference this blob?" look up.
CREATE UNIQUE INDEX namespace_references_by_blob
    ON namespace_references (blob_id, namespace_id, is_binary, extension);

CREATE TRIGGER blobs_attach_references AFTER INSERT ON blobs
BEGIN
    UPDATE namespace_references SET blob_id = NEW.id WHERE blob_id IS NULL AND digest = NEW.digest;
END;

CREATE TRIGGER blobs_detach_references AFTER DELETE ON blobs
BEGIN
    UPDATE namespace_references SET blob_id = NULL WHERE blob_id = OLD.id;
END;

CREATE TRIGGER blobs_follow_references AFTER UPDATE OF id, digest ON blobs
BEGIN
    UPDATE namespace_references SET blob_id = NULL WHERE blob_id = OLD.id;
    UPDATE namespace_references SET blob_id = NEW.id WHERE blob_id IS NULL AND digest = NEW.digest;
END;

-- `readable_blobs` (0013) as it was, joining a reference's blob by its id, with that id as a column: a read asks by
-- `blob_id` (the id of the digest's blob row), the namespace, `is_binary` and `extension`. A reference whose blob row is
-- missing still appears, with NULL blob columns.
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
    nb.digest AS needs,
    r.blob_id
FROM namespace_references r
JOIN namespaces n ON n.id = r.namespace_id
LEFT JOIN blobs b ON b.id = r.blob_id
LEFT JOIN blob_frames f ON f.blob_id = b.id
LEFT JOIN blob_dependencies d ON d.blob_id = b.id
LEFT JOIN blobs nb ON nb.id = d.needs_id;
