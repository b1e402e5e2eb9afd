-- gc's question "does any blob still need this one?" answered by one scan of the slots a batch, not by an index
-- (docs/compression.md, "What a blob needs, without an index"). Since 0017 the partial index `frame_slots_by_needs`
-- kept an entry for every learned blob (most of the new results), so every learned write inserted into it and wrote
-- one more page at its commit, for a question only gc asks. gc now reads the ids of the blobs that something needs
-- once per batch of deletions, inside the batch's exclusive transaction (where nothing can come to need a blob), and
-- leaves those alone; its list of candidates asks the same of the slots in one pass (`id NOT IN (...)`).
DROP INDEX frame_slots_by_needs;
