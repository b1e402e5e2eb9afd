-- The SQLite index's migration 0015 sets how eagerly FTS5 merges the search index's segments. PostgreSQL's search
-- index (pg_trgm's GIN index, made `fastupdate = off`: casstore/postgres_search.py) has no segments to merge, so
-- nothing changes here; the file keeps the two engines' migrations in step (the same names, in the same order).
SELECT 1;
