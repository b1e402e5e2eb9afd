-- Nothing changes in PostgreSQL. SQLite's 0019 keeps a blob's `first_seen` and `last_seen` as integer milliseconds
-- in the table `blob_rows`, under a view `blobs` that shows them as the text they were, which takes about a third off
-- each of its rows in the file the store's `du` counts. A shared index keeps `blobs` a table with text times: its size
-- is the server's, the blob layer's statements that write a blob's row are the one place the two engines differ, and
-- what a person reads of `blobs` (its columns, its times as text) is the same on both. The file keeps the two
-- engines' migrations numbered alike.
SELECT 1;
