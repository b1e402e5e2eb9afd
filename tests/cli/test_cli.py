"""The `casstore` command, through click's runner and as a real subprocess, on stores the tests build."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from casstore import ArchiveRecord, CompactionRecord, ContentAddressedToolResultStore, OffloadRecord
from casstore.cli import cli, parse_duration
from casstore.maintenance import checks as maintenance
from tests.helpers import (
    blake3_hex,
    blob_files,
    count_rows,
    create_store,
    inline_frame,
    open_index,
    replace_inline_frame,
    tree_fingerprint,
)

SOURCE = Path(__file__).read_text()
LARGE = "x = 1\n" * 20_000


def _invoke(*arguments: str) -> Result:
    return CliRunner().invoke(cli, list(arguments), catch_exceptions=False)


def _one_line_error(result: Result) -> str:
    assert result.exit_code != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.output + result.stderr
    return lines[0]


@pytest.fixture
def built(store_root: Path) -> dict[str, str]:
    """A store with two namespaces, repeated results, a large blob, a binary one, and offloads."""
    references = {}
    with ContentAddressedToolResultStore(store_root, namespace="alice", inline_max=4096) as alice:
        for attempt in range(3):
            references["source"] = alice.write(key=f"{attempt}_read_file.txt", content=SOURCE)
        references["large"] = alice.write(key="big.log", content=LARGE)
        references["png"] = alice.write(key="plot.png", content=b"\x89PNG\r\n\x1a\n" + bytes(range(256)))
        alice.record_offloads(
            compaction_id="c1",
            offloads=[
                OffloadRecord("read_file", "call_1", [references["source"]], 900, 850),
                OffloadRecord("read_file", "call_2", [references["large"]], 30_000, 29_950),
                OffloadRecord("render", None, [references["png"]], 100, 60),
            ],
        )
    with ContentAddressedToolResultStore(store_root, namespace="bob", inline_max=4096) as bob:
        references["bob"] = bob.write(key="0_search.txt", content=SOURCE)
        references["bob_only"] = bob.write(key="1_search.txt", content="bob's own result\n" * 400)
        bob.record_offloads(compaction_id="c2", offloads=[OffloadRecord("search", "s1", [references["bob"]], 900, 840)])
    return references


def test_stats_match_the_index(store_root: Path, built: dict[str, str]) -> None:
    result = _invoke("stats", "--root", str(store_root), "--json")
    figures = json.loads(result.output)
    with open_index(store_root) as connection:
        writes, blobs, logical = connection.execute("SELECT writes, blobs, logical_bytes FROM dedup_summary").fetchone()
    assert (
        (figures["writes"], figures["blobs"], figures["logical_bytes"]) == (writes, blobs, logical) == (7, 4, logical)
    )
    assert logical == 4 * len(SOURCE.encode()) + len(LARGE) + 264 + len("bob's own result\n" * 400)
    assert figures["dedup_ratio"] > 1
    assert {row["namespace"]: row["writes"] for row in figures["namespaces"]} == {"alice": 5, "bob": 2}
    assert {(row["namespace"], row["tool_name"]): row["saved_tokens"] for row in figures["tools"]} == {
        ("alice", "read_file"): 850 + 29_950,
        ("alice", "render"): 60,
        ("bob", "search"): 840,
    }
    table = _invoke("stats", "--root", str(store_root)).output
    assert "dedup ratio" in table and "read_file" in table and "bob" in table


def test_log_lists_offloads_newest_first_with_filters(store_root: Path, built: dict[str, str]) -> None:
    entries = json.loads(_invoke("log", "--root", str(store_root), "--json").output)
    # alice's `{n}_read_file.txt` have the offload hook's shape, but no call id tells `read` from `read_file`.
    assert [(entry["source"], entry["tool_name"], entry["key"]) for entry in entries] == [
        ("compactor", "search", None),
        ("compactor", "render", None),
        ("compactor", "read_file", None),
        ("compactor", "read_file", None),
        *[("hook", None, f"{attempt}_read_file.txt") for attempt in (2, 1, 0)],
    ]
    assert entries[0]["references"] == [built["bob"]]
    only_alice = json.loads(_invoke("log", "--root", str(store_root), "--namespace", "alice", "--json").output)
    assert {entry["namespace"] for entry in only_alice} == {"alice"}
    assert len(only_alice) == 6
    only_render = _invoke("log", "--root", str(store_root), "--tool", "render").output.strip().splitlines()
    assert len(only_render) == 1 and built["png"] in only_render[0] and "saved 60/100 tokens" in only_render[0]
    with open_index(store_root) as connection:
        connection.execute("UPDATE offloads SET offloaded_at = '2020-01-01 00:00:00.000' WHERE tool_name = 'render'")
    recent = json.loads(_invoke("log", "--root", str(store_root), "--since", "1d", "--json").output)
    assert "render" not in {entry["tool_name"] for entry in recent} and len(recent) == 6


def test_cat_prints_content_windows_and_binary(store_root: Path, built: dict[str, str], tmp_path: Path) -> None:
    root = str(store_root)
    assert _invoke("cat", built["source"], "--root", root, "--namespace", "alice").output == SOURCE
    window = _invoke("cat", built["source"], "--root", root, "--namespace", "alice", "--lines", "2:4").output
    assert window == "".join(SOURCE.splitlines(keepends=True)[1:4])
    assert _invoke("cat", built["large"], "--root", root, "--namespace", "alice", "--lines", "19999:").output == (
        "x = 1\n" * 2
    )
    out = tmp_path / "plot.png"
    _invoke("cat", built["png"], "--root", root, "--namespace", "alice", "-o", str(out))
    assert out.read_bytes() == b"\x89PNG\r\n\x1a\n" + bytes(range(256))
    piped = subprocess.run(
        [sys.executable, "-m", "casstore", "cat", built["png"], "--root", root, "--namespace", "alice"],
        capture_output=True,
        check=True,
    )
    assert piped.stdout == out.read_bytes()


def test_cat_to_a_name_ending_in_a_separator_is_refused_and_writes_nothing(
    store_root: Path, built: dict[str, str], tmp_path: Path
) -> None:
    arguments = ["cat", built["png"], "--root", str(store_root), "--namespace", "alice"]
    result = _invoke(*arguments, "-o", f"{tmp_path / 'plots'}/")
    assert result.exit_code == 2 and "names a folder" in _one_line_error(result)
    assert not (tmp_path / "plots").exists()


def test_cat_numbers_lines_as_the_read_tool_does(store_root: Path) -> None:
    with ContentAddressedToolResultStore(store_root) as store:
        reference = store.write(key="odd.txt", content="hello\fworld\u2028still line one\r\nline2\nline3")
    assert _invoke("cat", reference, "--root", str(store_root), "--lines", "2:2").output == "line2\n"
    assert _invoke("cat", reference, "--root", str(store_root), "--lines", "3:").output == "line3"


def test_cat_respects_namespaces(store_root: Path, built: dict[str, str]) -> None:
    result = _invoke("cat", built["bob_only"], "--root", str(store_root), "--namespace", "alice")
    assert "No result" in _one_line_error(result)


def test_cat_without_a_namespace_reads_from_a_namespace_that_holds_the_reference(
    store_root: Path, built: dict[str, str]
) -> None:
    # Neither is in namespace "default": each is found where it was written (alice's first when both hold it).
    assert _invoke("cat", built["bob_only"], "--root", str(store_root)).output == "bob's own result\n" * 400
    assert (
        _invoke("cat", built["source"], "--root", str(store_root), "--lines", "1:1").output
        == SOURCE.split("\n")[0] + "\n"
    )
    assert _invoke("gc", "--root", str(store_root), "--namespace", "bob").exit_code == 0
    assert "no namespace holds" in _one_line_error(_invoke("cat", built["bob_only"], "--root", str(store_root)))


def _damage(store_root: Path, built: dict[str, str]) -> dict[str, str]:
    """One of each kind of damage; returns the digests involved."""
    source_digest = blake3_hex(SOURCE.encode())
    large_digest = blake3_hex(LARGE.encode())
    bob_only_digest = blake3_hex(("bob's own result\n" * 400).encode())
    with open_index(store_root) as connection:
        stored_in = dict(connection.execute("SELECT digest, stored_in FROM blobs").fetchall())
        connection.execute("DELETE FROM blobs WHERE digest = ?", (bob_only_digest,))
    assert stored_in[source_digest] == "file" and stored_in[large_digest] == "index"
    (source_file,) = [p for p in blob_files(store_root) if p.name.startswith(source_digest[2:])]
    source_file.write_bytes(source_file.read_bytes()[:-9] + b"corrupted")
    replace_inline_frame(store_root, large_digest, inline_frame(store_root, large_digest)[:-1])
    stray = store_root / "blobs" / "00" / ("0" * 62 + ".zst")
    stray.parent.mkdir(exist_ok=True)
    stray.write_bytes(b"left over")
    return {"corrupt_file": source_digest, "corrupt_inline": large_digest, "dangling": bob_only_digest}


def test_verify_passes_on_a_healthy_store(store_root: Path, built: dict[str, str]) -> None:
    result = _invoke("verify", "--root", str(store_root))
    assert result.exit_code == 0
    assert "4 blobs checked" in result.output and result.output.strip().endswith("ok")


def test_verify_reports_each_kind_of_damage(store_root: Path, built: dict[str, str]) -> None:
    damaged = _damage(store_root, built)
    result = _invoke("verify", "--root", str(store_root), "--json")
    assert result.exit_code == 1
    report = json.loads(result.output)
    assert {digest for digest, _ in report["corrupt"]} == {damaged["corrupt_file"], damaged["corrupt_inline"]}
    assert report["dangling_writes"] == [["bob", "1_search.txt"]]  # by key: the digest went with the blob row
    assert report["stray_files"] == 1 and report["ok"] is False
    for path in blob_files(store_root):
        if path.stat().st_size > 100 and not path.name.startswith("0" * 62):
            path.unlink()
    missing = json.loads(_invoke("verify", "--root", str(store_root), "--json").output)
    assert damaged["corrupt_file"] in missing["missing"]


def _backdate(store_root: Path, table: str, column: str, when: str, where: str = "1") -> None:
    with open_index(store_root) as connection:
        connection.execute(f"UPDATE {table} SET {column} = ? WHERE {where}", (when,))


def _contents(root: Path) -> tuple[list[str], dict[str, str]]:
    """Every row of the index, as SQL, and every file beside it: what a dry run must leave as it was."""
    with open_index(root) as connection:
        rows = list(connection.iterdump())
    files = {name: digest for name, digest in tree_fingerprint(root).items() if not name.startswith("index.db")}
    return rows, files


def test_gc_forgets_a_namespace_and_deletes_only_what_nothing_references(
    store_root: Path, built: dict[str, str]
) -> None:
    _backdate(store_root, "blobs", "last_seen", "2020-01-01 00:00:00.000")  # seen long ago, beyond any grace
    before = _contents(store_root)
    # No connection is left open (each closed its write-ahead log away), so both runs start from the same files.
    assert not (store_root / "index.db-wal").exists()
    dry = json.loads(
        _invoke("gc", "--root", str(store_root), "--namespace", "bob", "--grace", "0s", "--dry-run", "--json").output
    )
    assert _contents(store_root) == before
    assert count_rows(store_root, "writes") == 7
    real = json.loads(_invoke("gc", "--root", str(store_root), "--namespace", "bob", "--grace", "0s", "--json").output)
    # Both start from the same files, and here the dry run's estimates are exact: the pages its rolled-back deletions
    # leave are the pages the real run keeps once it has given the free ones back and emptied the log.
    assert {**dry, "dry_run": False} == real
    # bob's own result was inside index.db: its 39-byte frame shares a page of frames with others (migration 0013),
    # so the index may not shrink, and never grows.
    assert dry["index_bytes_after"] <= dry["index_bytes_before"]
    assert dry["blob_bytes_after"] == dry["blob_bytes_before"] == real["blob_bytes_after"]  # no file deleted
    assert real["index_bytes_before"] > 0 and real["blob_bytes_before"] > 0  # index.db, and the large blob's file
    assert (real["writes_forgotten"], real["offloads_forgotten"], real["blobs_deleted"]) == (2, 1, 1)
    with ContentAddressedToolResultStore(store_root, namespace="alice") as alice:
        assert alice.read(built["source"]) == SOURCE  # shared with bob, still referenced by alice
    assert count_rows(store_root, "blobs") == 3
    assert "unknown namespace 'bob'" in _one_line_error(_invoke("log", "--root", str(store_root), "--namespace", "bob"))


def test_gc_older_than_and_the_grace_period(store_root: Path, built: dict[str, str]) -> None:
    root = str(store_root)
    _backdate(store_root, "write_rows", "written_at", "2020-01-01 00:00:00.000", "namespace = 'alice'")
    kept_by_grace = json.loads(_invoke("gc", "--root", root, "--older-than", "30d", "--json").output)
    assert kept_by_grace["writes_forgotten"] == 5 and kept_by_grace["blobs_deleted"] == 0
    assert count_rows(store_root, "blobs") == 4
    _backdate(store_root, "blobs", "last_seen", "2020-01-01 00:00:00.000")
    collected = json.loads(_invoke("gc", "--root", root, "--json").output)
    assert collected["blobs_deleted"] == 2  # the large log and the PNG; SOURCE is still bob's
    assert {p.name[:8] for p in blob_files(store_root)} == {blake3_hex(SOURCE.encode())[2:10]}
    with ContentAddressedToolResultStore(store_root, namespace="bob") as bob:
        assert bob.read(built["bob"]) == SOURCE


def test_gc_removes_old_stray_files_and_keeps_fresh_ones(store_root: Path, built: dict[str, str]) -> None:
    fanout = store_root / "blobs" / "ab"
    fanout.mkdir(exist_ok=True)
    old_orphan, fresh_orphan, old_temporary = (
        fanout / ("1" * 62 + ".zst"),
        fanout / ("2" * 62 + ".zst"),
        fanout / ".tmp-dead",
    )
    for path in (old_orphan, fresh_orphan, old_temporary):
        path.write_bytes(b"orphan bytes")
    an_hour_ago = time.time() - 2 * 3600
    for path in (old_orphan, old_temporary):
        os.utime(path, (an_hour_ago, an_hour_ago))
    report = json.loads(_invoke("gc", "--root", str(store_root), "--json").output)
    assert report["stray_files_removed"] == 2
    assert fresh_orphan.exists() and not old_orphan.exists() and not old_temporary.exists()
    # The fresh orphan is still reported, as an orphan: not damage, so exit status 3, not 1.
    verified = _invoke("verify", "--root", str(store_root))
    assert verified.exit_code == 3
    assert "orphan   1 blob or temporary files" in verified.output
    assert verified.output.strip().endswith("ok, but orphans: casstore gc removes those older than its grace period")
    assert _invoke("gc", "--root", str(store_root), "--grace", "0s").exit_code == 0
    assert not fresh_orphan.exists()
    assert _invoke("verify", "--root", str(store_root)).exit_code == 0


def test_verify_reports_orphans_apart_from_damage(store_root: Path, built: dict[str, str]) -> None:
    (store_root / "blobs" / "cd").mkdir(exist_ok=True)
    (store_root / "blobs" / "cd" / ("3" * 62 + ".zst")).write_bytes(b"planted")
    # Forgetting a namespace leaves its blobs unreferenced (healthy, kept for the grace period): information only.
    assert _invoke("gc", "--root", str(store_root), "--namespace", "bob").exit_code == 0
    result = _invoke("verify", "--root", str(store_root), "--json")
    assert result.exit_code == 3
    report = json.loads(result.output)
    assert (report["stray_files"], report["stray_bytes"]) == (1, len(b"planted"))
    assert report["unreferenced_blobs"] == 1 and report["stale_rows"] == 0  # bob's own result
    assert report["ok"] is True and report["clean"] is False
    assert not report["corrupt"] and not report["missing"] and not report["dangling_writes"]


def test_verify_counts_a_stale_row_as_an_orphan(store_root: Path, built: dict[str, str]) -> None:
    content = os.urandom(10_000)  # incompressible, so kept in a file
    with ContentAddressedToolResultStore(store_root, namespace="carol", inline_max=4096) as carol:
        carol.write(key="photo.jpg", content=content)
    assert _invoke("gc", "--root", str(store_root), "--namespace", "carol").exit_code == 0  # kept: the grace period
    (blob,) = [path for path in blob_files(store_root) if path.name.startswith(blake3_hex(content)[2:])]
    blob.unlink()  # as a crash inside gc, between removing the file and deleting the row, leaves it
    result = _invoke("verify", "--root", str(store_root), "--json")
    assert result.exit_code == 3
    report = json.loads(result.output)
    assert (report["stale_rows"], report["stray_files"], report["ok"], report["clean"]) == (1, 0, True, False)
    assert report["unreferenced_blobs"] == 0  # the one unreferenced blob is the stale row itself
    assert (
        "orphan   1 rows of unreferenced blobs whose file is gone"
        in _invoke("verify", "--root", str(store_root)).output
    )


def test_a_file_staged_while_verify_runs_is_not_an_orphan(store_root: Path, built: dict[str, str]) -> None:
    planted: list[Path] = []

    def stage_a_file_meanwhile(done: int, _total: int) -> None:
        if done == 1:  # a writer's blob file, in place before its row is committed
            # A file's time comes from the kernel's coarse clock, up to a tick (a few ms) behind `time.time()`, by
            # which verify notes its start: a file placed within that tick could look older than the start.
            time.sleep(0.05)
            planted.append(store_root / "blobs" / "ef" / ("4" * 62 + ".zst"))
            planted[0].parent.mkdir(exist_ok=True)
            planted[0].write_bytes(b"in flight")

    with ContentAddressedToolResultStore(store_root) as store:
        during = maintenance.verify(store, progress=stage_a_file_meanwhile)
        # Still there a second later, as the next verify finds it: without a row, it is no write in flight any more.
        a_second_ago = planted[0].stat().st_mtime - 1
        os.utime(planted[0], (a_second_ago, a_second_ago))
        after = maintenance.verify(store)
    assert planted and during.clean and during.stray_files == 0
    assert (after.stray_files, after.clean) == (1, False)  # still without a row once verify runs again: an orphan


@pytest.mark.parametrize(
    ("arguments", "status", "message"),
    [
        (["stats", "--root", "{missing}"], 1, "no casstore store"),
        (["cat", "../../etc/passwd", "--root", "{root}"], 1, "is not a casstore reference"),
        (["cat", "blake3/00/" + "0" * 62 + ".txt", "--root", "{root}", "--namespace", "alice"], 1, "No result"),
        (["log", "--root", "{root}", "--namespace", "nobody"], 1, "unknown namespace"),
        (["gc", "--root", "{root}", "--older-than", "soon"], 2, "not a duration"),
        (["log", "--root", "{root}", "--since", "-5d"], 2, "not a duration"),
        (["cat", "REF", "--root", "{root}", "--lines", "0:3"], 1, "--lines"),
        (["cat", "REF", "--root", "{root}", "--lines", "5:3"], 1, "A <= B"),
        (["cat", "blake3/00/" + "0" * 62 + ".txt", "--root", "{root}"], 1, "no namespace holds"),
        (["gc", "--root", "{root}", "--namespace", "nobody"], 1, "unknown namespace"),
        (["cat", "REF", "--root", "{root}", "--namespace", ""], 1, "namespace"),
        (["gc", "--root", "{root}", "--older-than", "99999999999d"], 2, "not a duration"),
        (["log", "--root", "{root}", "--since", "1e400d"], 2, "not a duration"),
    ],
)
def test_bad_input_is_one_line_and_a_non_zero_exit(
    store_root: Path, built: dict[str, str], tmp_path: Path, arguments: list[str], *, status: int, message: str
) -> None:
    arguments = [
        a.format(root=store_root, missing=tmp_path / "missing").replace("REF", built["source"]) for a in arguments
    ]
    if "--lines" in arguments and "--namespace" not in arguments:
        arguments += ["--namespace", "alice"]
    result = _invoke(*arguments)
    assert message in _one_line_error(result)
    assert result.exit_code == status


@pytest.mark.slow
def test_the_console_script_and_module_run(store_root: Path, built: dict[str, str]) -> None:
    script = Path(sys.executable).parent / "casstore"
    for command in ([str(script)], [sys.executable, "-m", "casstore"]):
        completed = subprocess.run(
            [*command, "stats", "--json"],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "CASSTORE_ROOT": str(store_root)},
        )
        assert json.loads(completed.stdout)["writes"] == 7
        failed = subprocess.run(
            [*command, "stats", "--root", str(store_root / "nope")], capture_output=True, text=True, check=False
        )
        assert failed.returncode == 1 and failed.stderr.count("\n") == 1 and "Traceback" not in failed.stderr


@pytest.mark.parametrize(
    ("text", "seconds"), [("45s", 45), ("90m", 5400), ("12h", 43200), ("30d", 2592000), ("2w", 1209600), ("1.5h", 5400)]
)
def test_durations(text: str, seconds: int) -> None:
    assert parse_duration(text).total_seconds() == seconds


def test_log_cut_at_its_limit_says_how_many_more_match(store_root: Path, built: dict[str, str]) -> None:
    cut = _invoke("log", "--root", str(store_root), "--limit", "3", "--json")
    assert len(json.loads(cut.stdout)) == 3
    assert cut.stderr.strip() == "4 more lines match: raise --limit to see them"  # the compactor's and the hook's
    whole = _invoke("log", "--root", str(store_root), "--limit", "7")
    assert len(whole.stdout.strip().splitlines()) == 7 and whole.stderr == ""  # all seven shown: nothing more to say


def test_log_cut_at_its_limit_counts_archives_as_the_lines_they_are(store_root: Path, built: dict[str, str]) -> None:
    with ContentAddressedToolResultStore(store_root, namespace="alice") as alice:
        for number in range(3):
            transcript = alice.write(key=f"archive_{number}.md", content=f"steps of archive {number}\n" * 50)
            alice.record_archive(
                compaction_id=f"a{number}",
                compaction=CompactionRecord(tokens_before=9000, tokens_after=4000, target_tokens=5000),
                archive=ArchiveRecord([transcript], 6, 2 * number + 1, 2 * number + 2, 5200, 5000),
            )
    every = json.loads(_invoke("log", "--root", str(store_root), "--json").stdout)
    archives = [entry for entry in every if entry["source"] == "archive"]
    assert len(archives) == 3
    cut = _invoke("log", "--root", str(store_root), "--limit", "1")
    assert cut.stderr.strip() == f"{len(every) - 1} more lines match: raise --limit to see them"
    # An archive has no tool: with --tool, the count is of that tool's offloads alone, as the lines are.
    read_file = json.loads(_invoke("log", "--root", str(store_root), "--tool", "read_file", "--json").stdout)
    tool_cut = _invoke("log", "--root", str(store_root), "--tool", "read_file", "--limit", "1")
    assert tool_cut.stderr.strip() == f"{len(read_file) - 1} more lines match: raise --limit to see them"


def test_log_tells_a_call_without_an_id_from_a_key_that_does_not_tell_its_call(store_root: Path) -> None:
    with ContentAddressedToolResultStore(store_root, namespace="n") as store:
        store.write(key="3_read_file_call0.txt", content="a call without an id: the hook's stand-in")
        store.write(key="8_weird_id_123.txt", content="an id of a kind casstore does not know")
        store.write(key="9_read_file_call_abc.txt", content="OpenAI's id")
    lines = _invoke("log", "--root", str(store_root)).stdout.splitlines()
    assert [line.split("  ")[2:4] for line in lines] == [
        ["read_file", "call=call_abc"],
        ["key=8_weird_id_123", "call=?"],  # its call id is not known, not absent
        ["read_file", "call=-"],  # the call had no id
    ]


def test_cat_past_the_last_line_names_the_line_count(store_root: Path) -> None:
    with ContentAddressedToolResultStore(store_root) as store:
        reference = store.write(key="log.txt", content="".join(f"line {number}\n" for number in range(1, 601)))
        empty = store.write(key="empty.txt", content="")
    past = _one_line_error(_invoke("cat", reference, "--root", str(store_root), "--lines", "700:800"))
    assert past == f"casstore: error: {reference} has 600 lines; --lines 700:800 starts past its end."
    assert "has 0 lines" in _one_line_error(_invoke("cat", empty, "--root", str(store_root), "--lines", "1:"))
    last = _invoke("cat", reference, "--root", str(store_root), "--lines", "600:900")
    assert last.exit_code == 0 and last.stdout == "line 600\n"  # a window that starts inside is cut at the end


def test_ratios_of_an_empty_store_print_a_dash(store_root: Path) -> None:
    create_store(store_root)
    lines = _invoke("stats", "--root", str(store_root)).stdout.splitlines()
    ratios = {
        line.split()[0]: line.split()[2 if "ratio" in line else 1]
        for line in lines
        if line.startswith(("  dedup ratio", "  compression"))
    }
    assert ratios == {"dedup": "-", "compression": "-"}
    with ContentAddressedToolResultStore(store_root) as store:
        store.write(key="a.txt", content="same\n" * 100)
        store.write(key="b.txt", content="same\n" * 100)
    lines = _invoke("stats", "--root", str(store_root)).stdout.splitlines()
    (dedup,) = [line for line in lines if "dedup ratio" in line]
    assert dedup.split()[2] == "2.00x"
