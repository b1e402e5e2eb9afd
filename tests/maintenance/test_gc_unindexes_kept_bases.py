"""
Deleted means deleted, for the search index: a deleted result that gc keeps only as the delta base of a kept one
keeps its bytes for the blob layer, but its text leaves the search index in the same run, on both engines; a later
write of it makes it searchable again.
"""

import contextlib
import os
import random
import sqlite3
from datetime import timedelta
from pathlib import Path

from casstore.maintenance.checks import collect_garbage
from tests.store_backends import Backend, LocalBackend

_LETTERS = "αβγδεζηθικλμνξοπρστυφχψω"


def _near_copies() -> tuple[str, str, str]:
    """:returns: Alice's text with a secret at its end, bob's near-copy of it without the secret, and the secret."""
    rng = random.Random(11)
    secret = "alicesecret" + os.urandom(16).hex()
    shared = "shared head " * 30 + " ".join("".join(rng.choice(_LETTERS) for _ in range(7)) for _ in range(150))
    return f"{shared} {secret} tail", f"{shared} bob ending words here " + "z" * 280, secret


def _trigrams(text: str) -> set[str]:
    folded = text.lower()
    return {folded[index : index + 3] for index in range(len(folded) - 2)}


def _files_holding(root: Path, needle: bytes) -> list[str]:
    paths = sorted(path for path in root.rglob("*") if path.is_file())
    return [str(path.relative_to(root)) for path in paths if needle in path.read_bytes()]


def _secret_kept_by_search_index(backend: Backend, secret: str, *, only_alice: set[str]) -> list[str]:
    """:returns: Where the search index still holds the secret (or alice's document): empty once it is gone."""
    found = []
    if isinstance(backend, LocalBackend):
        found += [f"file {name}" for name in _files_holding(backend.root, secret.encode())]
        with contextlib.closing(sqlite3.connect(backend.root / "index.db")) as connection:
            # Every term of every FTS5 segment of the trigram table.
            connection.execute("CREATE VIRTUAL TABLE temp.terms USING fts5vocab(main, search_text, row)")
            terms = {row[0] for row in connection.execute("SELECT term FROM temp.terms")}
        found += [f"trigram {term!r}" for term in sorted(terms & only_alice)]
    else:
        tables = [
            row[0]
            for row in backend.rows(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() "
                "AND table_name LIKE ?",
                ("search%",),
            )
        ]
        assert "search_text" in tables  # the check below can look where the text would be
        for table in tables:
            held = backend.rows(f"SELECT count(*) FROM {table} t WHERE lower(t::text) LIKE ?", (f"%{secret}%",))
            if held[0][0]:
                found.append(f"{held[0][0]} row(s) of {table}")
    return found


def test_a_deleted_result_kept_as_a_delta_base_leaves_the_search_index(backend: Backend) -> None:
    alice_text, bob_text, secret = _near_copies()
    only_alice = _trigrams(secret) - _trigrams(bob_text)
    alice = backend.open(namespace="alice", search_index=True)
    alice.write(key="1_read_file_call_1.txt", content=alice_text)
    bob = backend.open(namespace="bob", search_index=True)
    bob_reference = bob.write(key="2_read_file_call_2.txt", content=bob_text)
    alice_digest, bob_digest = (
        backend.rows("SELECT digest FROM writes WHERE namespace = ?", (name,))[0][0] for name in ("alice", "bob")
    )
    # Bob's result is stored as a delta on alice's: gc must keep alice's blob for it.
    base = "SELECT base.digest FROM blobs b JOIN blobs base ON base.id = b.base_id WHERE b.digest = ?"
    assert backend.rows(base, (bob_digest,)) == [(alice_digest,)]
    assert alice.search(terms=[secret]).hits
    assert _secret_kept_by_search_index(backend, secret, only_alice=only_alice)  # the check below can fail

    report = collect_garbage(bob, namespace="alice", grace=timedelta(0))

    assert report.writes_forgotten == 1
    assert report.bases_kept == 1
    assert backend.rows("SELECT count(*) FROM blobs WHERE digest = ?", (alice_digest,)) == [(1,)]
    assert backend.rows("SELECT count(*) FROM search_documents WHERE digest = ?", (alice_digest,)) == [(0,)]
    assert _secret_kept_by_search_index(backend, secret, only_alice=only_alice) == []
    assert bob.read(bob_reference) == bob_text
    assert [hit.reference for hit in bob.search(terms=["bob ending words"]).hits] == [bob_reference]
    assert not bob.search(terms=[secret]).hits


def test_a_kept_base_written_again_is_searchable_again(backend: Backend) -> None:
    alice_text, bob_text, secret = _near_copies()
    alice = backend.open(namespace="alice", search_index=True)
    alice.write(key="1_read_file_call_1.txt", content=alice_text)
    bob = backend.open(namespace="bob", search_index=True)
    bob.write(key="2_read_file_call_2.txt", content=bob_text)
    collect_garbage(bob, namespace="alice", grace=timedelta(0))
    assert not alice.search(terms=[secret]).hits

    again = alice.write(key="3_read_file_call_3.txt", content=alice_text)
    copied = bob.write(key="4_read_file_call_4.txt", content=alice_text)

    assert [hit.reference for hit in alice.search(terms=[secret]).hits] == [again]
    assert [hit.reference for hit in bob.search(terms=[secret]).hits] == [copied]
    assert backend.count("search_documents") == 2
