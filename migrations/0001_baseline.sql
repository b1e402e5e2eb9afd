-- The schema of index.db: plain tables, one row per thing, the same names and columns as the PostgreSQL index
-- (migrations/postgresql/0001_baseline.sql). docs/schema.md describes every table and view.
-- Times are UTC text, 'YYYY-MM-DD HH:MM:SS.SSS'; digests are 64 lower-case hex characters.

-- The trained zstd dictionaries: their bytes, what they were trained on, and whether new writes of their tool use
-- them. A blob compressed with one names it (blobs.dictionary_id).
CREATE TABLE dictionaries (
    id INTEGER PRIMARY KEY,
    tool TEXT NOT NULL,                                      -- the group: the tool name the keys carry
    digest TEXT NOT NULL UNIQUE,                             -- BLAKE3 of data, checked on every load
    data BLOB NOT NULL,                                      -- the dictionary's bytes
    samples INTEGER NOT NULL,                                -- how many results it was trained on
    sample_bytes INTEGER NOT NULL,                           -- their bytes
    trained_at TEXT NOT NULL,
    active INTEGER NOT NULL CHECK (active IN (0, 1))         -- 1: the dictionary new writes of `tool` use
);
CREATE UNIQUE INDEX dictionaries_one_active_per_tool ON dictionaries (tool) WHERE active = 1;

-- The results each dictionary was trained on, by digest: its bytes hold fragments of them, so gc deletes a
-- dictionary whose samples are all deleted as soon as no kept blob needs it.
CREATE TABLE dictionary_samples (
    dictionary_id INTEGER NOT NULL,                          -- dictionaries.id
    digest TEXT NOT NULL,                                    -- blobs.digest of a sample
    PRIMARY KEY (dictionary_id, digest)
) WITHOUT ROWID;

-- One row per stored blob (distinct content), wherever its frame is, and how to decode it.
CREATE TABLE blobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,                    -- never reused: write_rows name blobs by id
    digest TEXT NOT NULL UNIQUE,                             -- BLAKE3 of the content
    size INTEGER NOT NULL,                                   -- content bytes, uncompressed
    stored_size INTEGER NOT NULL,                            -- bytes of the zstd frame that holds it
    stored_in TEXT NOT NULL CHECK (stored_in IN ('index', 'file', 'object')),
    encoding TEXT NOT NULL DEFAULT 'plain' CHECK (encoding IN ('plain', 'dictionary', 'delta')),
    dictionary_id INTEGER,                                   -- dictionaries.id, for encoding 'dictionary'
    base_id INTEGER,                                         -- blobs.id of the base, for encoding 'delta'
    first_seen TEXT NOT NULL,                                -- first stored
    last_seen TEXT NOT NULL,                                 -- last written (kept to about a second)
    namespace TEXT,                                          -- dedup_scope 'namespace': whose key keyed its digest
    CHECK ((encoding = 'dictionary') = (dictionary_id IS NOT NULL) AND (encoding = 'delta') = (base_id IS NOT NULL))
);
CREATE INDEX blobs_by_base ON blobs (base_id) WHERE base_id IS NOT NULL;
CREATE INDEX blobs_by_dictionary ON blobs (dictionary_id) WHERE dictionary_id IS NOT NULL;

-- The frames of blobs kept inside the index (stored_in = 'index'), one row each: its exact stored bytes.
CREATE TABLE blob_frames (
    blob_id INTEGER PRIMARY KEY,                             -- blobs.id
    frame BLOB NOT NULL
);

-- One row per write(): who wrote which blob under which key. A reference is visible (readable) in a namespace
-- while a row of that namespace names its blob. The blob is named by its id, not its digest: the digest is kept once,
-- in `blobs`, and the view `writes` shows it.
CREATE TABLE write_rows (
    id INTEGER PRIMARY KEY,
    namespace TEXT NOT NULL,
    key TEXT NOT NULL,                                       -- the key the caller passed, only recorded
    blob_id INTEGER NOT NULL,                                 -- blobs.id of the content
    kind TEXT NOT NULL CHECK (kind IN ('text', 'binary')),   -- written as str or as bytes
    extension TEXT NOT NULL,                                 -- the reference's extension, such as '.txt', or ''
    size INTEGER NOT NULL,                                   -- content bytes
    written_at TEXT NOT NULL
);
CREATE INDEX write_rows_by_blob ON write_rows (blob_id, namespace);

-- The writes as users query them: each row of `write_rows` with its blob's digest and its reference. Read-only.
CREATE VIEW writes AS
SELECT
    w.id,
    w.namespace,
    w.key,
    b.digest,
    w.kind,
    w.extension,
    w.size,
    w.written_at,
    'blake3/' || CASE w.kind WHEN 'binary' THEN 'bin/' ELSE '' END || substr(b.digest, 1, 2) || '/'
    || substr(b.digest, 3) || w.extension AS reference
FROM write_rows w
JOIN blobs b ON b.id = w.blob_id;

-- One row per tool result a compactor replaced by references.
CREATE TABLE offloads (
    id INTEGER PRIMARY KEY,
    compaction_id TEXT NOT NULL,                             -- shared by all offloads of one `compact` call
    namespace TEXT NOT NULL,
    tool_name TEXT NOT NULL,
    tool_call_id TEXT,                                       -- NULL when the tool call had no id
    refs TEXT NOT NULL,                                      -- JSON array of references, one per result part
    original_tokens INTEGER NOT NULL,                        -- tokens of the tool-result message before
    saved_tokens INTEGER NOT NULL,                           -- original_tokens minus the offloaded message's tokens
    offloaded_at TEXT NOT NULL
);
CREATE INDEX offloads_by_time ON offloads (offloaded_at);

