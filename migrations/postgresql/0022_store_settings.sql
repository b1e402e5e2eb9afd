-- The same table as the SQLite index's `store_settings` (see migrations/0022_store_settings.sql). A shared store
-- records `store_id` and `blob_url` here when it is made (casstore/blob_location.py).
CREATE TABLE store_settings (
    name TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
