-- SQLite's 0018 stops keeping a reference's digest beside its blob's id (the blob's row holds it; the reference keeps
-- its own copy only while the blob row is missing) and drops the index of the references' text, which PostgreSQL
-- never had. A shared index keeps each reference's digest: the duplicate-write function (0007, 0016) writes it in the
-- statement that makes the reference, and the index layer's statements, which run on both engines, read a
-- reference's digest as `coalesce(r.digest, b.digest)` either way.
--
-- Both engines get the view `offloaded_parts` (see SQLite's 0018): one row per part of each offloaded result, with
-- the blob its reference names, found by the digest the reference carries. Its `part` counts from 0, as SQLite's
-- `json_each` does.
CREATE VIEW offloaded_parts AS
SELECT
    o.id AS offload_id,
    o.compaction_id,
    o.namespace,
    o.tool_name,
    o.tool_call_id,
    CAST(part.key - 1 AS INTEGER) AS part,
    part.value AS reference,
    b.digest,
    b.size,
    b.stored_size,
    b.stored_in,
    o.offloaded_at
FROM offloads o
CROSS JOIN LATERAL jsonb_array_elements_text(o.refs::jsonb) WITH ORDINALITY AS part(value, key)
LEFT JOIN blobs b ON b.digest = replace(
    substr(part.value, CASE WHEN substr(part.value, 1, 11) = 'blake3/bin/' THEN 12 ELSE 8 END, 65), '/', ''
);
