-- One row per tool result that a compactor replaced by references (filled by `DedupOffloadCompactor`).
CREATE TABLE offloads (
    id INTEGER PRIMARY KEY,
    compaction_id TEXT NOT NULL,                             -- shared by all offloads of one `compact` call
    namespace TEXT NOT NULL,
    tool_name TEXT NOT NULL,
    tool_call_id TEXT,                                       -- NULL when the tool call had no id
    refs TEXT NOT NULL,                                      -- JSON array of references, one per result part
    original_tokens INTEGER NOT NULL,                        -- tokens of the tool-result message before
    saved_tokens INTEGER NOT NULL,                           -- original_tokens minus the offloaded message's tokens
    offloaded_at TEXT NOT NULL                               -- UTC, 'YYYY-MM-DD HH:MM:SS.SSS'
);

CREATE INDEX offloads_by_time ON offloads (offloaded_at);
