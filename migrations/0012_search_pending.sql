-- Results written with the search index on and not indexed yet (casstore/search_index.py). A write records its row
-- here, in its own transaction, one insert; the writer indexes its text after the commit, in a short transaction of
-- its own that deletes the row (in batches, docs/search.md). A crash between the two leaves the row, and whatever
-- indexes next (the next batch of any writer, a search of the namespace, `casstore search-index`) indexes it: the
-- index never lacks a result it was asked to hold without a row here saying so.
CREATE TABLE search_pending (
    namespace TEXT NOT NULL,
    digest TEXT NOT NULL,                                    -- blobs.digest
    write_id INTEGER NOT NULL,                               -- writes.id: the namespace's first write of it since
    PRIMARY KEY (namespace, digest)
) WITHOUT ROWID;

-- A namespace's entries in the order a search reads them (shortest first): a term found in many documents takes its
-- shortest candidates by walking this index, instead of sorting every match (casstore/search_index.py).
CREATE INDEX search_entries_in_order ON search_entries (namespace, size, tiebreak);
