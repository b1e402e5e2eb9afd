-- Nothing changes in PostgreSQL: `blob_dependencies` keeps its index `blob_dependencies_by_needs` (0008). SQLite's 0020
-- drops the partial index of what its slots need, which every learned write paid a page of at its commit; gc asks
-- both engines the same way now (the ids of the blobs something needs, once per batch of deletions), which on
-- PostgreSQL reads that index. The file keeps the two engines' migrations numbered alike.
SELECT 1;
