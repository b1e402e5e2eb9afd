-- gc's question "does any blob still need this one?" answered without an index entry for every learned blob
-- (docs/compression.md, "What a blob needs, with a smaller index"). Since 0017 the partial index
-- `frame_slots_by_needs` kept an entry for every slot with a dependency: every dictionary-encoded write (most new
-- results) inserted into it and wrote one more page at its commit, for a question only gc asks. The bases of deltas
-- are many and each is needed by few deltas; the dictionaries are few, and each is needed by many frames. So the
-- index keeps the deltas' slots only (`frame_slots_by_base`), and gc asks whether a dictionary (a row of
-- `dictionaries`) is still needed by reading the slots, which it does only for a dictionary nothing references.
DROP INDEX frame_slots_by_needs;

CREATE INDEX frame_slots_by_base ON frame_slots (needs_id) WHERE is_delta = 1;
