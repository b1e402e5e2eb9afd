"""
The search index: which stored results hold a text, per namespace.

- `index`: the `search_*` tables, SQLite's FTS5 trigrams, what is indexed when.
- `postgres`: the same on PostgreSQL's `pg_trgm`.
- `exact_match`, `results`: grading a candidate and ranking the hits.

Built on `casstore.index`; the repository runs it.
"""
