"""`python -m benchmarks.step_archive`, shortened: it runs, and its figures say what docs/compactor.md's table says."""

import pytest

from benchmarks import step_archive


def test_a_short_run_measures_what_the_table_shows(capsys: pytest.CaptureFixture[str]) -> None:
    outcomes = {(outcome.setup, outcome.window): outcome for outcome in step_archive.main(["--steps", "40"])}
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
    assert outcomes["chain", small].peak_tokens <= small < outcomes["offload", small].peak_tokens
