-- What `read` asks in one statement: a reference visible in a namespace, with its blob's row and frame. A visible
-- reference whose blob row is gone still appears, with NULL blob columns, so a damaged index reads as such.
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

-- Every write makes its reference visible in its namespace, inside the same statement.
CREATE TRIGGER writes_make_references_visible AFTER INSERT ON writes
BEGIN
    INSERT OR IGNORE INTO visible_references (digest, namespace, reference)
    VALUES (NEW.digest, NEW.namespace, NEW.reference);
END;

-- Writes recorded before the trigger existed are visible too.
INSERT OR IGNORE INTO visible_references (digest, namespace, reference)
SELECT digest, namespace, reference FROM writes;
