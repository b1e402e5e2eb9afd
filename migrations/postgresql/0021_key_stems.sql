-- Nothing changes in PostgreSQL: the shared index keeps every key whole in `write_log.key`. SQLite's 0021 keeps a
-- Haystack key's step as an integer and its stem once, in `key_stems`, to take a third off the local store's history
-- rows; a shared index records a repeated write in its stored function (0007, 0016) in one round trip, which would
-- then look the stem up too, and its rows are paid in pages of a server's disk, not of the user's. The file keeps the
-- two engines' migrations numbered alike.
SELECT 1;
