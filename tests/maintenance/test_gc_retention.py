"""
Retention by size (`gc --max-size`, `collect_garbage(max_size=...)`) on both backends, what gc says about blobs the
grace period keeps, and what the read tool answers for a reference retention removed.
"""

import json
import os
import re
import shlex
import sqlite3
import subprocess
import sys
from contextlib import closing
from datetime import UTC, datetime, timedelta
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from casstore import ContentAddressedToolResultStore
from casstore.cli import SIZE_UNITS, cli, parse_size
from casstore.compactor import make_read_tool
from casstore.maintenance.checks import collect_garbage
from casstore.stores.local import RepositoryToolResultStore
from tests.helpers import blake3_hex
from tests.store_backends import LONG_AGO, Backend, age_every_blob, readable


def _write_in_order(store: RepositoryToolResultStore, count: int) -> tuple[list[str], list[bytes]]:
    """`count` incompressible results of different sizes, written one after the other (r0 is the oldest)."""
    contents = [os.urandom(3000 + 700 * number) for number in range(count)]
    return [store.write(key=f"r{number}.bin", content=content) for number, content in enumerate(contents)], contents


def _stored_sizes(backend: Backend) -> dict[str, int]:
    return {digest: int(size) for digest, size in backend.rows("SELECT digest, stored_size FROM blobs")}


def test_max_size_forgets_the_least_recently_written_first(backend: Backend) -> None:
    store = backend.open(namespace="agent", inline_max=4096)  # some blobs in the index, the larger ones outside it
    references, contents = _write_in_order(store, 10)
    store.write(key="again.bin", content=contents[1])  # r1 written again, last: now the most recently written
    sizes = _stored_sizes(backend)
    size_of = [sizes[blake3_hex(content)] for content in contents]
    # Room for r1, r9, r8 and r7 (newest writes first), not for r6 as well.
    max_size = size_of[1] + size_of[9] + size_of[8] + size_of[7] + size_of[6] - 1
    dry = collect_garbage(store, max_size=max_size, dry_run=True)
    assert backend.count("writes") == 11  # the dry run changed nothing
    report = collect_garbage(store, max_size=max_size)
    assert (dry.writes_forgotten, dry.needed_bytes_after, dry.over_max_size) == (
        report.writes_forgotten,
        report.needed_bytes_after,
        report.over_max_size,
    )
    assert report.writes_forgotten == 7  # r0, r1's first write, r2 to r6
    assert report.needed_bytes_before == sum(size_of)
    assert report.needed_bytes_after == size_of[1] + size_of[7] + size_of[8] + size_of[9] <= max_size
    assert readable(store, references) == [False, True, False, False, False, False, False, True, True, True]
    # The grace period keeps the forgotten blobs (seen a moment ago): gc says by how much that is over, and why.
    waiting = sum(size_of[number] for number in (0, 2, 3, 4, 5, 6))
    assert (report.blobs_deleted, report.blobs_waiting, report.waiting_bytes) == (0, 6, waiting)
    assert report.over_max_size == report.needed_bytes_after + waiting - max_size > 0
    age_every_blob(backend)
    collected = collect_garbage(store, max_size=max_size, grace=timedelta(0))
    assert (collected.writes_forgotten, collected.blobs_deleted, collected.blob_bytes_freed) == (0, 6, waiting)
    assert (collected.over_max_size, collected.blobs_waiting) == (0, 0)
    assert sum(_stored_sizes(backend).values()) == report.needed_bytes_after


