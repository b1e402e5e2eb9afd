"""
The exit statuses of every command, one convention (`casstore.cli`, and docs/cli.md): 0 done, 1 bad input casstore
checks itself and failures, 2 usage errors as click reports them, 3 `verify` with orphans only. Each row runs the
real command group; every error is one line on stderr.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from casstore import ContentAddressedToolResultStore, SharedToolResultStore
from casstore.cli import DURATION, EXIT_FAILURE, EXIT_ORPHANS_ONLY, EXIT_USAGE, SIZE, cli
from tests.helpers import blake3_hex, blob_files
from tests.servers import S3Location

LOG = "".join(f"line {number}\n" for number in range(1, 41))
NOWHERE = "blake3/00/" + "0" * 62 + ".txt"
OK = 0


@pytest.fixture
def places(tmp_path: Path) -> dict[str, str]:
    """A healthy store, one with a damaged blob, one with an orphan file only, a missing one, and two corpora."""
    healthy, damaged, orphaned = tmp_path / "healthy", tmp_path / "damaged", tmp_path / "orphaned"
    references = {}
    for root in (healthy, damaged, orphaned):
        with ContentAddressedToolResultStore(root, namespace="alice", inline_max=0) as store:
            references["log"] = store.write(key="log.txt", content=LOG)
            references["bin"] = store.write(key="plot.png", content=b"\x89PNG\r\n\x1a\n" + bytes(range(256)))
    (blob,) = [path for path in blob_files(damaged) if path.name.startswith(blake3_hex(LOG.encode())[2:])]
    blob.write_bytes(blob.read_bytes()[:-4] + b"oops")
    (orphaned / "blobs" / "ab").mkdir(exist_ok=True)
    (orphaned / "blobs" / "ab" / ("1" * 62 + ".zst")).write_bytes(b"left over by a crash")
    corpus, empty_corpus = tmp_path / "corpus", tmp_path / "empty-corpus"
    corpus.mkdir()
    (corpus / "tool.py").write_text("def tool():\n    return 42\n" * 30)
    empty_corpus.mkdir()
    (empty_corpus / "picture.png").write_bytes(b"\x89PNG")
    return {
        "healthy": str(healthy),
        "damaged": str(damaged),
        "orphaned": str(orphaned),
        "missing": str(tmp_path / "missing"),
        "under_a_file": str(corpus / "tool.py" / "store"),
        "corpus": str(corpus),
        "empty_corpus": str(empty_corpus),
        "demo_root": str(tmp_path / "demo"),
        "log": references["log"],
        "bin": references["bin"],
        "nowhere": NOWHERE,
        "out": str(tmp_path / "out.bin"),
    }


STATUSES = [
    # stats
    (["stats", "--root", "{healthy}"], OK, None),
    (["stats", "--root", "{healthy}", "--namespace", "alice", "--json"], OK, None),
    (["stats", "--root", "{missing}"], EXIT_FAILURE, "no casstore store at"),
    (["stats", "--root", "{healthy}", "--namespace", "nobody"], EXIT_FAILURE, "unknown namespace 'nobody'"),
    (["stats", "--root", "{healthy}", "--namespace", ""], EXIT_FAILURE, "Invalid value for '--namespace'"),
    (["stats", "--root", "{healthy}", "--index", "postgresql://x/y"], EXIT_USAGE, "give one of them"),
    (["stats", "--no-such-option"], EXIT_USAGE, "No such option"),
    # log
    (["log", "--root", "{healthy}"], OK, None),
    (["log", "--root", "{missing}"], EXIT_FAILURE, "no casstore store at"),
    (["log", "--root", "{under_a_file}"], EXIT_FAILURE, "is under the file"),
    (["log", "--root", "{healthy}", "--namespace", "nobody"], EXIT_FAILURE, "unknown namespace"),
    (["log", "--root", "{healthy}", "--since", "soon"], EXIT_USAGE, "Invalid value for '--since'"),
    (["log", "--root", "{healthy}", "--limit", "0"], EXIT_USAGE, "Invalid value for '--limit'"),
    # cat
    (["cat", "{log}", "--root", "{healthy}", "--lines", "2:3"], OK, None),
    (["cat", "{bin}", "--root", "{healthy}", "-o", "{out}"], OK, None),
    (["cat", "{log}", "--root", "{missing}"], EXIT_FAILURE, "no casstore store at"),
    (["cat", "{nowhere}", "--root", "{healthy}"], EXIT_FAILURE, "no namespace holds"),
    (["cat", "{nowhere}", "--root", "{healthy}", "--namespace", "alice"], EXIT_FAILURE, "No result"),
    (["cat", "{log}", "--root", "{healthy}", "--lines", "50:60"], EXIT_FAILURE, "has 40 lines"),
    (["cat", "{bin}", "--root", "{healthy}", "--lines", "1:2"], EXIT_FAILURE, "holds binary content"),
    (["cat", "{log}", "--root", "{damaged}"], EXIT_FAILURE, "does not decompress"),
    (["cat", "../etc/passwd", "--root", "{healthy}"], EXIT_FAILURE, "is not a casstore reference"),
    (["cat", "{log}", "--root", "{healthy}", "--lines", "5:3"], EXIT_FAILURE, "A <= B"),
    (["cat", "--root", "{healthy}"], EXIT_USAGE, "Missing argument 'REFERENCE'"),
    # verify
    (["verify", "--root", "{healthy}"], OK, None),
    (["verify", "--root", "{damaged}"], EXIT_FAILURE, None),
    (["verify", "--root", "{orphaned}"], EXIT_ORPHANS_ONLY, None),
    (["verify", "--root", "{missing}"], EXIT_FAILURE, "no casstore store at"),
    (["verify", "--root", "{healthy}", "--grace", "1h"], EXIT_USAGE, "No such option"),
    # gc
    (["gc", "--root", "{healthy}", "--dry-run"], OK, None),
    (["gc", "--root", "{orphaned}", "--grace", "0s"], OK, None),
    (["gc", "--root", "{missing}"], EXIT_FAILURE, "no casstore store at"),
    (["gc", "--root", "{healthy}", "--namespace", "nobody"], EXIT_FAILURE, "unknown namespace"),
    (["gc", "--root", "{healthy}", "--grace", "soon"], EXIT_USAGE, "Invalid value for '--grace'"),
    (["gc", "--root", "{healthy}", "--older-than", "30x"], EXIT_USAGE, "Invalid value for '--older-than'"),
    (["gc", "--root", "{healthy}", "--max-size", "5XB"], EXIT_USAGE, "Invalid value for '--max-size'"),
    (["gc", "--root", "{healthy}", "--grace"], EXIT_USAGE, "Option '--grace' requires an argument"),
    # copy (a successful copy needs the shared store's servers: see the last test)
    (["copy", "--root", "{missing}", "--to-index", "pg", "--to-blobs", "s3://b/p"], EXIT_FAILURE, "no casstore store"),
    (["copy", "--root", "{healthy}", "--to-index", "pg"], EXIT_USAGE, "Missing option '--to-blobs'"),
    (
        ["copy", "--root", "{healthy}", "--to-index", "postgresql://nobody@127.0.0.1:1/none", "--to-blobs", "s3://b/p"],
        EXIT_FAILURE,
        "PostgreSQL",
    ),
    # demo
    (["demo", "--root", "{demo_root}", "--steps", "2", "--corpus", "{corpus}", "--json"], OK, None),
    (["demo", "--root", "{demo_root}", "--corpus", "{empty_corpus}"], EXIT_FAILURE, "holds no text files"),
    (["demo", "--root", "{demo_root}", "--steps", "0"], EXIT_USAGE, "Invalid value for '--steps'"),
    (["demo", "--root", "{demo_root}", "--namespace", "a\x00b"], EXIT_FAILURE, "Invalid value for '--namespace'"),
    (["demo", "--root", "{demo_root}", "--corpus", "{missing}"], EXIT_USAGE, "does not exist"),
    # the group
    (["no-such-command"], EXIT_USAGE, "No such command"),
]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("arguments", "status", "message"), STATUSES, ids=[" ".join(row[0][:1] + row[0][2:3]) for row in STATUSES]
)
def test_every_command_exits_by_the_one_convention(
    places: dict[str, str], arguments: list[str], status: int, message: str | None
) -> None:
    result = CliRunner().invoke(cli, [argument.format(**places) for argument in arguments], catch_exceptions=False)
    assert result.exit_code == status, result.output + result.stderr
    assert "Traceback" not in result.output + result.stderr
    if status in (EXIT_FAILURE, EXIT_USAGE) and message is not None:
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("casstore: error: ") and message in lines[0], result.stderr


# Every option that takes a duration or a size, with a value that is neither: a usage error naming the option.
BAD_DURATIONS_AND_SIZES = [
    ("log", "--since", "soon"),
    ("report", "--since", "a week"),
    ("gc", "--older-than", "30x"),
    ("gc", "--grace", "1 hour"),
    ("gc", "--max-size", "5XB"),
]


def test_every_duration_and_size_option_is_checked_here() -> None:
    typed = {
        (name, option)
        for name, command in cli.commands.items()
        for parameter in command.params
        if parameter.type in (DURATION, SIZE)
        for option in parameter.opts
    }
    assert typed == {(command, option) for command, option, _ in BAD_DURATIONS_AND_SIZES}


@pytest.mark.parametrize(("command", "option", "value"), BAD_DURATIONS_AND_SIZES)
def test_a_bad_duration_or_size_is_a_usage_error_naming_its_option(
    places: dict[str, str], command: str, option: str, value: str
) -> None:
    result = CliRunner().invoke(cli, [command, "--root", places["healthy"], option, value], catch_exceptions=False)
    assert result.exit_code == EXIT_USAGE, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"casstore: error: Invalid value for '{option}': {value!r} is not a "), line
    assert "such as" in line  # and says what it takes


def test_every_command_and_status_is_in_the_table() -> None:
    covered = {(arguments[0], status) for arguments, status, _ in STATUSES}
    for command in ("stats", "log", "cat", "verify", "gc", "demo"):
        assert {(command, OK), (command, EXIT_FAILURE), (command, EXIT_USAGE)} <= covered
    assert {("copy", EXIT_FAILURE), ("copy", EXIT_USAGE), ("verify", EXIT_ORPHANS_ONLY)} <= covered
    assert (EXIT_FAILURE, EXIT_USAGE, EXIT_ORPHANS_ONLY) == (1, 2, 3)


@pytest.mark.slow
def test_the_console_script_exits_with_the_same_statuses(places: dict[str, str]) -> None:
    script = Path(sys.executable).parent / "casstore"
    for arguments, status in (
        (["verify", "--root", places["orphaned"]], EXIT_ORPHANS_ONLY),
        (["log", "--root", places["healthy"], "--since", "soon"], EXIT_USAGE),
        (["log", "--root", places["healthy"], "--limit", "0"], EXIT_USAGE),
        (["stats", "--root", places["missing"]], EXIT_FAILURE),
        (["verify", "--root", places["healthy"]], OK),
    ):
        completed = subprocess.run([str(script), *arguments], capture_output=True, text=True, check=False)
        assert completed.returncode == status, completed.stderr


@pytest.mark.slow
def test_copy_exits_1_when_a_blob_cannot_be_copied_and_0_when_everything_is(
    places: dict[str, str], postgres_url: str, s3_bucket_url: S3Location
) -> None:
    target = ["--to-index", postgres_url, "--to-blobs", s3_bucket_url.url]
    env = {**os.environ, **s3_bucket_url.env}
    incomplete = subprocess.run(  # first: the damaged log's blob is not in the target yet, so it must be read
        [sys.executable, "-m", "casstore", "copy", "--root", places["damaged"], *target],
        env=env,
        capture_output=True,
        check=False,
    )
    assert incomplete.returncode == EXIT_FAILURE, incomplete.stderr
    copied = subprocess.run(
        [sys.executable, "-m", "casstore", "copy", "--root", places["healthy"], *target],
        env=env,
        capture_output=True,
        check=False,
    )
    assert copied.returncode == OK, copied.stderr
    with SharedToolResultStore(index_url=postgres_url, blob_url=s3_bucket_url.url, namespace="alice") as shared:
        assert shared.read(places["log"]) == LOG
