"""
The blob layer: content by digest.

- `store`: `BlobStore`, the layer as the repository sees it; it wires the parts below and hands out their verbs.
- `frames`: the codec (zstd frames; trained dictionaries; deltas on earlier blobs; checked on every read).
- `learning`: training dictionaries and choosing delta bases from what was written; `groups`: which results
  share a dictionary.
- `encoder`: staging new content: the choice of plain, dictionary or delta frame, and the backend write.
- `catalog`: the `blobs` rows (where each blob lives, how it is encoded), frames kept inside the index, and the
  trained dictionaries' rows, written in the caller's transaction.
- `lookup`, `decoder`: reading: where a blob is, then its content, a learned frame's chain resolved and verified.
- `collection`: what gc and verify ask of the catalog and delete.
- `memory`, `hints`: what a process keeps between writes and reads (verified dictionaries and bases; what is stored).
- `backend`: the small `BlobBackend` interface for blobs too large for the index; `files` and `objects` are its two
  implementations (a folder; an S3-compatible bucket); `location` and `object_checks` guard where a shared store's
  objects are.

Built on `casstore.index` (its tables hold the catalog and the small frames).
"""
