-- Nothing to do in the PostgreSQL index yet. The SQLite index's migration of this name adds the search index
-- (SQLite FTS5); the shared store has none, and refuses `search_index=True` with a message saying so (see
-- docs/search.md). The file exists so that both indexes have migrations of the same names, in the same order.
SELECT 1;
