-- What dedup and compression saved, over the whole store.
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

-- Writes per namespace.
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

-- Content that was written more than once: how often the same output came back.
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

-- Offloads per namespace and tool.
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
