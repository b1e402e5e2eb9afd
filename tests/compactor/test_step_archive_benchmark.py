"""`python -m benchmarks.step_archive`, shortened: it runs, and its figures say what docs/compactor.md's table says."""

from pathlib import Path

import pytest

from benchmarks import step_archive


def _corpus(folder: Path) -> Path:
    """A project of 30 Python files of 1 to 15 KB, the same every run (the default corpus changes with casstore)."""
    for number in range(30):
        package = folder / f"package_{number % 4}"
        package.mkdir(parents=True, exist_ok=True)
        lines = [f"def function_{number}_{line}(value: int) -> int:\n    return value + {line}\n" for line in range(20)]
        (package / f"module_{number}.py").write_text("".join(lines) * (1 + number % 7))
    return folder


def test_a_short_run_measures_what_the_table_shows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus = str(_corpus(tmp_path / "project"))
    outcomes = {
        (outcome.setup, outcome.window): outcome for outcome in step_archive.main(["--steps", "40", "--corpus", corpus])
    }
    printed = capsys.readouterr().out
    assert "| window | setup | context peak | tokens sent | results recoverable |" in printed
    assert set(outcomes) == {(setup, window) for setup in step_archive.SETUPS for window in step_archive.WINDOWS}
    for window in step_archive.WINDOWS:
        chain, sliding = outcomes["chain", window], outcomes["sliding", window]
        assert chain.steps == 40 and chain.recoverable == chain.results > 40
        assert chain.disk_bytes > 0 and sliding.disk_bytes == 0
    # In the small window the sliding window gave steps up, and lost their results; the chain kept them reachable.
    small = step_archive.WINDOWS[0]
    assert outcomes["sliding", small].recoverable < outcomes["sliding", small].results
    assert outcomes["chain", small].peak_tokens <= small
