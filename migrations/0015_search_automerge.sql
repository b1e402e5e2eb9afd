-- The search index's trigrams (search_text, migration 0009) merged more eagerly: FTS5 merges a level's segments once
-- it holds 2 of them rather than 4 (its default), so a term's look-up reads about half as many segments. Measured on
-- the benchmark trace (docs/search.md): a phrase's look-up took half the time, building the index no longer, and
-- the index was no larger. The setting is kept in search_text_config, so it holds for every later write, and
-- segments already there merge as writes go on.
INSERT INTO search_text (search_text, rank) VALUES ('automerge', 2);
