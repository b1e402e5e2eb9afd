-- One row per distinct piece of content, keyed by its BLAKE3 digest.
CREATE TABLE blobs (
    id INTEGER PRIMARY KEY,
    digest TEXT NOT NULL UNIQUE,                             -- 64 lower-case hex characters
    size INTEGER NOT NULL,                                   -- content bytes, uncompressed
    stored_size INTEGER NOT NULL,                            -- bytes of the zstd frame that holds it
    stored_in TEXT NOT NULL CHECK (stored_in IN ('index', 'file')),
    first_seen TEXT NOT NULL,                                -- UTC, 'YYYY-MM-DD HH:MM:SS.SSS'
    last_seen TEXT NOT NULL                                  -- refreshed by writes of this content (to the second)
);

-- The zstd frames of blobs stored in the index (stored_in = 'index'), apart from `blobs` so that refreshing
-- `last_seen` or scanning sizes never rewrites or reads the frames' pages.
CREATE TABLE blob_frames (
    blob_id INTEGER PRIMARY KEY,                             -- blobs.id
    frame BLOB NOT NULL
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

-- The references each namespace may read: one row per distinct (namespace, reference) in `writes`. `read` looks
-- here; a repeated write finds its row already present and changes nothing. Keyed by digest first, so the same key
-- also answers gc's question "does anything still reference this blob?".
CREATE TABLE visible_references (
    digest TEXT NOT NULL,                                    -- blobs.digest
    namespace TEXT NOT NULL,
    reference TEXT NOT NULL,
    PRIMARY KEY (digest, namespace, reference)
) WITHOUT ROWID;
