-- The search index of the PostgreSQL index (casstore/postgres_search.py), the same tables as the SQLite index's
-- migrations 0009 and 0012, with PostgreSQL's trigram index (the `pg_trgm` extension) in place of FTS5's.
--
-- The trigram index itself is not made here: `pg_trgm` is a contrib extension a server may lack, and a store that
-- never asks for search must open on such a server all the same. Turning search on (`search_index=True`, `casstore
-- search-index`) creates the extension and the index `search_text_trigrams` (casstore.postgres_search.enable), or
-- fails with a message saying what the server lacks.

-- One row per indexed blob. An identity never reused: a row left behind can never be taken for another blob's.
CREATE TABLE search_documents (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    digest TEXT NOT NULL UNIQUE,                             -- blobs.digest
    size BIGINT NOT NULL,                                    -- bytes of the content (blobs.size)
    tiebreak BIGINT NOT NULL                                 -- the digest's first 60 bits: an order no write changes
);

-- Each document's text, case-folded as Python's str.lower() folds it (as the local store's search compares): what the
-- trigram index indexes and what a LIKE rechecks, so a candidate is exact without reading its blob. PostgreSQL keeps
-- it compressed (TOAST). The blob keeps the text as written, which a hit's lines are taken from.
CREATE TABLE search_text (
    id BIGINT PRIMARY KEY,                                   -- search_documents.id
    body TEXT NOT NULL
);

-- As in the SQLite index (migration 0009): the indexed results of each namespace, with their first write there.
CREATE TABLE search_entries (
    namespace TEXT NOT NULL,
    document BIGINT NOT NULL,                                -- search_documents.id
    size BIGINT NOT NULL,
    tiebreak BIGINT NOT NULL,
    write_id BIGINT NOT NULL,                                -- writes.id
    PRIMARY KEY (namespace, document)
);
CREATE INDEX search_entries_by_document ON search_entries (document);
CREATE INDEX search_entries_in_order ON search_entries (namespace, size, tiebreak);

-- Per namespace: how many entries it has and their bytes.
CREATE TABLE search_namespaces (
    namespace TEXT PRIMARY KEY,
    documents BIGINT NOT NULL,
    bytes BIGINT NOT NULL
);

-- One row once the index is turned on.
CREATE TABLE search_state (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    enabled_at TEXT NOT NULL
);

-- As in the SQLite index (migration 0012): results written with the index on and not indexed yet.
CREATE TABLE search_pending (
    namespace TEXT NOT NULL,
    digest TEXT NOT NULL,
    write_id BIGINT NOT NULL,
    PRIMARY KEY (namespace, digest)
);
