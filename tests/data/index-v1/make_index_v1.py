"""
Makes the checked-in index of the first schema version (`index.db` and `blobs/` beside this file) with the code of
commit 1826268 ("Review fixes: fork-safe connection, ..."): migrations 0001 to 0003, as they still read today. The
first commit, 107e11c, had another 0001 (frames in `blobs`, no `blob_frames` or `visible_references`), rewritten in
1468c18 and 1826268, so 1826268 is the earliest code whose index today's migrations can upgrade.
`tests/index/test_migrations.py` opens a copy with today's code.

Made so, from the repository root (the old commit's `migrations/` installs as `casstore.migrations`):

    mkdir /tmp/old /tmp/oldlayout && git archive 1826268 | tar -x -C /tmp/old
    cp -r /tmp/old/casstore /tmp/oldlayout/ && cp -r /tmp/old/migrations /tmp/oldlayout/casstore/
    PYTHONPATH=/tmp/oldlayout .venv/bin/python tests/data/index-v1/make_index_v1.py /tmp/index-v1
    cp /tmp/index-v1/index.db tests/data/index-v1/ && cp -r /tmp/index-v1/blobs tests/data/index-v1/

`WRITES` and `OFFLOAD` are also what the test expects to find: it loads this file without running `main`.
"""

import random
import sys

INLINE_MAX = 1024  # small, so a few KB of content make blob files too
_LARGE_TEXT = "".join(f"{random.Random(n).getrandbits(64):016x} line {n}\n" for n in range(120))  # ~3 KB frame
_LARGE_BINARY = random.Random(2025).randbytes(2500)  # incompressible: a file

# (namespace, key, content): text, binary, repeats within and across namespaces, and blobs in files.
WRITES: list[tuple[str, str, str | bytes]] = [
    ("alice", "0_search_call_1.txt", "3 results for 'zstd frame format'"),
    ("alice", "1_render_call_1.png", b"\x89PNG\r\n\x1a\n" + bytes(range(64))),
    ("alice", "2_search_call_2.txt", "3 results for 'zstd frame format'"),  # a repeat: one blob
    ("alice", "3_read_file_call_1.log", _LARGE_TEXT),
    ("alice", "4_empty.txt", ""),
    ("bob", "0_search_call_1.txt", "3 results for 'zstd frame format'"),  # alice's content, in another namespace
    ("bob", "1_read_file_call_1.log", _LARGE_TEXT),
    ("bob", "2_dump.bin", _LARGE_BINARY),
    ("bob", "3_same_bytes_as_text", b"3 results for 'zstd frame format'"),  # bytes of a text blob: one blob
]
# One offload in alice's namespace, referencing the repeated search result.
OFFLOAD = {
    "compaction_id": "compaction-v1",
    "tool_name": "search",
    "tool_call_id": "call_1",
    "original_tokens": 120,
    "saved_tokens": 80,
}


def main(root: str) -> None:
    from casstore import ContentAddressedToolResultStore
    from casstore.index.schema import MIGRATION_NAMES
    from casstore.index.writes import OffloadRecord

    assert MIGRATION_NAMES == ("0001_blobs_and_writes", "0002_offloads", "0003_summary_views"), MIGRATION_NAMES
    stores = {
        namespace: ContentAddressedToolResultStore(root, namespace=namespace, inline_max=INLINE_MAX)
        for namespace in ("alice", "bob")
    }
    references = [stores[namespace].write(key=key, content=content) for namespace, key, content in WRITES]
    print("\n".join(references))
    record = OffloadRecord(
        tool_name=OFFLOAD["tool_name"],
        tool_call_id=OFFLOAD["tool_call_id"],
        references=[references[0]],
        original_tokens=OFFLOAD["original_tokens"],
        saved_tokens=OFFLOAD["saved_tokens"],
    )
    stores["alice"].record_offloads(compaction_id=OFFLOAD["compaction_id"], offloads=[record])
    for store in stores.values():
        store.close()


if __name__ == "__main__":
    main(sys.argv[1])
