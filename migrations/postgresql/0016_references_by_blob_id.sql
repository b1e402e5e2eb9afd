-- A namespace's references found by their blob's id rather than by its digest, as the SQLite index's migration of
-- this name (read it for the why): `namespace_references` gets `blob_id` (the `blobs.id` of its content, NULL while its
-- blob row is missing), its unique index leads with that id instead of the 64-character digest, triggers on `blobs`
-- keep `blob_id` right, and `readable_blobs` and the duplicate-write function of 0011 find a reference by it. The same
-- statements of casstore's index layer run on both engines, so both keep the same columns and indexes.
ALTER TABLE namespace_references ADD COLUMN blob_id BIGINT;  -- blobs.id of its content; NULL: its blob row is missing

UPDATE namespace_references r SET blob_id = b.id FROM blobs b WHERE b.digest = r.digest;

DROP INDEX namespace_references_by_digest;

CREATE UNIQUE INDEX namespace_references_by_blob
    ON namespace_references (blob_id, namespace_id, is_binary, extension);

-- A blob row made (again) takes the references that wait for it; one deleted leaves its references without an id;
-- one whose id or digest a person changes is followed.
CREATE FUNCTION casstore_attach_references() RETURNS TRIGGER LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        UPDATE namespace_references SET blob_id = NULL WHERE blob_id = OLD.id;
    END IF;
    IF TG_OP <> 'DELETE' THEN
        UPDATE namespace_references SET blob_id = NEW.id WHERE blob_id IS NULL AND digest = NEW.digest;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER blobs_attach_references AFTER INSERT ON blobs
FOR EACH ROW EXECUTE FUNCTION casstore_attach_references();

CREATE TRIGGER blobs_detach_references AFTER DELETE ON blobs
FOR EACH ROW EXECUTE FUNCTION casstore_attach_references();

CREATE TRIGGER blobs_follow_references AFTER UPDATE OF id, digest ON blobs
FOR EACH ROW EXECUTE FUNCTION casstore_attach_references();

-- As in 0011, joining a reference's blob by its id, with that id as a column (a read asks by it).
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
    CASE WHEN f.frame IS NOT NULL THEN 'index' ELSE b.stored_in END AS stored_in,
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

-- The duplicate-write function of 0011, with the same arguments: the blob's id comes with its row (which it reads
-- anyway), and the reference is found, or made, by that id.
CREATE OR REPLACE FUNCTION casstore_record_stored_write(
    lock_key BIGINT,
    write_namespace TEXT,
    write_key TEXT,
    write_digest TEXT,
    write_kind TEXT,
    write_size BIGINT,
    write_reference TEXT,
    seen_ago TEXT
) RETURNS BOOLEAN LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    stale BOOLEAN;
    found_blob BIGINT;
    binary_flag SMALLINT;
    reference_extension TEXT;
    found_reference BIGINT;
BEGIN
    PERFORM pg_advisory_xact_lock_shared(lock_key);
    SELECT id, last_seen < to_char(((now() + CAST(seen_ago AS INTERVAL)) AT TIME ZONE 'UTC'), 'YYYY-MM-DD HH24:MI:SS.MS')
    INTO found_blob, stale FROM blobs WHERE digest = write_digest;
    IF NOT FOUND THEN
        RETURN FALSE;
    END IF;
    IF stale THEN
        UPDATE blobs SET last_seen = to_char((now() AT TIME ZONE 'UTC'), 'YYYY-MM-DD HH24:MI:SS.MS')
        WHERE id = found_blob;
    END IF;
    binary_flag := CASE write_kind WHEN 'binary' THEN 1 ELSE 0 END;
    reference_extension := substr(write_reference, CASE binary_flag WHEN 1 THEN 77 ELSE 73 END);
    SELECT r.id INTO found_reference
    FROM namespace_references r JOIN namespaces n ON n.id = r.namespace_id
    WHERE r.blob_id = found_blob AND n.namespace = write_namespace AND r.is_binary = binary_flag
        AND r.extension = reference_extension;
    IF found_reference IS NULL THEN
        INSERT INTO namespaces (namespace) SELECT write_namespace
        WHERE NOT EXISTS (SELECT 1 FROM namespaces WHERE namespace = write_namespace)
        ON CONFLICT DO NOTHING;
        INSERT INTO namespace_references (namespace_id, blob_id, digest, is_binary, extension, size)
        VALUES ((SELECT id FROM namespaces WHERE namespace = write_namespace), found_blob, write_digest, binary_flag,
                reference_extension, write_size)
        ON CONFLICT DO NOTHING
        RETURNING id INTO found_reference;
        IF found_reference IS NULL THEN
            SELECT r.id INTO found_reference
            FROM namespace_references r JOIN namespaces n ON n.id = r.namespace_id
            WHERE r.blob_id = found_blob AND n.namespace = write_namespace AND r.is_binary = binary_flag
                AND r.extension = reference_extension;
        END IF;
    END IF;
    INSERT INTO write_log (reference_id, key, written_at)
    VALUES (found_reference, write_key, CAST(floor(extract(epoch FROM now()) * 1000) AS BIGINT));
    RETURN TRUE;
END
$$;