def test_max_size_with_a_namespace_counts_and_forgets_only_its_writes(backend: Backend) -> None:
    other = backend.open(namespace="other", inline_max=4096)
    other_references, _ = _write_in_order(other, 4)  # older than everything below, and left alone
    agent = backend.open(namespace="agent", inline_max=4096)
    references, contents = _write_in_order(agent, 6)
    shared_content = os.urandom(5000)
    other.write(key="shared.bin", content=shared_content)
    shared_reference = agent.write(key="shared.bin", content=shared_content)  # the agent's newest write
    sizes = _stored_sizes(backend)
    agent_sizes = [sizes[blake3_hex(content)] for content in contents]
    max_size = sizes[blake3_hex(shared_content)] + agent_sizes[5] + agent_sizes[4]
    report = collect_garbage(agent, namespace="agent", max_size=max_size)
    assert report.writes_forgotten == 4 and report.needed_bytes_after == max_size
    assert report.needed_bytes_before == sum(agent_sizes) + sizes[blake3_hex(shared_content)]
    assert readable(agent, [*references, shared_reference]) == [False] * 4 + [True] * 3
    assert readable(other, other_references) == [True] * 4  # older, but another namespace's: not counted
    assert backend.count("writes") == 4 + 1 + 3
    # Only what the agent's forgotten writes referenced counts as kept by the grace period.
    assert report.over_max_size == sum(agent_sizes[:4])
    assert collect_garbage(agent, namespace="agent", max_size=max_size).writes_forgotten == 0  # it fits now


def test_max_size_zero_forgets_everything_in_scope_and_nothing_else(backend: Backend) -> None:
    agent, other = backend.open(namespace="agent"), backend.open(namespace="other")
    _write_in_order(agent, 3)
    kept, _ = _write_in_order(other, 2)
    age_every_blob(backend)
    report = collect_garbage(agent, namespace="agent", max_size=0, grace=timedelta(0))
    assert (report.writes_forgotten, report.blobs_deleted, report.needed_bytes_after, report.over_max_size) == (
        3,
        3,
        0,
        0,
    )
    assert readable(other, kept) == [True, True]
    with pytest.raises(ValueError, match="max_size"):
        collect_garbage(agent, max_size=-1)


def test_gc_says_how_many_blobs_the_grace_period_keeps_and_until_when(backend: Backend) -> None:
    store = backend.open(namespace="agent")
    _write_in_order(store, 3)
    last_seen = max(row[0] for row in backend.rows("SELECT last_seen FROM blobs"))
    first_seen = min(row[0] for row in backend.rows("SELECT last_seen FROM blobs"))
    report = collect_garbage(store, namespace="agent", grace=timedelta(hours=2))
    assert (report.writes_forgotten, report.blobs_deleted, report.blobs_waiting) == (3, 0, 3)
    assert report.waiting_bytes == sum(_stored_sizes(backend).values())
    # The earliest: the first blob last seen, plus the grace period.
    expected = datetime.fromisoformat(first_seen) + timedelta(hours=2)
    assert report.collectable_from == expected.isoformat(sep=" ", timespec="milliseconds")
    assert report.collectable_from is not None and report.collectable_from > last_seen
    dry = collect_garbage(store, grace=timedelta(hours=2), dry_run=True)
    assert (dry.blobs_waiting, dry.collectable_from) == (3, report.collectable_from)
    # Times set by hand: one blob long past its grace period, the others seen (as a clock ahead would say) later.
    digests = sorted(_stored_sizes(backend))
    for digest, seen in zip(digests, [LONG_AGO, "2099-06-01 00:00:00.000", "2099-01-01 00:00:00.000"], strict=True):
        backend.execute("UPDATE blobs SET last_seen = ? WHERE digest = ?", (seen, digest))
    later = collect_garbage(store, grace=timedelta(hours=2))
    assert (later.blobs_deleted, later.blobs_waiting, later.collectable_from) == (1, 2, "2099-01-01 02:00:00.000")
    assert later.waiting_bytes == sum(_stored_sizes(backend).values())


