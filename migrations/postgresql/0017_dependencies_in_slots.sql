-- Nothing changes in PostgreSQL: `blob_dependencies` stays a table. SQLite's 0017 moves a learned frame's dependency
-- into the frame's `frame_slots` row, which PostgreSQL does not have (its 0013 is empty: `blob_frames` stays a table
-- of one row per frame). What 0017 saves in SQLite is a b-tree and its index, the pages of both in each learned
-- write's commit, and their partly used pages on disk; PostgreSQL's heap puts a row on any page with room, and a
-- shared store's write is paid in round trips to the server, not in pages (the blob layer's statements are the same
-- on both engines, and read `blob_dependencies` either way). The file keeps the two engines' migrations numbered alike.
SELECT 1;
