-- Nothing changes in PostgreSQL: `blob_frames` stays a table. SQLite's 0013 lays frames end to end in page-sized rows
-- because its b-tree starts a new page for a row that does not fit what is left of the last one, so frames of 1 to 4
-- KB left parts of most pages unused. PostgreSQL's heap puts a row on any page with room (its free space map), and
-- keeps a value over about 2 KB out of line in TOAST chunks of about 2 KB, four to a page. The file keeps the two
-- engines' migrations numbered alike.
SELECT 1;
