-- The transcripts StepArchiveCompactor wrote for the messages it took out of a conversation, one row per archive.
-- Its compaction is a row of `compactions` with the same compaction_id.
CREATE TABLE archives (
    id INTEGER PRIMARY KEY,
    compaction_id TEXT NOT NULL,                             -- compactions.compaction_id of the call that archived
    namespace TEXT NOT NULL,
    refs TEXT NOT NULL,                                      -- JSON array: the transcript, then its images and files
    messages INTEGER NOT NULL,                               -- messages archived, an earlier archive's note included
    first_step INTEGER,                                      -- steps archived, numbered across the run; NULL when
    last_step INTEGER,                                       -- no assistant message was among them
    original_tokens INTEGER NOT NULL,                        -- tokens of the archived messages
    saved_tokens INTEGER NOT NULL,                           -- tokens the conversation lost, the note counted
    archived_at TEXT NOT NULL
);
CREATE INDEX archives_by_time ON archives (archived_at);

CREATE VIEW archived_parts AS
SELECT
    a.id AS archive_id,
    a.compaction_id,
    a.namespace,
    a.first_step,
    a.last_step,
    a.messages,
    CAST(part.key AS INTEGER) AS part,
    part.value AS reference,
    b.digest,
    b.size,
    b.stored_size,
    b.stored_in,
    a.archived_at
FROM archives a
JOIN json_each(a.refs) part
LEFT JOIN blobs b ON b.digest = replace(
    substr(part.value, CASE WHEN substr(part.value, 1, 11) = 'blake3/bin/' THEN 12 ELSE 8 END, 65), '/', ''
);