-- One row per `compact` call that found the conversation over its target.
CREATE TABLE compactions (
    id INTEGER PRIMARY KEY,
    compaction_id TEXT NOT NULL UNIQUE,                      -- offloads.compaction_id of the offloads it made
    namespace TEXT NOT NULL,
    tokens_before INTEGER NOT NULL,                          -- the conversation's tokens when the call began
    tokens_after INTEGER NOT NULL,                           -- and when it ended (= tokens_before: nothing offloaded)
    target_tokens INTEGER NOT NULL,                          -- what the call was asked to fit within
    context_window INTEGER,                                  -- the model's window in tokens; NULL unless known
    compacted_at TEXT NOT NULL
);
CREATE INDEX compactions_by_time ON compactions (compacted_at);

-- Settings of the store as a whole, one row per setting (a shared store's `store_id` and `blob_url`).
CREATE TABLE store_settings (
    name TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

-- The search index (docs/search.md): a document per indexed blob, its trigrams, and an entry per namespace that
-- may find it.
CREATE TABLE search_documents (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    digest TEXT NOT NULL UNIQUE,                             -- blobs.digest
    size INTEGER NOT NULL,                                   -- bytes of the content (blobs.size)
    tiebreak INTEGER NOT NULL                                -- the digest's first 60 bits: an order no write changes
);
CREATE VIRTUAL TABLE search_text USING fts5(body, content='', detail='none', tokenize='trigram');
-- Merge a level's segments once it holds 2 (FTS5's default is 4): a look-up reads about half as many segments.
INSERT INTO search_text (search_text, rank) VALUES ('automerge', 2);
CREATE TABLE search_entries (
    namespace TEXT NOT NULL,
    document INTEGER NOT NULL,                               -- search_documents.id
    size INTEGER NOT NULL,                                   -- the document's size and tiebreak, kept here so a
    tiebreak INTEGER NOT NULL,                               -- search orders its candidates without another look-up
    write_id INTEGER NOT NULL,                               -- writes.id: the namespace's first write of it
    PRIMARY KEY (namespace, document)
) WITHOUT ROWID;
CREATE INDEX search_entries_by_document ON search_entries (document);
CREATE INDEX search_entries_in_order ON search_entries (namespace, size, tiebreak);
CREATE TABLE search_namespaces (
    namespace TEXT PRIMARY KEY,
    documents INTEGER NOT NULL,
    bytes INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE search_state (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    enabled_at TEXT NOT NULL
);
CREATE TABLE search_pending (
    namespace TEXT NOT NULL,
    digest TEXT NOT NULL,                                    -- blobs.digest
    write_id INTEGER NOT NULL,                               -- writes.id: the namespace's first write of it since
    PRIMARY KEY (namespace, digest)
) WITHOUT ROWID;

-- The summaries users query.
CREATE VIEW dedup_summary AS
WITH
    w AS (SELECT count(*) AS writes, coalesce(sum(size), 0) AS logical_bytes FROM writes),
    b AS (
        SELECT count(*) AS blobs, coalesce(sum(size), 0) AS unique_bytes, coalesce(sum(stored_size), 0) AS stored_bytes
        FROM blobs
    )
SELECT
    w.writes,
    b.blobs,
    w.logical_bytes,
    b.unique_bytes,
    b.stored_bytes,
    round(1.0 * w.logical_bytes / nullif(b.unique_bytes, 0), 2) AS dedup_ratio,
    round(1.0 * b.unique_bytes / nullif(b.stored_bytes, 0), 2) AS compression_ratio,
    round(1.0 * w.logical_bytes / nullif(b.stored_bytes, 0), 2) AS total_ratio,
    w.logical_bytes - b.stored_bytes AS bytes_saved
FROM w, b;

CREATE VIEW namespace_summary AS
SELECT
    namespace,
    count(*) AS writes,
    count(DISTINCT digest) AS distinct_results,
    sum(size) AS logical_bytes,
    min(written_at) AS first_write,
    max(written_at) AS last_write
FROM writes
GROUP BY namespace;

CREATE VIEW repeated_results AS
SELECT
    digest,
    count(*) AS times_written,
    count(DISTINCT namespace) AS namespaces,
    max(size) AS size,
    (count(*) - 1) * max(size) AS bytes_deduplicated,
    min(written_at) AS first_written,
    max(written_at) AS last_written,
    min(key) AS example_key
FROM writes
GROUP BY digest
HAVING count(*) > 1;

CREATE VIEW offload_summary AS
SELECT
    namespace,
    tool_name,
    count(*) AS offloads,
    count(DISTINCT compaction_id) AS compactions,
    sum(original_tokens) AS original_tokens,
    sum(saved_tokens) AS saved_tokens,
    min(offloaded_at) AS first_offload,
    max(offloaded_at) AS last_offload
FROM offloads
GROUP BY namespace, tool_name;

CREATE VIEW offloaded_parts AS
SELECT
    o.id AS offload_id,
    o.compaction_id,
    o.namespace,
    o.tool_name,
    o.tool_call_id,
    CAST(part.key AS INTEGER) AS part,
    part.value AS reference,
    b.digest,
    b.size,
    b.stored_size,
    b.stored_in,
    o.offloaded_at
FROM offloads o
JOIN json_each(o.refs) part
LEFT JOIN blobs b ON b.digest = replace(
    substr(part.value, CASE WHEN substr(part.value, 1, 11) = 'blake3/bin/' THEN 12 ELSE 8 END, 65), '/', ''
);
