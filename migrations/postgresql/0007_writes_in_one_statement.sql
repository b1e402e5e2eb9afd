-- A write of one part whose blob is stored already, as one statement: the PostgreSQL index's fast path for a duplicate
-- write (`casstore.postgres.PostgresDatabase.record_stored_write`), one round trip that commits.
--
-- It is the write transaction of the repository's protocol in one function, for a part that needs no blob put:
-- 1. the writers' shared advisory lock (`lock_key`, casstore.postgres.GC_LOCK_KEY), taken first, so no gc transaction
--    runs between it and the commit. The function is VOLATILE: each statement after the lock takes a fresh snapshot
--    (READ COMMITTED), so what gc committed before the lock was granted is seen;
-- 2. the part's blob row must exist. If it does not (gc deleted it, or it never was), nothing is written and FALSE is
--    returned, for the caller to store the blob and write again;
-- 3. the blob's `last_seen` is refreshed if older than `seen_ago` (as blobs.py's `confirm`);
-- 4. one `writes` row, and its reference made visible in its namespace (as index.py's `record_write`).
-- A blob row implies its object (gc deletes the row, commits, then the object, all under the exclusive lock), so no
-- object is looked at. Scalar arguments, not arrays: arrays cost more to pass than the whole statement.
CREATE FUNCTION casstore_record_stored_write(
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
    stamp TEXT;
    stale BOOLEAN;
BEGIN
    PERFORM pg_advisory_xact_lock_shared(lock_key);
    stamp := to_char((now() AT TIME ZONE 'UTC'), 'YYYY-MM-DD HH24:MI:SS.MS');
    SELECT last_seen < to_char(((now() + CAST(seen_ago AS INTERVAL)) AT TIME ZONE 'UTC'), 'YYYY-MM-DD HH24:MI:SS.MS')
    INTO stale FROM blobs WHERE digest = write_digest;
    IF NOT FOUND THEN
        RETURN FALSE;
    END IF;
    IF stale THEN
        UPDATE blobs SET last_seen = stamp WHERE digest = write_digest;
    END IF;
    INSERT INTO writes (namespace, key, digest, kind, size, reference, written_at)
    VALUES (write_namespace, write_key, write_digest, write_kind, write_size, write_reference, stamp);
    INSERT INTO visible_references (digest, namespace, reference)
    VALUES (write_digest, write_namespace, write_reference)
    ON CONFLICT DO NOTHING;
    RETURN TRUE;
END
$$;
