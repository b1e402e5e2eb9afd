-- When a read or `verify` last found a blob's frame, file or object missing or failing its digest check; NULL while
-- none did. A write of the content treats such a blob as not stored: it stores it again and sets this back to NULL.
ALTER TABLE blobs ADD COLUMN lost_at TEXT;
