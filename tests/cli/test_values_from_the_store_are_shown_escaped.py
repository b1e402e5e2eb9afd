"""
`casstore log` and `casstore stats` show tool names, call ids, keys and references as text: whatever a model or a tool
put in them, each entry is one line, no control or bidi character reaches the terminal, and one long value does not
widen every row of a table. `--json` gives the values exactly.
"""

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from casstore import ContentAddressedToolResultStore, OffloadRecord
from casstore.cli import cli

ESC, BEL = "\x1b", "\x07"
OSC52 = f"{ESC}]52;c;cHduZWQ={BEL}"
CLEAR = f"{ESC}[2J{ESC}[3J"
TITLE = f"{ESC}]0;PWNED{BEL}"
# What a terminal acts on or reorders rather than shows: C0 (but the line end), DEL, C1, line and paragraph
# separators, and the bidi controls.
ACTED_ON = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]")


def _invoke(*arguments: str) -> Result:
    return CliRunner().invoke(cli, list(arguments), catch_exceptions=False)


def _lines(output: str) -> list[str]:
    assert output.endswith("\n")
    return output[:-1].split("\n")


def test_hostile_tool_names_call_ids_and_keys_are_one_line_each_and_escaped(store_root: Path) -> None:
    with ContentAddressedToolResultStore(store_root, namespace="n") as store:
        clipboard = store.write(key=f"1_grep_call_AbC{OSC52}.txt", content="x" * 10)
        store.write(key="2_ls\r2099-01-01 00:00:00.000  n  ls  call=call_Z  hook, tokens -_call_Y.txt", content="y")
        store.write(key=f"3_{TITLE}\u202etxt.exe_call_c.txt", content="z")
        store.record_offloads(
            compaction_id="c",
            offloads=[
                OffloadRecord(f"read{CLEAR}\nFORGED LINE", f"call_1{TITLE}", [clipboard], 9, 8),
                OffloadRecord("del\x7f\x85\u2028bidi\u202e\u2066", "id\r\x1b[K", [clipboard], 9, 8),
            ],
        )
    entries = json.loads(_invoke("log", "--root", str(store_root), "--json").output)
    result = _invoke("log", "--root", str(store_root))
    lines = _lines(result.output)
    assert len(lines) == len(entries) == 5
    assert not ACTED_ON.search(result.output), ACTED_ON.findall(result.output)
    assert not any(line.startswith("FORGED") or line.startswith("2099") for line in lines)
    # Each value shows what it holds, as its escapes.
    for shown in [r"\x1b]52;c;cHduZWQ=\x07", r"read\x1b[2J\x1b[3J\nFORGED LINE", r"call=call_1\x1b]0;PWNED\x07"]:
        assert shown in result.output
    assert r"\r2099-01-01" in result.output and r"\u202etxt.exe" in result.output
    assert r"del\x7f\x85\u2028bidi\u202e\u2066" in result.output and r"call=id\r\x1b[K" in result.output
    # --json keeps every value exactly.
    names = {entry["tool_name"] for entry in entries}
    assert names >= {f"read{CLEAR}\nFORGED LINE", "del\x7f\x85\u2028bidi\u202e\u2066"}


_TEXT = st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"), min_size=1, max_size=40)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(names=st.lists(st.tuples(_TEXT, _TEXT), min_size=1, max_size=4))
def test_any_tool_name_and_call_id_is_one_line_of_the_log(tmp_path: Path, names: list[tuple[str, str]]) -> None:
    root = tmp_path / f"store-{abs(hash(tuple(names)))}"
    with ContentAddressedToolResultStore(root, namespace="n") as store:
        reference = store.write(key="x.txt", content="hello")
        offloads = [OffloadRecord(tool, call, [reference], 10, 5) for tool, call in names]
        store.record_offloads(compaction_id="c", offloads=offloads)
    output = _invoke("log", "--root", str(root)).output
    assert len(_lines(output)) == len(names)
    assert not ACTED_ON.search(output)
    assert all(line.endswith(reference) and "  saved 5/10 tokens  " in line for line in _lines(output))


def test_stats_shows_hostile_tool_names_escaped_on_one_row_each(store_root: Path) -> None:
    with ContentAddressedToolResultStore(store_root, namespace="n") as store:
        reference = store.write(key="x.txt", content="hello")
        names = [f"read{OSC52}", "t\nFORGED  n  rm_rf  1  9  9", f"ls\r{CLEAR}", "abc\u202edef"]
        store.record_offloads(
            compaction_id="c", offloads=[OffloadRecord(name, None, [reference], 10, 5) for name in names]
        )
    output = _invoke("stats", "--root", str(store_root)).output
    assert not ACTED_ON.search(output)
    tools = _lines(output.partition("offloads per tool\n")[2])
    assert len(tools) == 1 + len(names)  # the heading, then one row per tool
    assert r"read\x1b]52;c;cHduZWQ=\x07" in output and r"t\nFORGED" in output and r"abc\u202edef" in output


@pytest.mark.parametrize("length", [61, 20_000])
def test_a_long_tool_name_is_cut_in_the_stats_table_and_whole_in_json(store_root: Path, length: int) -> None:
    long_name = "W" * length
    with ContentAddressedToolResultStore(store_root, namespace="n") as store:
        reference = store.write(key="x.txt", content="hello")
        offloads = [OffloadRecord(f"t{number}", None, [reference], 1, 1) for number in range(200)]
        offloads.append(OffloadRecord(long_name, None, [reference], 1, 1))
        store.record_offloads(compaction_id="c", offloads=offloads)
    output = _invoke("stats", "--root", str(store_root)).output
    widest = max(len(line) for line in _lines(output))
    assert widest < 200, widest
    assert len(output) < 200 * len(_lines(output))
    row = next(line for line in _lines(output) if "WWW" in line)
    assert long_name not in row and "W" * 59 + "\u2026" in row
    figures = json.loads(_invoke("stats", "--root", str(store_root), "--json").output)
    assert long_name in {tool["tool_name"] for tool in figures["tools"]}
