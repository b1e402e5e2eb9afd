-- One row per distinct piece of content, keyed by its BLAKE3 digest.
CREATE TABLE blobs (
    digest TEXT PRIMARY KEY NOT NULL,                        -- 64 lower-case hex characters
    size INTEGER NOT NULL,                                   -- content bytes, uncompressed
    stored_size INTEGER NOT NULL,                            -- bytes of the zstd frame that holds it
    stored_in TEXT NOT NULL CHECK (stored_in IN ('index', 'file')),
    first_seen TEXT NOT NULL,                                -- UTC, 'YYYY-MM-DD HH:MM:SS.SSS'
    last_seen TEXT NOT NULL,                                 -- refreshed by every write of this content
    frame BLOB                                               -- the zstd frame when stored_in = 'index'; last, so
                                                             -- scans of the other columns skip its pages
);

-- One row per call to `write`: the offload history.
CREATE TABLE writes (
    id INTEGER PRIMARY KEY,
    namespace TEXT NOT NULL,
    key TEXT NOT NULL,                                       -- the key the caller passed, only recorded
    digest TEXT NOT NULL,                                    -- blobs.digest
    kind TEXT NOT NULL CHECK (kind IN ('text', 'binary')),
    size INTEGER NOT NULL,                                   -- content bytes of this write
    reference TEXT NOT NULL,                                 -- what `write` returned
    written_at TEXT NOT NULL                                 -- UTC, 'YYYY-MM-DD HH:MM:SS.SSS'
);

-- `read` asks: was this reference written in this namespace?
CREATE INDEX writes_by_namespace_reference ON writes (namespace, reference);
