"""
The blob layer: content by digest.

- `frames`: the codec (zstd frames; trained dictionaries; deltas on earlier blobs; checked on every read).
- `learning`: training dictionaries and choosing delta bases from what was written.
- `catalog`: the `blobs` rows, where each blob lives and how it is encoded; frames kept inside the index.
- `files`, `objects`: the two backends for blobs too large for the index (a folder; an S3-compatible bucket),
  each behind the small `BlobBackend` interface in `catalog`; `location` and `object_checks` guard where a shared
  store's objects are.
- `hints`: what this process already knows is stored, so a repeated write skips a lookup.

Built on `casstore.index` (its tables hold the catalog and the small frames).
"""
