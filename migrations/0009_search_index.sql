-- The search index (casstore/search_index.py): the text of every indexed blob, searchable by any substring of 3 or
-- more characters. It is built only when asked for (a store opened with `search_index=True`, or `casstore
-- search-index`), so a store that never asks keeps its write path unchanged and these tables empty.

-- One row per indexed blob: the row of `search_text` that holds its trigrams. AUTOINCREMENT, so an id is never
-- reused: a posting left behind for a blob that is gone can never be taken for another blob's.
CREATE TABLE search_documents (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    digest TEXT NOT NULL UNIQUE,                             -- blobs.digest
    size INTEGER NOT NULL                                    -- bytes of the content (blobs.size)
);

-- The trigrams of each document's text, case-folded, without positions and without a copy of the text (which the
-- blob already holds, compressed): a query finds the documents that hold every trigram of a term, and casstore then
-- reads each candidate and keeps it only if the term is really in it. Positions would make the index twice the size
-- of the text it indexes (measured on the benchmark trace: see docs/search.md); without them it is about a fifth.
CREATE VIRTUAL TABLE search_text USING fts5(body, content='', detail='none', tokenize='trigram');

-- One row once the index is turned on: then a search says what it found, not that there is no index to search.
CREATE TABLE search_state (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    enabled_at TEXT NOT NULL                                 -- UTC, 'YYYY-MM-DD HH:MM:SS.SSS'
);