@given(
    order=st.lists(st.integers(min_value=0, max_value=5), min_size=1, max_size=12),
    fraction=st.floats(min_value=0, max_value=1.1),
)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_max_size_keeps_the_longest_run_of_newest_writes_that_fits(
    tmp_path_factory: pytest.TempPathFactory, order: list[int], fraction: float
) -> None:
    # Contents written in any order, some again and again: what stays is the newest writes, as many as fit.
    contents = [f"content {number}\n".encode() * (40 + 90 * number) for number in range(6)]
    root = tmp_path_factory.mktemp("retention")
    with ContentAddressedToolResultStore(root, namespace="agent") as store:
        written = [store.write(key=f"{n}.bin", content=contents[number]) for n, number in enumerate(order)]
        with closing(sqlite3.connect(root / "index.db")) as connection:
            size = dict(connection.execute("SELECT digest, stored_size FROM blobs").fetchall())
        needed = [size[blake3_hex(contents[number])] for number in order]

        def needed_by(newest: int) -> int:  # what the blobs of the `newest` last writes take
            return sum({order[i]: needed[i] for i in range(len(order) - newest, len(order))}.values())

        max_size = int(needed_by(len(order)) * fraction)
        report = collect_garbage(store, max_size=max_size)
        kept = len(order) - report.writes_forgotten
        assert report.needed_bytes_after == needed_by(kept) <= max_size
        assert kept == len(order) or needed_by(kept + 1) > max_size  # one more write would not fit
        # A reference stays readable while any of its writes stays: the newest `kept` writes' references.
        assert [readable(store, [reference]) == [True] for reference in written] == [
            reference in written[len(order) - kept :] for reference in written
        ]


def test_the_read_tool_answers_for_a_reference_retention_removed(tmp_path: Path) -> None:
    with ContentAddressedToolResultStore(tmp_path / "store", namespace="agent") as store:
        old = store.write(key="old.txt", content="an old tool result\n" * 50)
        new = store.write(key="new.txt", content="a new tool result\n" * 50)
        tool = make_read_tool(store)
        collect_garbage(store, max_size=store.repository.retention.needed_bytes() - 1)
        assert tool.invoke(reference=new) == "a new tool result\n" * 50
        answer = tool.invoke(reference=old)
    # What the docs promise: the same answer as for a reference the store never had; the model is not misled.
    assert answer == (
        f"Error: no offloaded result at '{old}'. Pass a reference exactly as it is quoted in an offloaded tool "
        f"result of this conversation, such as 'blake3/9b/1c4e...e4a.txt'."
    )


# --- The command ----------------------------------------------------------------------------------------------------


def test_gc_max_size_on_the_command_line(tmp_path: Path) -> None:
    root = tmp_path / "store"
    with ContentAddressedToolResultStore(root, namespace="agent", inline_max=0) as store:
        _write_in_order(store, 4)
        needed = store.repository.retention.needed_bytes()
    text = CliRunner().invoke(cli, ["gc", "--root", str(root), "--max-size", f"{needed - 1}B"])
    assert text.exit_code == 0, text.output  # over because of the grace period: said, and still success
    assert "gc did forget 1 writes" in text.output
    assert "waiting             1 unreferenced blobs" in text.output and "collectable from" in text.output
    assert " over, as forgotten blobs wait out the grace period" in text.output
    report = json.loads(CliRunner().invoke(cli, ["gc", "--root", str(root), "--max-size", "0MB", "--json"]).output)
    assert (report["max_size"], report["writes_forgotten"], report["needed_bytes_after"]) == (0, 3, 0)
    assert report["blobs_waiting"] == 4 and report["over_max_size"] == report["waiting_bytes"] > 0
    assert report["collectable_from"] is not None
    help_text = CliRunner().invoke(cli, ["gc", "--help"]).output
    assert "--max-size SIZE" in help_text and "--vacuum" in help_text and "500MB" in help_text


@pytest.mark.parametrize("size", ["5XB", "500mb", "2gib", "-1MB", "MB", "", "1e9", "0x10", "5 M B", "1,000B"])
def test_a_bad_size_is_a_usage_error_naming_the_accepted_forms(tmp_path: Path, size: str) -> None:
    root = tmp_path / "store"
    with ContentAddressedToolResultStore(root) as store:
        reference = store.write(key="k", content="x")
    if size == "5XB":  # once as a real process: the exit status the shell sees
        completed = subprocess.run(
            [sys.executable, "-m", "casstore", "gc", "--root", str(root), "--max-size", size],
            capture_output=True,
            text=True,
            check=False,
        )
        status, stderr = completed.returncode, completed.stderr
    else:
        result = CliRunner().invoke(cli, ["gc", "--root", str(root), "--max-size", size])
        status, stderr = result.exit_code, result.stderr
    assert status == 2, stderr  # a usage error (docs/cli.md)
    (line,) = stderr.strip().splitlines()
    assert "--max-size" in line and "500MB" in line and "2GiB" in line and "KiB" in line and "TB" in line
    assert "Traceback" not in stderr
    with ContentAddressedToolResultStore(root) as store:
        assert store.read(reference) == "x"  # nothing was forgotten


