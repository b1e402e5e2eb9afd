-- A store's dedup scope (docs/dedup-scope.md): under 'namespace' scope, the namespace whose key a blob's digest is
-- keyed with, which reads and verify re-hash its content with; NULL for a blob of the whole store (a plain BLAKE3
-- digest), as every blob under 'store' scope is. The scope and its secret are rows of store_settings.
ALTER TABLE blobs ADD COLUMN namespace TEXT;
