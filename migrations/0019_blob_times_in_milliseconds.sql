-- A blob's times kept as integer milliseconds since 1970-01-01 00:00:00 UTC, as `write_log` keeps a write's since 0011
-- (docs/index.md). `blobs` kept `first_seen` and `last_seen` as 23 characters of text each, about a third of its row
-- (docs/compression.md, "Blob times in milliseconds").
--
-- The rows move, with their ids, to the table `blob_rows`, which casstore's blob layer writes. `blobs` becomes a view
-- of it with the columns it had, the times as the text they were (`YYYY-MM-DD HH:MM:SS.SSS`, UTC), so every query that
-- read `blobs` reads it unchanged, and a person may still insert, change or delete a row of `blobs` by hand: triggers
-- send each to `blob_rows`, a time given as text turned into milliseconds (a time that is not a time is refused).
--
-- A time edited by hand into something that is not a time would fail the copy below; such rows are named, with the
-- statement that fixes them, before anything changes (`casstore/blob_times_upgrade.py`).
CREATE TABLE blob_rows (
    id INTEGER PRIMARY KEY,
    digest TEXT NOT NULL UNIQUE,                             -- 64 lower-case hex characters
    size INTEGER NOT NULL,                                   -- content bytes, uncompressed
    stored_size INTEGER NOT NULL,                            -- bytes of the zstd frame that holds it
    stored_in TEXT NOT NULL CHECK (stored_in IN ('index', 'file')),
    first_seen INTEGER NOT NULL,                             -- milliseconds since 1970-01-01 00:00:00 UTC
    last_seen INTEGER NOT NULL                               -- the same; refreshed by writes (to the second)
);

-- Every row, with its id, in the order of the ids.
INSERT INTO blob_rows (id, digest, size, stored_size, stored_in, first_seen, last_seen)
SELECT
    id,
    digest,
    size,
    stored_size,
    stored_in,
    CAST(round((julianday(first_seen) - 2440587.5) * 86400000) AS INTEGER),
    CAST(round((julianday(last_seen) - 2440587.5) * 86400000) AS INTEGER)
FROM blobs ORDER BY id;

-- The table goes, with its triggers (0018's, made again on `blob_rows` below). The views that read `blobs` read the
-- view of that name from now on, with the same columns.
DROP TABLE blobs;

CREATE VIEW blobs AS
SELECT
    id,
    digest,
    size,
    stored_size,
    stored_in,
    strftime('%Y-%m-%d %H:%M:%S', first_seen / 1000, 'unixepoch') || printf('.%03d', first_seen % 1000) AS first_seen,
    strftime('%Y-%m-%d %H:%M:%S', last_seen / 1000, 'unixepoch') || printf('.%03d', last_seen % 1000) AS last_seen
FROM blob_rows;

-- A row of `blobs` written by hand goes to `blob_rows`. A time is given as text, as `blobs` shows it; one that is not a
-- time becomes NULL, which `blob_rows` refuses (NOT NULL), so the statement fails and changes nothing. An update that
-- leaves a time as it was keeps its milliseconds exactly.
CREATE TRIGGER blobs_insert INSTEAD OF INSERT ON blobs
BEGIN
    INSERT INTO blob_rows (id, digest, size, stored_size, stored_in, first_seen, last_seen)
    VALUES (
        NEW.id,
        NEW.digest,
        NEW.size,
        NEW.stored_size,
        NEW.stored_in,
        CAST(round((julianday(NEW.first_seen) - 2440587.5) * 86400000) AS INTEGER),
        CAST(round((julianday(NEW.last_seen) - 2440587.5) * 86400000) AS INTEGER)
    );
END;

CREATE TRIGGER blobs_update INSTEAD OF UPDATE ON blobs
BEGIN
    UPDATE blob_rows SET
        id = NEW.id,
        digest = NEW.digest,
        size = NEW.size,
        stored_size = NEW.stored_size,
        stored_in = NEW.stored_in,
        first_seen = CASE WHEN NEW.first_seen IS OLD.first_seen THEN first_seen
            ELSE CAST(round((julianday(NEW.first_seen) - 2440587.5) * 86400000) AS INTEGER) END,
        last_seen = CASE WHEN NEW.last_seen IS OLD.last_seen THEN last_seen
            ELSE CAST(round((julianday(NEW.last_seen) - 2440587.5) * 86400000) AS INTEGER) END
    WHERE id = OLD.id;
END;

CREATE TRIGGER blobs_delete INSTEAD OF DELETE ON blobs
BEGIN
    DELETE FROM blob_rows WHERE id = OLD.id;
END;

-- As in 0018, on the table: a blob row made (again) takes the references that wait for it, which no longer need their
-- own copy of its digest; one deleted leaves its references without an id, each keeping the digest it named; one
-- whose id or digest changes is followed.
CREATE TRIGGER blobs_attach_references AFTER INSERT ON blob_rows
BEGIN
    UPDATE namespace_references SET blob_id = NEW.id, digest = NULL WHERE blob_id IS NULL AND digest = NEW.digest;
END;

CREATE TRIGGER blobs_detach_references AFTER DELETE ON blob_rows
BEGIN
    UPDATE namespace_references SET blob_id = NULL, digest = OLD.digest WHERE blob_id = OLD.id;
END;

CREATE TRIGGER blobs_follow_references AFTER UPDATE OF id, digest ON blob_rows
WHEN OLD.id IS NOT NEW.id OR OLD.digest IS NOT NEW.digest
BEGIN
    UPDATE namespace_references SET blob_id = NULL, digest = OLD.digest WHERE blob_id = OLD.id;
    UPDATE namespace_references SET blob_id = NEW.id, digest = NULL WHERE blob_id IS NULL AND digest = NEW.digest;
END;
