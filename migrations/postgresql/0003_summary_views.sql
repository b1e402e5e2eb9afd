-- The same views as the SQLite index's; sums are cast back to BIGINT and ratios to double precision, which SQLite's
-- untyped arithmetic gives without asking.
CREATE VIEW dedup_summary AS
WITH
    w AS (SELECT count(*) AS writes, coalesce(sum(size), 0)::BIGINT AS logical_bytes FROM writes),
    b AS (
        SELECT count(*) AS blobs, coalesce(sum(size), 0)::BIGINT AS unique_bytes,
               coalesce(sum(stored_size), 0)::BIGINT AS stored_bytes
        FROM blobs
    )
SELECT
    w.writes,
    b.blobs,
    w.logical_bytes,
    b.unique_bytes,
    b.stored_bytes,
    round(w.logical_bytes::NUMERIC / nullif(b.unique_bytes, 0), 2)::DOUBLE PRECISION AS dedup_ratio,
    round(b.unique_bytes::NUMERIC / nullif(b.stored_bytes, 0), 2)::DOUBLE PRECISION AS compression_ratio,
    round(w.logical_bytes::NUMERIC / nullif(b.stored_bytes, 0), 2)::DOUBLE PRECISION AS total_ratio,
    w.logical_bytes - b.stored_bytes AS bytes_saved
FROM w, b;

CREATE VIEW namespace_summary AS
SELECT
    namespace,
    count(*) AS writes,
    count(DISTINCT digest) AS distinct_results,
    sum(size)::BIGINT AS logical_bytes,
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
    sum(original_tokens)::BIGINT AS original_tokens,
    sum(saved_tokens)::BIGINT AS saved_tokens,
    min(offloaded_at) AS first_offload,
    max(offloaded_at) AS last_offload
FROM offloads
GROUP BY namespace, tool_name;
