-- One row per `compact` call of `DedupOffloadCompactor` that found the conversation over its target: the
-- conversation's size before and after it, against the target (and the model's window, when the compactor was told).
CREATE TABLE compactions (
    id INTEGER PRIMARY KEY,
    compaction_id TEXT NOT NULL UNIQUE,                      -- offloads.compaction_id of the offloads it made
    namespace TEXT NOT NULL,
    tokens_before INTEGER NOT NULL,                          -- the conversation's tokens when the call began
    tokens_after INTEGER NOT NULL,                           -- and when it ended (= tokens_before: nothing offloaded)
    target_tokens INTEGER NOT NULL,                          -- what the call was asked to fit within
    context_window INTEGER,                                  -- the model's window in tokens; NULL unless known
    compacted_at TEXT NOT NULL                               -- UTC, 'YYYY-MM-DD HH:MM:SS.SSS'
);

CREATE INDEX compactions_by_time ON compactions (compacted_at);
