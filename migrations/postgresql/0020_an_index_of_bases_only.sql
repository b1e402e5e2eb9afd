-- Nothing changes in PostgreSQL: `blob_dependencies` keeps its index `blob_dependencies_by_needs` (0008), which gc's
-- question "does any blob still need this one?" reads. SQLite's 0020 keeps the deltas' dependencies in a smaller
-- partial index and answers the question for a dictionary by reading its slots; PostgreSQL has no slots, and its
-- writes are paid in round trips, not in pages. The file keeps the two engines' migrations numbered alike.
SELECT 1;
