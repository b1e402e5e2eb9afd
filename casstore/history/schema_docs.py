"""
What every table, view and column of the index means, and the questions the docs ask of it, as data: the source of
`casstore datasette-metadata`, kept equal to the docs by tests/history/test_datasette_metadata.py (every column of
a fresh index is described here, every column the docs' tables list is here, and every question in the docs is here,
SQL and all).
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
        "One row per distinct piece of content (a blob), wherever its frame is, and how to decode it.",
        {
            "id": "row id (blob_frames.blob_id, blobs.base_id)",
            "digest": "64 lower-case hex characters: the BLAKE3 hash of the content bytes (unique)",
            "size": "content bytes, uncompressed",
            "stored_size": "bytes of the zstd frame that holds it",
            "stored_in": "index (the frame is in blob_frames) or file (under blobs/); object in a shared store",
            "encoding": "plain (zstd alone), dictionary (zstd with the dictionary dictionary_id) or delta (zstd "
            "against the content of the blob base_id)",
            "dictionary_id": "dictionaries.id of the dictionary it was compressed with; NULL unless encoding is "
            "dictionary",
            "base_id": "blobs.id of the blob it is a delta on; NULL unless encoding is delta",
            "first_seen": f"when it was first stored ({_TIMES})",
            "last_seen": "when it was last written, by any namespace, to the second; gc never deletes a blob seen "
            "within its grace period",
            "namespace": "under dedup scope namespace, the namespace whose key its digest is keyed with; NULL for a "
            "blob of the whole store (every blob under dedup scope store)",
            "lost_at": "when a read or verify found its stored frame (in blob_frames, a file or an object) missing or "
            f"damaged ({_TIMES}); NULL normally. The next write of the content stores it again and clears it",
        },
    ),
    "blob_frames": Relation(
        "The zstd frames of blobs kept inside the index (stored_in = 'index'), one row each, apart from blobs so "
        "that refreshing last_seen or summing sizes never touches the frames' pages.",
        {"blob_id": "blobs.id", "frame": "the blob's exact stored bytes: a zstd frame, its content size inside"},
    ),
    "write_rows": Relation(
        "One row per call to write: the offload history, naming its blob by id (the view writes shows the digest "
        "and the reference). A reference is visible (readable) in a namespace while a row of that namespace names "
        "its blob.",
        {
            "id": "increasing row id",
            "namespace": "the writing store's namespace",
            "key": "the key the caller passed (Haystack's look like 3_read_file_call_1.txt); only recorded",
            "blob_id": "blobs.id of the content",
            "kind": "text or binary",
            "extension": "the reference's extension, such as .txt, or empty",
            "size": "content bytes of this write",
            "written_at": f"when ({_TIMES})",
        },
    ),
    "writes": Relation(
        "One row per call to write, as people query it: write_rows with its blob's digest and the reference write "
        "returned. A read-only view.",
        {
            "id": "increasing row id (write_rows.id)",
            "namespace": "the writing store's namespace",
            "key": "the key the caller passed (Haystack's look like 3_read_file_call_1.txt); only recorded",
            "digest": "the content's digest (blobs.digest)",
            "kind": "text or binary",
            "extension": "the reference's extension, such as .txt, or empty",
            "size": "content bytes of this write",
            "written_at": f"when ({_TIMES})",
            "reference": "what write returned (made from digest, kind and extension)",
        },
        view=True,
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
        "blobs by the digest the reference carries.",
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
        "One row per compact call of DedupOffloadCompactor that found the conversation over its target, and per "
        "archive of StepArchiveCompactor: what the compaction did to the conversation.",
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
    "archives": Relation(
        "One row per transcript StepArchiveCompactor wrote: the messages it took out of the conversation, stored as "
        "one readable text (with its images and files beside it), which the note left in their place names.",
        {
            "id": "increasing row id",
            "compaction_id": "the compact call that archived them (compactions.compaction_id; in the note's meta as "
            "meta['casstore']['compaction_id'])",
            "namespace": "the store's namespace",
            "refs": "JSON array of references: the transcript first, then each image or file stored beside it",
            "messages": "messages archived, an earlier archive's note included",
            "first_step": "the first step archived, numbered across the run; NULL when no step was among them",
            "last_step": "the last step archived; NULL when no step was among them",
            "original_tokens": "tokens of the archived messages",
            "saved_tokens": "tokens the conversation lost by the archive, the note that replaced them counted",
            "archived_at": f"when ({_TIMES})",
        },
    ),
    "archived_parts": Relation(
        "One row per part of each archive (its transcript, then its images and files), with the blob its reference "
        "names, as offloaded_parts has for offloads.",
        {
            "archive_id": "archives.id",
            "compaction_id": "as in archives",
            "namespace": "as in archives",
            "first_step": "as in archives",
            "last_step": "as in archives",
            "messages": "as in archives",
            "part": "the part's place in archives.refs, from 0 (0 is the transcript)",
            "reference": "the part's reference",
            "digest": "blobs.digest of its content; NULL if that blob is gone",
            "size": "its content bytes; NULL if that blob is gone",
            "stored_size": "its stored bytes; NULL if that blob is gone",
            "stored_in": "where it is stored (as blobs.stored_in); NULL if that blob is gone",
            "archived_at": f"as in archives ({_TIMES})",
        },
        view=True,
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
    "dictionaries": Relation(
        "One row per trained zstd dictionary: its bytes, when and from what it was trained, and whether new writes "
        "of its group use it.",
        {
            "id": "row id (blobs.dictionary_id)",
            "tool": "the group: the tool name Haystack's keys carry",
            "digest": "the BLAKE3 hash of data, checked whenever it is read",
            "data": "the dictionary's bytes",
            "samples": "how many results it was trained on",
            "sample_bytes": "their bytes",
            "trained_at": f"when it was trained ({_TIMES})",
            "active": "1 for the dictionary new writes of its group use, else 0 (kept while any blob needs it)",
        },
    ),
    "dictionary_samples": Relation(
        "The results each dictionary was trained on: its bytes hold fragments of them, so gc deletes a dictionary "
        "whose samples are all deleted once no kept blob needs it.",
        {"dictionary_id": "dictionaries.id", "digest": "blobs.digest of a result it was trained on"},
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
        "One row per setting of the store as a whole: every store its dedup_scope (and under namespace scope its "
        "dedup_secret); a shared store also store_id and blob_url.",
        {"name": "the setting: dedup_scope, dedup_secret, store_id or blob_url", "value": "its value"},
    ),
    "_sqlite_migrations": Relation(
        "sqlite-utils' record of the applied schema migrations.",
        {
            "id": "row id",
            "migration_set": "always casstore",
            "name": "the migration, such as 0001_baseline",
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
