"""
What every table, view and column of the index means, and the questions the docs ask of it, as data: the source of
`casstore datasette-metadata`, kept equal to the docs by tests/test_datasette.py (every column of a fresh index is
described here, every column the docs' tables list is here, and every question in the docs is here, SQL and all).
"""

from dataclasses import dataclass

_TIMES = "UTC, 'YYYY-MM-DD HH:MM:SS.SSS'"


@dataclass(frozen=True, slots=True)
class Relation:
    """A table or view: what one row is, and each column's meaning."""

    description: str
    columns: dict[str, str]
    view: bool = False


RELATIONS: dict[str, Relation] = {
    "blobs": Relation(
        "One row per distinct piece of content. In SQLite a view (migration 0019) of blob_rows, which keeps the times "
        "as milliseconds; a row inserted, changed or deleted here by hand goes through to it.",
        {
            "id": "row id (blob_frames.blob_id)",
            "digest": "64 lower-case hex characters: the BLAKE3 hash of the content bytes (unique)",
            "size": "content bytes, uncompressed",
            "stored_size": "bytes of the zstd frame that holds it",
            "stored_in": "index (the frame is in blob_frames) or file (under blobs/); object in a shared store",
            "first_seen": f"when it was first stored ({_TIMES})",
            "last_seen": "when it was last written, by any namespace, to the second; gc never deletes a blob seen "
            "within its grace period",
        },
    ),
    "blob_rows": Relation(
        "What the view blobs shows, as stored (SQLite, migration 0019): the same rows and ids, the times as integer "
        "milliseconds since 1970-01-01 00:00:00 UTC. casstore's blob layer writes it.",
        {
            "id": "row id (blobs.id)",
            "digest": "64 lower-case hex characters (unique)",
            "size": "content bytes, uncompressed",
            "stored_size": "bytes of the zstd frame that holds it",
            "stored_in": "index or file",
            "first_seen": "when it was first stored, in milliseconds since 1970 (blobs shows it as text)",
            "last_seen": "when it was last written, in milliseconds since 1970, to the second",
        },
    ),
    "blob_frames": Relation(
        "The zstd frames of blobs stored in the index, apart from blobs so that refreshing last_seen or summing "
        "sizes never touches the frames' pages. A view (migration 0013) that puts each frame back together from "
        "frame_chunks, where frame_slots says it is; a frame written or deleted here goes through to them.",
        {
            "blob_id": "blobs.id",
            "frame": "the zstd frame (its content size inside)",
            "size": "content bytes, as in blobs (so a read of such a blob skips the blobs row)",
        },
    ),
    "frame_chunks": Relation(
        "The frames of blobs stored in the index, end to end (migration 0013): each row holds at most 4,057 bytes, "
        "the most a row keeps in one 4 KiB page, so frames fill the pages; a frame may run on into the next rows. "
        "gc deletes the rows no frame touches and moves the frames of rows mostly unused to the end.",
        {
            "id": "row id: the chunks' order (frame_slots.chunk)",
            "data": "frames, or parts of frames, end to end (bytes of frames gc has not yet moved away may be unused)",
        },
    ),
    "frame_slots": Relation(
        "Where the frame of each blob stored in the index is (migration 0013): one row per blob_frames row; and, "
        "since migration 0017, what a learned frame needs to decode (the rows of the view blob_dependencies).",
        {
            "blob_id": "blobs.id",
            "size": "content bytes, as in blobs",
            "chunk": "frame_chunks.id of the frame's first byte",
            "start": "where in that chunk the frame starts, from 0",
            "length": "the frame's bytes (blobs.stored_size)",
            "last_chunk": "frame_chunks.id of its last byte (every chunk between is full)",
            "needs_id": "blobs.id of the blob the frame needs (its dictionary or its delta's base); NULL: plain",
            "is_delta": "with a needs_id, 1 if the frame is a delta against it (its base), 0 if it is compressed with "
            "it (its dictionary); NULL without one",
        },
    ),
    "writes": Relation(
        "One row per call to write: the offload history. A view (migration 0011) over write_log, "
        "namespace_references and namespaces, with the columns the table of this name had; written_at can be set by "
        "hand (UPDATE writes SET written_at = ...), nothing else.",
        {
            "id": "increasing row id (write_log.id)",
            "namespace": "the writing store's namespace",
            "key": "the key the caller passed (Haystack's look like 3_read_file_call_1.txt); only recorded",
            "digest": "the content's digest (blobs.digest)",
            "kind": "text or binary",
            "size": "content bytes of this write",
            "reference": "what write returned",
            "written_at": f"when ({_TIMES})",
        },
        view=True,
    ),
    "visible_references": Relation(
        "One row per distinct (namespace, reference) pair in writes: what read checks before it asks for the blob. A "
        "view (migration 0011) of namespace_references, which casstore's index layer alone keeps.",
        {
            "digest": "blobs.digest",
            "namespace": "a namespace that may read the reference",
            "reference": "the reference",
        },
        view=True,
    ),
    "namespaces": Relation(
        "One row per namespace ever written in (kept when its writes are forgotten).",
        {
            "id": "row id (namespace_references.namespace_id)",
            "namespace": "the namespace (unique)",
        },
    ),
    "namespace_references": Relation(
        "One row per distinct (namespace, reference) written and not forgotten: a reference is visible in a namespace "
        "while its row is here. The reference is derived: blake3/, bin/ if binary, the digest's first two "
        "characters, /, the other 62, the extension.",
        {
            "id": "row id (write_log.reference_id)",
            "namespace_id": "namespaces.id",
            "digest": "NULL while the reference has its blob row (migration 0018: the digest is kept once, in "
            "blobs); the content's digest while the blob row is missing, so that the reference still names it",
            "is_binary": "1 if the content was written as bytes (kind binary, a blake3/bin/ reference), else 0",
            "extension": "the reference's extension, such as .txt, or an empty string",
            "size": "content bytes (blobs.size)",
            "blob_id": "blobs.id of the content, by which reads, writes and gc find the reference; NULL when the blob "
            "row is missing (a damaged index, which verify reports); triggers on blobs keep it",
        },
    ),
    "write_log": Relation(
        "One row per call to write, as stored: which namespace reference, the key, and when.",
        {
            "id": "increasing row id (writes.id)",
            "reference_id": "namespace_references.id",
            "key": "the key the caller passed, only recorded; since migration 0021 only its rest after the step and "
            "stem where key_stem_id is set (writes shows the whole key)",
            "written_at": "when, in milliseconds since 1970-01-01 00:00:00 UTC (writes shows it as text)",
            "key_step": "the number a Haystack key starts with (its step), where the key was split; else NULL",
            "key_stem_id": "key_stems.id of the key's stem (its tool's part), where the key was split; NULL: key is "
            "whole",
        },
    ),
    "key_stems": Relation(
        "One row per stem of the keys written (migration 0021): the part of a Haystack key that every write of its "
        "tool repeats, such as read_file_call, kept once.",
        {
            "id": "row id (write_log.key_stem_id)",
            "stem": "the stem's text; a key is its step and '_' (if it has one), the stem, then write_log.key",
        },
    ),
    "offloads": Relation(
        "One row per tool result that DedupOffloadCompactor replaced by references.",
        {
            "id": "increasing row id",
            "compaction_id": "shared by all offloads of one compact call (compactions.compaction_id; in the "
            "offloaded message's meta as meta['casstore']['compaction_id'])",
            "namespace": "the store's namespace",
            "tool_name": "which tool produced the result",
            "tool_call_id": "the tool call's id (NULL when the call had none)",
            "refs": "JSON array of references, one per result part (json_each(refs) lists them)",
            "original_tokens": "tokens of the tool-result message before",
            "saved_tokens": "original_tokens minus the tokens of the message that replaced it",
            "offloaded_at": f"when ({_TIMES})",
        },
    ),
    "offloaded_parts": Relation(
        "One row per part of each offloaded result, with the blob its reference names, found through the index of "
        "blobs by the digest the reference carries (migration 0018).",
        {
            "offload_id": "offloads.id",
            "compaction_id": "as in offloads",
            "namespace": "as in offloads",
            "tool_name": "as in offloads",
            "tool_call_id": "as in offloads",
            "part": "the part's place in offloads.refs, from 0",
            "reference": "the part's reference, as the compactor left it in the conversation",
            "digest": "its blob's digest, as in blobs; NULL once gc has deleted the blob",
            "size": "its blob's content bytes; NULL once gc has deleted the blob",
            "stored_size": "its blob's stored bytes; NULL once gc has deleted the blob",
            "stored_in": "where its blob is kept (index, file, object); NULL once gc has deleted the blob",
            "offloaded_at": f"as in offloads ({_TIMES})",
        },
        view=True,
    ),
    "compactions": Relation(
        "One row per compact call of DedupOffloadCompactor that found the conversation over its target: what the "
        "compaction did to the conversation.",
        {
            "id": "increasing row id",
            "compaction_id": "the call's id, shared by its offloads (offloads.compaction_id); unique",
            "namespace": "the store's namespace",
            "tokens_before": "the conversation's tokens when the call began",
            "tokens_after": "the conversation's tokens when it ended (equal to tokens_before when the call found "
            "nothing it could offload)",
            "target_tokens": "the tokens the call was asked to fit within (CompactionHook's target)",
            "context_window": "the model's context window in tokens; NULL unless the compactor was given "
            "context_window",
            "compacted_at": f"when ({_TIMES})",
        },
    ),
    "dedup_summary": Relation(
        "One row: what dedup and compression saved over the whole store.",
        {
            "writes": "rows in writes",
            "blobs": "rows in blobs",
            "logical_bytes": "bytes of every write",
            "unique_bytes": "bytes of each distinct result once",
            "stored_bytes": "bytes of the zstd frames",
            "dedup_ratio": "logical_bytes / unique_bytes",
            "compression_ratio": "unique_bytes / stored_bytes",
            "total_ratio": "logical_bytes / stored_bytes",
            "bytes_saved": "logical_bytes - stored_bytes",
        },
        view=True,
    ),
    "namespace_summary": Relation(
        "Writes per namespace.",
        {
            "namespace": "the namespace",
            "writes": "its writes",
            "distinct_results": "distinct digests it wrote",
            "logical_bytes": "bytes of its writes",
            "first_write": "its first write",
            "last_write": "its last write",
        },
        view=True,
    ),
    "repeated_results": Relation(
        "Content written more than once: how often the same output came back.",
        {
            "digest": "the content's digest",
            "times_written": "how many writes wrote it",
            "namespaces": "how many namespaces wrote it",
            "size": "its bytes",
            "bytes_deduplicated": "bytes not stored again: size x (times_written - 1)",
            "first_written": "its first write",
            "last_written": "its last write",
            "example_key": "one key it was written under (the least, by text)",
        },
        view=True,
    ),
    "offload_summary": Relation(
        "Offloads per namespace and tool.",
        {
            "namespace": "the namespace",
            "tool_name": "the tool",
            "offloads": "its offloaded results",
            "compactions": "compactions that offloaded it",
            "original_tokens": "tokens of those results before",
            "saved_tokens": "tokens offloading saved",
            "first_offload": "the first offload",
            "last_offload": "the last offload",
        },
        view=True,
    ),
    "blob_locations": Relation(
        "Each blob, with where it is kept and what a read of it needs (a frame kept in the index is what is read).",
        {
            "digest": "the blob's digest",
            "size": "content bytes",
            "stored_in": "index or file (object in a shared store)",
            "frame": "the zstd frame, for a blob kept in the index (NULL otherwise)",
            "encoding": "dictionary or delta for a blob that needs another to decode (NULL: plain)",
            "needs": "the digest of the blob it needs (its dictionary or its delta's base; NULL: plain)",
        },
        view=True,
    ),
    "readable_blobs": Relation(
        "Each reference a namespace may read, with its blob's location: what read asks in one statement (by blob_id, "
        "the id of the digest's blob row, namespace, is_binary and extension, which make the reference).",
        {
            "namespace": "the namespace that may read it",
            "reference": "the reference",
            "digest": "its blob's digest",
            "is_binary": "1 for a blake3/bin/ reference (content written as bytes), else 0",
            "extension": "the reference's extension, or an empty string",
            "size": "content bytes",
            "stored_in": "index or file (object in a shared store)",
            "frame": "the zstd frame, for a blob kept in the index (NULL otherwise)",
            "encoding": "dictionary or delta for a blob that needs another to decode (NULL: plain)",
            "needs": "the digest of the blob it needs (its dictionary or its delta's base; NULL: plain)",
            "blob_id": "blobs.id of its blob (NULL when the blob row is missing): what a read asks by",
        },
        view=True,
    ),
    "blob_dependencies": Relation(
        "One row per blob whose frame does not decode alone (docs/compression.md): what it needs. A blob without a "
        "row is plain. gc keeps a needed blob while anything needs it. In SQLite a view (migration 0017) of the "
        "frame_slots rows that need another blob (such frames are kept in the index only); a row written, changed or "
        "deleted here goes through to them, and one for a blob without a slot is refused. A table in PostgreSQL.",
        {
            "blob_id": "blobs.id of the blob whose frame needs another",
            "needs_id": "blobs.id of the blob it needs",
            "encoding": "dictionary (a trained zstd dictionary) or delta (an earlier content as its base)",
        },
    ),
    "dictionaries": Relation(
        "One row per trained zstd dictionary (its content is a blob like any other): one group of results each.",
        {
            "blob_id": "blobs.id of the dictionary's content",
            "tool": "the group: the tool name Haystack's keys carry",
            "samples": "how many results it was trained on",
            "sample_bytes": "their bytes",
            "trained_at": f"when it was trained ({_TIMES})",
            "active": "1 for the dictionary new writes of its group use, else 0 (kept while any blob needs it)",
        },
    ),
    "blob_encodings": Relation(
        "Each blob with its encoding and the blob it needs to decode, for a person reading the index.",
        {
            "digest": "the blob's digest",
            "encoding": "plain, dictionary or delta",
            "needs": "the digest of the blob it needs (NULL for plain)",
            "size": "content bytes",
            "stored_size": "bytes of its frame",
            "stored_in": "index or file (object in a shared store)",
        },
        view=True,
    ),
    "search_documents": Relation(
        "One row per blob in the search index (docs/search.md): the row of search_text that holds its trigrams.",
        {
            "id": "the document's id (search_text's rowid; never reused)",
            "digest": "blobs.digest",
            "size": "content bytes (blobs.size)",
            "tiebreak": "the digest's first 60 bits: an order no write changes",
        },
    ),
    "search_text": Relation(
        "SQLite FTS5 over each document's text as case-folded trigrams, without positions and without a copy of the "
        "text (the blob holds it): which documents hold every trigram of a term. (In a shared store's PostgreSQL "
        "index: each document's text, case-folded, under a pg_trgm trigram index.)",
        {"body": "the indexed text (not stored: content='')"},
    ),
    "search_entries": Relation(
        "One row per (namespace, blob) the search index holds: a search counts and ranks over its namespace's rows.",
        {
            "namespace": "the namespace that wrote it",
            "document": "search_documents.id",
            "size": "the document's size",
            "tiebreak": "the document's tiebreak",
            "write_id": "writes.id of the namespace's first write of it",
        },
    ),
    "search_namespaces": Relation(
        "Per namespace: how many results the search index holds for it and their bytes (its ranking statistics).",
        {"namespace": "the namespace", "documents": "its indexed results", "bytes": "their bytes"},
    ),
    "search_state": Relation(
        "One row once the search index is turned on.",
        {"id": "always 1", "enabled_at": f"when it was turned on ({_TIMES})"},
    ),
    "search_pending": Relation(
        "One row per result written with the search index on and not indexed yet: the writer indexes it after its "
        "write commits, in batches; a search of its namespace, or casstore search-index, indexes what a crash left.",
        {
            "namespace": "the namespace that wrote it",
            "digest": "blobs.digest",
            "write_id": "writes.id of the namespace's first write of it since",
        },
    ),
    "store_settings": Relation(
        "One row per setting of the store as a whole (migration 0022). A shared store keeps store_id and blob_url; "
        "the local store keeps none.",
        {"name": "the setting: store_id or blob_url", "value": "its value"},
    ),
    "_sqlite_migrations": Relation(
        "sqlite-utils' record of the applied schema migrations.",
        {
            "id": "row id",
            "migration_set": "always casstore",
            "name": "the migration, such as 0005_frame_sizes_for_reads",
            "applied_at": "when it was applied (UTC, as 2026-11-30 15:59:54.368664+00:00)",
        },
    ),
}


