-- A key's stem kept once (docs/index.md, "What the history stores"). A Haystack key is `{step}_{tool}_{call id}...`
-- (the offload hook's) or `compacted_{tool}_{32 hex or call id}...` (the compactors'): of its 40 characters on the
-- benchmark's trace, the step and the tool's stem are 20, written again by every write of the tool. A new
-- `write_log` row keeps the step as an integer (`key_step`, if it has one), the stem as the id of its `key_stems` row
-- (`key_stem_id`), and only the rest in `key`; a key of another shape, and every row written before 0021, keeps
-- `key` whole (both new columns NULL). The views show the whole key, as before: a person reading `write_log` alone
-- sees the rest of split keys only.
CREATE TABLE key_stems (
    id INTEGER PRIMARY KEY,
    stem TEXT NOT NULL UNIQUE                                -- such as 'read_file_call' or 'compacted_read_file_'
);

ALTER TABLE write_log ADD COLUMN key_step INTEGER CHECK (key_step >= 0);  -- the key's leading number, if split
ALTER TABLE write_log ADD COLUMN key_stem_id INTEGER;                     -- key_stems.id; NULL: `key` is whole

-- A stem that rows of `write_log` name cannot be deleted (their keys would be lost); casstore never deletes one.
CREATE TRIGGER key_stems_kept BEFORE DELETE ON key_stems
WHEN EXISTS (SELECT 1 FROM write_log WHERE key_stem_id = OLD.id)
BEGIN
    SELECT RAISE(ABORT, 'rows of write_log name this key stem: their keys would be lost; key stems are never deleted');
END;

-- `writes` and `repeated_results` as 0018 made them, with the whole key (the step, `_`, the stem and the rest), as text.
DROP VIEW writes;

CREATE VIEW writes AS
SELECT
    w.id,
    n.namespace,
    CAST(
        CASE WHEN w.key_stem_id IS NULL THEN w.key
            ELSE coalesce(w.key_step || '_', '') || (SELECT s.stem FROM key_stems s WHERE s.id = w.key_stem_id) || w.key
        END AS TEXT
    ) AS key,
    coalesce(r.digest, b.digest) AS digest,
    CASE r.is_binary WHEN 1 THEN 'binary' ELSE 'text' END AS kind,
    r.size,
    'blake3/' || CASE r.is_binary WHEN 1 THEN 'bin/' ELSE '' END || substr(coalesce(r.digest, b.digest), 1, 2) || '/'
        || substr(coalesce(r.digest, b.digest), 3) || r.extension AS reference,
    strftime('%Y-%m-%d %H:%M:%S', w.written_at / 1000, 'unixepoch') || printf('.%03d', w.written_at % 1000)
        AS written_at
FROM write_log w
JOIN namespace_references r ON r.id = w.reference_id
JOIN namespaces n ON n.id = r.namespace_id
LEFT JOIN blobs b ON b.id = r.blob_id;

-- As in 0011: only `written_at` of the view `writes` can be changed, by hand.
CREATE TRIGGER writes_set_written_at INSTEAD OF UPDATE ON writes
BEGIN
    SELECT RAISE(ABORT, 'only written_at of the view writes can be changed; casstore records which reference was written')
    WHERE (NEW.id, NEW.namespace, NEW.key, NEW.digest, NEW.kind, NEW.size, NEW.reference)
        IS NOT (OLD.id, OLD.namespace, OLD.key, OLD.digest, OLD.kind, OLD.size, OLD.reference);
    UPDATE write_log SET written_at = CAST(round((julianday(NEW.written_at) - 2440587.5) * 86400000) AS INTEGER)
    WHERE id = OLD.id;
END;

DROP VIEW repeated_results;

CREATE VIEW repeated_results AS
SELECT
    digest,
    times_written,
    namespaces,
    size,
    bytes_deduplicated,
    strftime('%Y-%m-%d %H:%M:%S', first_ms / 1000, 'unixepoch') || printf('.%03d', first_ms % 1000) AS first_written,
    strftime('%Y-%m-%d %H:%M:%S', last_ms / 1000, 'unixepoch') || printf('.%03d', last_ms % 1000) AS last_written,
    example_key
FROM (
    SELECT
        coalesce(r.digest, b.digest) AS digest,
        count(*) AS times_written,
        count(DISTINCT r.namespace_id) AS namespaces,
        max(r.size) AS size,
        (count(*) - 1) * max(r.size) AS bytes_deduplicated,
        min(l.written_at) AS first_ms,
        max(l.written_at) AS last_ms,
        min(
            CAST(
                CASE WHEN l.key_stem_id IS NULL THEN l.key
                    ELSE coalesce(l.key_step || '_', '') || (SELECT s.stem FROM key_stems s WHERE s.id = l.key_stem_id)
                        || l.key
                END AS TEXT
            )
        ) AS example_key
    FROM write_log l
    JOIN namespace_references r ON r.id = l.reference_id
    LEFT JOIN blobs b ON b.id = r.blob_id
    GROUP BY coalesce(r.digest, b.digest)
    HAVING count(*) > 1
);