@given(
    number=st.integers(min_value=0, max_value=10**6),
    unit=st.sampled_from(sorted(SIZE_UNITS)),
    space=st.sampled_from(["", " "]),
)
def test_a_size_is_its_number_times_its_unit(number: int, unit: str, space: str) -> None:
    assert parse_size(f"{number}{space}{unit}") == number * SIZE_UNITS[unit]
    assert parse_size(str(number)) == number  # a bare number is bytes


@given(
    whole=st.integers(min_value=0, max_value=10**4),
    tenths=st.integers(min_value=0, max_value=9),
    unit=st.sampled_from(sorted(SIZE_UNITS)),
)
def test_a_fractional_size_is_exact_to_the_byte_below(whole: int, tenths: int, unit: str) -> None:
    assert parse_size(f"{whole}.{tenths}{unit}") == (whole * 10 + tenths) * SIZE_UNITS[unit] // 10


@given(
    number=st.integers(min_value=0, max_value=10**6),
    unit=st.text(
        alphabet=st.characters(min_codepoint=33, max_codepoint=0x2FF, blacklist_categories=["Zs", "Cc"]),
        min_size=1,
        max_size=4,
    ).filter(lambda unit: unit not in SIZE_UNITS and not unit[0].isdigit() and unit[0] != "."),
)
def test_a_unit_not_in_the_list_is_refused(number: int, unit: str) -> None:
    # Other cases of the same letters (mb, gib, Kb), other units, signs, exponents: refused, never guessed.
    with pytest.raises(click.BadParameter, match="500MB"):
        parse_size(f"{number}{unit}")


@given(text=st.text(alphabet=st.characters(blacklist_categories=["Nd"]), max_size=10))
def test_text_without_a_number_is_refused(text: str) -> None:
    with pytest.raises(click.BadParameter, match="is not a size"):
        parse_size(text)


def test_the_units_are_the_issues() -> None:
    assert parse_size("500MB") == 500 * 10**6
    assert parse_size("2GiB") == 2 * 2**30
    assert {unit: SIZE_UNITS[unit] for unit in ("KB", "KiB", "TB", "TiB")} == {
        "KB": 1000,
        "KiB": 1024,
        "TB": 10**12,
        "TiB": 2**40,
    }


def test_collectable_from_is_shown_in_utc_with_how_far_ahead() -> None:
    from casstore.cli import _when

    ahead = (datetime.now(UTC) + timedelta(minutes=30)).replace(tzinfo=None)
    shown = _when(ahead.isoformat(sep=" ", timespec="milliseconds"))
    assert shown.startswith(f"{ahead:%Y-%m-%d %H:%M:%S} UTC (in ") and shown.endswith(" min)")
    assert shown.split("(in ")[1] in {"29 min)", "30 min)"}


def test_the_gc_pages_commands_run_as_written(tmp_path: Path) -> None:
    page = Path(__file__).resolve().parents[2] / "docs" / "gc.md"
    commands = [
        line
        for block in re.findall(r"```sh\n(.*?)```", page.read_text(encoding="utf-8"), flags=re.DOTALL)
        for line in block.splitlines()
        if line.startswith("casstore gc")
    ]
    assert len(commands) >= 4  # the --max-size forms, --vacuum
    root = tmp_path / "store"
    with ContentAddressedToolResultStore(root, namespace="agent-7") as store:
        _write_in_order(store, 3)
    for command in commands:
        arguments = shlex.split(command)[1:]
        result = CliRunner(env={"CASSTORE_ROOT": str(root)}).invoke(cli, arguments)
        assert result.exit_code == 0, (command, result.output, result.stderr)
