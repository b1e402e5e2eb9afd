-- The search index (casstore/search_index.py): the text of every indexed blob, searchable by any substring of 3 or
-- more characters. It is built only when asked for (a store opened with `search_index=True`, or `casstore
-- search-index`), so a store that never asks keeps its write path unchanged and these tables empty.

-- One row per indexed blob: the row of `search_text` that holds its trigrams. AUTOINCREMENT, so an id is never
-- reused: a posting left behind for a blob that is gone can never be taken for another blob's.
CREATE TABLE search_documents (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    digest TEXT NOT NULL UNIQUE,                             -- blobs.digest
    size INTEGER NOT NULL,                                   -- bytes of the content (blobs.size)
    tiebreak INTEGER NOT NULL                                -- the digest's first 60 bits: an order no write changes
);

-- The trigrams of each document's text, case-folded, without positions and without a copy of the text (which the
-- blob already holds, compressed): a query finds the documents that hold every trigram of a term, and casstore then
-- reads each candidate and keeps it only if the term is really in it. Positions would make the index twice the size
-- of the text it indexes (measured on the benchmark trace: see docs/search.md); without them it is about a fifth.
CREATE VIRTUAL TABLE search_text USING fts5(body, content='', detail='none', tokenize='trigram');

-- The indexed results of each namespace: one row per (namespace, blob) that a store with the index on wrote there (or
-- `casstore search-index` found written there), with the blob's size and the namespace's first write of it. A search
-- counts and ranks over its namespace's rows alone, and a hit's key and time come from that write. gc deletes the
-- rows of what it forgets, in the same transaction.
CREATE TABLE search_entries (
    namespace TEXT NOT NULL,
    document INTEGER NOT NULL,                               -- search_documents.id
    size INTEGER NOT NULL,                                   -- the document's size and tiebreak, kept here so a
    tiebreak INTEGER NOT NULL,                               -- search orders its candidates without another look-up
    write_id INTEGER NOT NULL,                               -- writes.id: the namespace's first write of it
    PRIMARY KEY (namespace, document)
) WITHOUT ROWID;
CREATE INDEX search_entries_by_document ON search_entries (document);

-- Per namespace: how many entries it has and their bytes, kept with the entries, so a search's statistics cost one
-- look-up however many results the namespace holds.
CREATE TABLE search_namespaces (
    namespace TEXT PRIMARY KEY,
    documents INTEGER NOT NULL,
    bytes INTEGER NOT NULL
) WITHOUT ROWID;

-- One row once the index is turned on: then a search says what it found, not that there is no index to search.
CREATE TABLE search_state (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    enabled_at TEXT NOT NULL                                 -- UTC, 'YYYY-MM-DD HH:MM:SS.SSS'
);
