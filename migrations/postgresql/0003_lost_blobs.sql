-- When a read or `verify` last found a blob's frame or object missing or failing its digest check; NULL while none
-- did (migrations/0003_lost_blobs.sql, types mapped). A write of the content treats such a blob as not stored: it
-- stores it again and sets this back to NULL.
ALTER TABLE blobs ADD COLUMN lost_at TIMESTAMPTZ;

-- The one-statement duplicate write (0001_baseline.sql), now recording nothing for a blob found lost: the writer then
-- stores it again, as new content, in a transaction of its own.
CREATE OR REPLACE FUNCTION casstore_record_stored_write(
    lock_key BIGINT,
    write_namespace TEXT,
    write_key TEXT,
    write_digest TEXT,
    write_kind TEXT,
    write_extension TEXT,
    write_size BIGINT,
    seen_ago TEXT
) RETURNS BOOLEAN LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    stale BOOLEAN;
    found_blob BIGINT;
BEGIN
    PERFORM pg_advisory_xact_lock_shared(lock_key);
    SELECT id, last_seen < now() + CAST(seen_ago AS INTERVAL) INTO found_blob, stale FROM blobs
    WHERE digest = write_digest AND lost_at IS NULL;
    IF NOT FOUND THEN
        RETURN FALSE;
    END IF;
    IF stale THEN
        UPDATE blobs SET last_seen = date_trunc('milliseconds', now()) WHERE id = found_blob;
    END IF;
    INSERT INTO write_rows (namespace, key, blob_id, kind, extension, size, written_at)
    VALUES (write_namespace, write_key, found_blob, write_kind, write_extension, write_size,
            date_trunc('milliseconds', now()));
    RETURN TRUE;
END
$$;
