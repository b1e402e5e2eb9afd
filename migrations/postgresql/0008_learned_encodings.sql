-- Encodings that need another blob to decode (docs/compression.md). A blob without a row here is `plain`: one zstd
-- frame that decodes alone, as every blob before this migration. A row says the blob's frame needs the blob `needs_id`:
-- its trained zstd dictionary (`dictionary`) or the earlier content it is a delta against (`delta`). gc keeps a
-- needed blob while anything needs it; verify reads each blob through what it needs. Such frames are kept in the index
-- only (`blob_frames`), so that the row and the frame it describes always change in one transaction.
CREATE TABLE blob_dependencies (
    blob_id BIGINT PRIMARY KEY,                              -- blobs.id of a blob whose frame does not decode alone
    needs_id BIGINT NOT NULL,                                -- blobs.id of the blob it needs
    encoding TEXT NOT NULL CHECK (encoding IN ('dictionary', 'delta'))
);

CREATE INDEX blob_dependencies_by_needs ON blob_dependencies (needs_id);

-- The trained zstd dictionaries, one group of results each (the tool name in Haystack's keys). A dictionary's content
-- is a blob like any other; `active` marks the one new writes of its group use. gc keeps an active dictionary, and an
-- inactive one while any blob needs it.
CREATE TABLE dictionaries (
    blob_id BIGINT PRIMARY KEY,                              -- blobs.id of the dictionary's content
    tool TEXT NOT NULL,                                      -- the group: the tool name the keys carry
    samples BIGINT NOT NULL,                                 -- how many results it was trained on
    sample_bytes BIGINT NOT NULL,                            -- their bytes
    trained_at TEXT NOT NULL,                                -- UTC, 'YYYY-MM-DD HH:MM:SS.SSS'
    active INTEGER NOT NULL CHECK (active IN (0, 1))
);

CREATE UNIQUE INDEX dictionaries_one_active_per_tool ON dictionaries (tool) WHERE active = 1;

-- Every blob with its encoding and, for `dictionary` and `delta`, the digest of the blob it needs: for a person.
CREATE VIEW blob_encodings AS
SELECT
    b.digest,
    coalesce(d.encoding, 'plain') AS encoding,
    n.digest AS needs,
    b.size,
    b.stored_size,
    b.stored_in
FROM blobs b
LEFT JOIN blob_dependencies d ON d.blob_id = b.id
LEFT JOIN blobs n ON n.id = d.needs_id;

-- `readable_blobs` and `blob_locations` (0005, 0006) say what a read needs, now the encoding and the needed digest too.
DROP VIEW readable_blobs;

CREATE VIEW readable_blobs AS
SELECT
    v.namespace,
    v.reference,
    v.digest,
    coalesce(f.size, b.size) AS size,
    CASE WHEN f.frame IS NOT NULL THEN 'index' ELSE b.stored_in END AS stored_in,
    f.frame,
    d.encoding,
    n.digest AS needs
FROM visible_references v
LEFT JOIN blobs b ON b.digest = v.digest
LEFT JOIN blob_frames f ON f.blob_id = b.id
LEFT JOIN blob_dependencies d ON d.blob_id = b.id
LEFT JOIN blobs n ON n.id = d.needs_id;

DROP VIEW blob_locations;

CREATE VIEW blob_locations AS
SELECT
    b.digest,
    coalesce(f.size, b.size) AS size,
    CASE WHEN f.frame IS NOT NULL THEN 'index' ELSE b.stored_in END AS stored_in,
    f.frame,
    d.encoding,
    n.digest AS needs
FROM blobs b
LEFT JOIN blob_frames f ON f.blob_id = b.id
LEFT JOIN blob_dependencies d ON d.blob_id = b.id
LEFT JOIN blobs n ON n.id = d.needs_id;
