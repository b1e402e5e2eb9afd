-- Settings of the store as a whole, one row per setting. A shared store keeps two (PostgreSQL migration 0022):
-- `store_id`, a random id that the marker object at its blob location names too, and `blob_url`, where its blob
-- objects are. The local store keeps none: its blobs are in its own folder.
CREATE TABLE store_settings (
    name TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