@dataclass(frozen=True, slots=True)
class Question:
    """A question the docs ask of the index, with the query that answers it (SQLite)."""

    name: str
    title: str
    sql: str


# The docs' questions, in their order; the SQL is exactly what the docs show under each `-- title` line.
QUESTIONS: tuple[Question, ...] = (
    Question(
        "savings",
        "How much did dedup and compression save?",
        "SELECT writes, blobs, logical_bytes, stored_bytes, dedup_ratio, compression_ratio, total_ratio FROM "
        "dedup_summary;",
    ),
    Question(
        "repeated",
        "Which outputs kept coming back, and how much did storing them once save?",
        "SELECT times_written, size, bytes_deduplicated, example_key FROM repeated_results\n"
        "ORDER BY bytes_deduplicated DESC LIMIT 10;",
    ),
    Question(
        "last_day_by_tool",
        "What did compaction do in the last day, tool by tool?",
        "SELECT tool_name, count(*) AS offloads, sum(saved_tokens) AS tokens_saved\n"
        "FROM offloads WHERE offloaded_at >= datetime('now', '-1 day')\n"
        "GROUP BY tool_name ORDER BY tokens_saved DESC;",
    ),
    Question(
        "each_compaction",
        "What did each compaction do, in order? (one line per compact call)",
        "SELECT compaction_id, min(offloaded_at) AS at, count(*) AS results, sum(saved_tokens) AS tokens_saved\n"
        "FROM offloads GROUP BY compaction_id ORDER BY at;",
    ),
    Question(
        "window",
        "How close did each compaction bring the conversation to its target and window?",
        "SELECT compacted_at, namespace, tokens_before, tokens_after, target_tokens, context_window\n"
        "FROM compactions ORDER BY compacted_at;",
    ),
    Question(
        "every_part",
        "Every part of every offloaded result, with its size and where it is stored.",
        "SELECT tool_name, tool_call_id, reference, size, stored_size, stored_in\n"
        "FROM offloaded_parts ORDER BY offload_id, part;",
    ),
    Question(
        "encodings",
        "How many blobs of each encoding, their bytes and what they hold.",
        "SELECT encoding, count(*) AS blobs, sum(stored_size) AS stored_bytes, sum(size) AS content_bytes\n"
        "FROM blobs GROUP BY encoding ORDER BY encoding;",
    ),
    Question(
        "dictionaries",
        "The dictionaries: which tool, trained on what, in use or retired, and how many blobs need each.",
        "SELECT d.tool, d.samples, d.sample_bytes, d.active, length(d.data) AS bytes,\n"
        "       (SELECT count(*) FROM blobs b WHERE b.dictionary_id = d.id) AS blobs_using_it\n"
        "FROM dictionaries d ORDER BY d.tool, d.trained_at;",
    ),
    Question(
        "deltas",
        "Deltas and their bases: how much smaller each delta is than its content.",
        "SELECT b.digest, base.digest AS base, b.size, b.stored_size, round(1.0 * b.size / b.stored_size, 1) AS ratio\n"
        "FROM blobs b JOIN blobs base ON base.id = b.base_id ORDER BY ratio DESC LIMIT 10;",
    ),
)
