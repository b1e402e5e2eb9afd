"""The read-back tool: whole texts, windows in lines and characters, pattern search, images, and every kind of error."""

import base64
import json
import random
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from haystack.components.agents import Agent
from haystack.components.generators.chat import MockChatGenerator
from haystack.dataclasses import ChatMessage, ImageContent, TextContent, ToolCall
from haystack.hooks.compaction import CompactionHook
from haystack.hooks.tool_result_offloading import FileSystemToolResultStore
from haystack.tools.from_function import create_tool_from_function
from haystack.tools.tool import Tool
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from casstore import ContentAddressedToolResultStore
from casstore.compactor import DedupOffloadCompactor, make_read_tool, text_search
from tests.compactor_helpers import PayloadCounter, image_block, pdf_bytes, png_bytes

pytestmark = pytest.mark.filterwarnings("ignore::haystack.utils.experimental.ExperimentalWarning")

CAP = 20_000
_NEXT = re.compile(r"offset=(\d+)(?:, char_offset=(\d+))?")
# Added to every bound on how long a search may take: room for a loaded, shared machine, while far below what the
# unbounded work would take (a catastrophic pattern never ends; the 4 MB expensive search took up to 28 s in one call).
_SLACK = 5.0


@pytest.fixture(scope="module")
def shared_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ContentAddressedToolResultStore]:
    """One store for the property tests, which write many small results."""
    with ContentAddressedToolResultStore(tmp_path_factory.mktemp("shared")) as opened:
        yield opened


def _window(answer: str) -> tuple[str, str, str]:
    """Split a framed answer into header, body and footer: the frame lines never contain a newline."""
    header_end, footer_start = answer.index("\n"), answer.rindex("\n")
    return answer[:header_end], answer[header_end + 1 : footer_start], answer[footer_start + 1 :]


def _read_all(tool: Tool, reference: str, *, limit: int | None = None, cap: int = CAP, **first: Any) -> str:
    """Page through a result as a model would, following each footer; every answer must respect the cap."""
    arguments: dict[str, Any] = {"reference": reference, **first}
    if limit is not None:
        arguments["limit"] = limit
    pieces = []
    for _ in range(100_000):
        answer = tool.invoke(**arguments)
        assert isinstance(answer, str) and len(answer) <= cap
        header, body, footer = _window(answer)
        assert header.startswith(("[Lines ", "[Line "))
        pieces.append(body)
        following = _NEXT.search(footer)
        if following is None:
            assert footer == "[End of the result.]"
            return "".join(pieces)
        arguments = {"reference": reference, "offset": int(following[1]), "char_offset": int(following[2] or 0)}
        if limit is not None:
            arguments["limit"] = limit
    raise AssertionError("the footers never reached the end")


def _matching_lines_found(tool: Tool, reference: str, *, pattern: str, limit: int, cap: int) -> set[int]:
    """Follow a pattern's footers to the end as a model would; every answer must respect the cap."""
    found: set[int] = set()
    arguments: dict[str, Any] = {"reference": reference, "pattern": pattern, "limit": limit}
    for _ in range(10_000):
        answer = tool.invoke(**arguments)
        assert isinstance(answer, str) and len(answer) <= cap
        found |= {int(row[1]) for row in re.finditer(r"^(\d+)(?:@\d+)?: ", answer, re.MULTILINE)}
        following = _NEXT.search(answer.splitlines()[-1])
        if following is None:
            return found
        arguments = {**arguments, "offset": int(following[1]), "char_offset": int(following[2] or 0)}
    raise AssertionError("the footers never reached the end")


# Patterns RE2 cannot run with its DFA on a text of random a and b: one call costs the text's length times the size of
# the compiled program. The first four are a reviewer's; the 523-character alternation took 27.7 s on 4 MB when the
# text was searched in one call.
_EXPENSIVE_PATTERNS = [
    "a[ab]{20}c",
    "(?:a[ab]{20}|b[ab]{19}a)[ab]*c",
    "(" + "|".join(f"[ab]{{{number}}}a[ab]{{{30 - number}}}" for number in range(30)) + ")c",
    "(?:[ab]*a[ab]{22}){3}c",
    # Large counted repetitions, big alternations, counted repeats nested in counted repeats.
    "a[ab]{999}c",
    "(?:[ab]{1,20}a){30}c",
    "(?:" + "|".join(f".{{{number}}}a.{{{30 - number}}}" for number in range(30)) + ")c",
    "(?:[ab]{0,30}a){10}c",
    "(?:(?:[ab]{2,5}){4,8}a){6}c",
]


@pytest.fixture(scope="module")
def expensive_texts(shared_store: ContentAddressedToolResultStore) -> dict[str, str]:
    """References to 4 MB of random a and b, in lines of 100 characters and in one line."""
    letters = _a_and_b(4_000_000, seed=1)
    lines = "\n".join(letters[start : start + 100] for start in range(0, len(letters), 100))
    return {
        "lines": shared_store.write(key="ab_lines.txt", content=lines),
        "one line": shared_store.write(key="ab_line.txt", content=letters),
    }


def _a_and_b(count: int, *, seed: int) -> str:
    """`count` random letters a and b: the text on which RE2's DFA gives up for many counted repetitions."""
    return random.Random(seed).randbytes(count).translate(bytes(ord("ab"[byte & 1]) for byte in range(256))).decode()


class TestText:
    def test_a_short_text_comes_back_whole(self, store: ContentAddressedToolResultStore) -> None:
        text = '{"rows": [1, 2, 3]}\n[Lines 1-2 of 2.] looks like a header but is content\n'
        assert make_read_tool(store).invoke(reference=store.write(key="r.json", content=text)) == text

    def test_the_model_may_quote_the_reference(self, store: ContentAddressedToolResultStore) -> None:
        reference = store.write(key="r.txt", content="quoted")
        assert make_read_tool(store).invoke(reference=f" '{reference}' ") == "quoted"

    def test_an_empty_text(self, store: ContentAddressedToolResultStore) -> None:
        answer = make_read_tool(store).invoke(reference=store.write(key="e.txt", content=""))
        assert answer == "[The result is empty: it has no lines.]"

    def test_a_long_text_comes_in_windows_of_lines(self, store: ContentAddressedToolResultStore) -> None:
        text = "".join(f"{number:05d} " + "x" * (number % 80) + "\n" for number in range(1, 5001))
        reference = store.write(key="log.txt", content=text)
        tool = make_read_tool(store)

        first = tool.invoke(reference=reference)
        header, body, footer = _window(first)
        shown = body.count("\n")
        assert len(first) <= CAP and len(first) > CAP - 300  # a window is about as large as the cap allows
        assert header == f"[Lines 1-{shown} of 5000.]"
        assert text.startswith(body) and body.endswith("\n")
        assert footer == (
            f"[Not finished: call read_offloaded_result again with the same reference and offset={shown + 1} for the "
            f"next lines ({5000 - shown} of 5000 left).]"
        )

        window = tool.invoke(reference=reference, offset=1200, limit=3)
        assert window == f"[Lines 1200-1202 of 5000.]\n{''.join(text.splitlines(True)[1199:1202])}\n" + (
            "[Not finished: call read_offloaded_result again with the same reference and offset=1203 for the next "
            "lines (3798 of 5000 left).]"
        )
        assert tool.invoke(reference=reference, offset=5000).endswith("\n[End of the result.]")
        assert _read_all(tool, reference) == text

    def test_a_5_mb_single_line_is_paged_by_characters(self, store: ContentAddressedToolResultStore) -> None:
        minified = json.dumps(
            [{"id": number, "name": f"item {number}", "tags": ["a", "b"]} for number in range(110_000)]
        )
        assert len(minified) > 5_000_000 and "\n" not in minified
        reference = store.write(key="big.json", content=minified)
        tool = make_read_tool(store)

        header, body, footer = _window(tool.invoke(reference=reference))
        assert (
            header
            == f"[Line 1 of 1, characters 1-{len(body)} of {len(minified)}: the line is too long to return at once.]"
        )
        assert footer == (
            f"[Not finished: call read_offloaded_result again with the same reference and offset=1, "
            f"char_offset={len(body)} for the rest of line 1.]"
        )
        header, second, _footer = _window(tool.invoke(reference=reference, offset=1, char_offset=len(body)))
        assert minified.startswith(body + second)
        assert header.startswith(f"[Line 1 of 1, characters {len(body) + 1}-")
        last = tool.invoke(reference=reference, offset=1, char_offset=len(minified) - 10)
        header = f"[Lines 1-1 of 1, from character {len(minified) - 9} of line 1 on.]"
        assert last == f"{header}\n{minified[-10:]}\n[End of the result.]"

    def test_paging_through_a_mix_of_long_and_short_lines(self, store: ContentAddressedToolResultStore) -> None:
        text = "short\n" + "y" * 45_000 + "\n" + "z" * 19_990 + "\n\n\nend"
        reference = store.write(key="mix.txt", content=text)
        assert _read_all(make_read_tool(store), reference) == text
        assert _read_all(make_read_tool(store, max_chars=1_000), reference, limit=2, cap=1_000) == text

    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(
        text=st.text(alphabet=st.sampled_from("ab \n\r\t{}é€😀\x00"), max_size=6_000)
        | st.builds(lambda run, tail: "w" * run + tail, st.integers(0, 7_000), st.text(max_size=50)),
        cap=st.integers(1_000, 3_000),
        limit=st.none() | st.integers(1, 40),
        start=st.integers(1, 400),
    )
    def test_any_window_is_capped_and_the_footers_rebuild_the_text(
        self, shared_store: ContentAddressedToolResultStore, text: str, cap: int, limit: int | None, start: int
    ) -> None:
        reference = shared_store.write(key="any.txt", content=text)
        tool = make_read_tool(shared_store, max_chars=cap)
        lines = text.split("\n")
        if not text:
            assert tool.invoke(reference=reference) == "[The result is empty: it has no lines.]"
            return
        total = text.count("\n") + (not text.endswith("\n"))
        offset = 1 + (start - 1) % total
        skipped = sum(len(line) + 1 for line in lines[: offset - 1])
        assert _read_all(tool, reference, limit=limit, cap=cap, offset=offset) == text[skipped:]


class TestPattern:
    LOG = "".join(
        f"{number:04d} {'ERROR disk full' if number % 250 == 7 else 'INFO all good'} request={number * 37}\n"
        for number in range(1, 2001)
    )

    def test_lists_matching_lines_with_numbers_and_context(self, store: ContentAddressedToolResultStore) -> None:
        reference = store.write(key="log.txt", content=self.LOG)
        answer = make_read_tool(store).invoke(reference=reference, pattern="ERROR", context=1)
        lines = answer.splitlines()
        assert lines[0].startswith("[Lines matching 'ERROR' from line 1 on, of 2000.")
        assert lines[1:5] == [
            "6- 0006 INFO all good request=222",
            "7: 0007 ERROR disk full request=259",
            "8- 0008 INFO all good request=296",
            "--",
        ]
        assert [line.split(":")[0] for line in lines[1:-1] if ": " in line and "ERROR" in line] == [
            str(number) for number in range(7, 2001, 250)
        ]
        assert lines[-1] == "[No more matches.]"

    def test_case_insensitive_and_no_match(self, store: ContentAddressedToolResultStore) -> None:
        reference = store.write(key="log.txt", content=self.LOG)
        tool = make_read_tool(store)
        assert "7: 0007 ERROR disk full" in tool.invoke(reference=reference, pattern="(?i)error disk", context=0)
        assert tool.invoke(reference=reference, pattern="panic") == (
            "[No line matches 'panic' from line 1 on; the result has 2000 lines.]"
        )

    def test_pages_through_matches_with_the_footers_arguments(self, store: ContentAddressedToolResultStore) -> None:
        reference = store.write(key="log.txt", content=self.LOG)
        tool = make_read_tool(store)
        found, arguments = [], {"reference": reference, "pattern": r"request=\d*00\b", "limit": 7, "context": 0}
        for _ in range(100):
            answer = tool.invoke(**arguments)
            found += [int(row[1]) for row in re.finditer(r"^(\d+): ", answer, re.MULTILINE)]
            following = _NEXT.search(answer.splitlines()[-1])
            if following is None:
                break
            arguments = {**arguments, "offset": int(following[1])}
        expected = [number for number in range(1, 2001) if re.search(r"request=\d*00\b", f"request={number * 37}")]
        assert found == expected

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(
        lines=st.lists(st.text(alphabet="abc xyz", max_size=700), min_size=1, max_size=60),
        pattern=st.sampled_from(["a", "^b", "c$", "x+y", "[ab]{3}", "a z|zz", "", r"\bxyz\b"]),
        limit=st.integers(1, 30),
    )
    def test_following_the_footers_finds_every_matching_line(
        self, shared_store: ContentAddressedToolResultStore, lines: list[str], pattern: str, limit: int
    ) -> None:
        reference = shared_store.write(key="p.txt", content="\n".join(lines))
        tool = make_read_tool(shared_store, max_chars=1_500)
        found = _matching_lines_found(tool, reference, pattern=pattern, limit=limit, cap=1_500)
        # A final newline ends the last line rather than starting an empty one.
        real_lines = lines[:-1] if lines[-1] == "" else lines
        expected = {number for number, line in enumerate(real_lines, start=1) if re.search(pattern, line)}
        assert found == expected

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(
        lines=st.lists(st.text(alphabet="abc xyzé日", max_size=700), min_size=1, max_size=40),
        pattern=st.sampled_from(["a", "^b", "c$", "x{1,3}y", "[ab]{3}", "a z|zz", "", r"\bxyz\b", "é日|日 "]),
        limit=st.integers(1, 30),
    )
    def test_lines_searched_in_pieces_still_yield_every_short_match(
        self,
        shared_store: ContentAddressedToolResultStore,
        monkeypatch: pytest.MonkeyPatch,
        lines: list[str],
        pattern: str,
        limit: int,
    ) -> None:
        # Chunks of 64 bytes: most lines are searched in pieces overlapping by 16 bytes, longer than any match here.
        monkeypatch.setattr(text_search, "_WORK_PER_CALL", 1)
        monkeypatch.setattr(text_search, "_MIN_CHUNK_BYTES", 64)
        reference = shared_store.write(key="p.txt", content="\n".join(lines))
        tool = make_read_tool(shared_store, max_chars=1_500)
        found = _matching_lines_found(tool, reference, pattern=pattern, limit=limit, cap=1_500)
        real_lines = lines[:-1] if lines[-1] == "" else lines
        # RE2's \b knows only ASCII word characters.
        expected = {number for number, line in enumerate(real_lines, start=1) if re.search(pattern, line, re.ASCII)}
        assert found == expected

    def test_a_line_searched_in_pieces_says_so(
        self, store: ContentAddressedToolResultStore, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(text_search, "_WORK_PER_CALL", 1)
        monkeypatch.setattr(text_search, "_MIN_CHUNK_BYTES", 64)
        text = "short line\n" + "x" * 1_000 + "NEEDLE" + "y" * 1_000 + "\nlast"
        reference = store.write(key="long.txt", content=text)
        tool = make_read_tool(store)
        lines = tool.invoke(reference=reference, pattern="NEEDLE").splitlines()
        assert lines[1].startswith("1- short line")
        assert lines[2].startswith("2@1000: ...") and "NEEDLE" in lines[2]
        note = (
            "[Lines longer than 64 bytes are searched in overlapping pieces: a match longer than 16 bytes that crosses "
            "from one piece to the next may be missed.]"
        )
        assert lines[-2:] == [note, "[No more matches.]"]
        assert tool.invoke(reference=reference, pattern="MISSING").splitlines() == [
            "[No line matches 'MISSING' from line 1 on; the result has 3 lines.]",
            note,
        ]
        # A match across the end of a piece is found in the next one, which starts 16 bytes before that end.
        shifted = "\n".join("é" * (shift % 2) + "x" * shift + "NEEDLE" + "y" * 200 for shift in range(200))
        found = _matching_lines_found(
            tool, store.write(key="shifted.txt", content=shifted), pattern="NEEDLE", limit=500, cap=CAP
        )
        assert found == set(range(1, 201))
        # Lines that fit a chunk are searched whole, and nothing is said.
        assert tool.invoke(reference=reference, pattern="last", offset=3).splitlines()[-2:] == [
            "3: last",
            "[No more matches.]",
        ]

    def test_matches_in_a_long_line_are_shown_around_them(self, store: ContentAddressedToolResultStore) -> None:
        minified = json.dumps([{"id": number, "ok": number != 4321} for number in range(10_000)])
        reference = store.write(key="m.json", content=minified)
        answer = make_read_tool(store).invoke(reference=reference, pattern='"ok": false')
        [row] = [line for line in answer.splitlines() if line.startswith("1@")]
        char = int(row.split(":")[0][2:])
        assert minified[char:].startswith('"ok": false') and '{"id": 4321, "ok": false}' in row
        assert len(row) < 400
        following = make_read_tool(store).invoke(reference=reference, offset=1, char_offset=char - 13, limit=1)
        assert _window(following)[1].startswith('{"id": 4321,')

    @pytest.mark.parametrize(
        ("pattern", "complaint"),
        [
            (r"(a)\1", "no backreferences"),
            ("(?=lookahead)", "no lookahead or lookbehind"),
            ("unbalanced(", "not a valid RE2 regular expression"),
            ("x" * 1001, "use at most 1000"),
        ],
    )
    def test_a_bad_pattern_is_a_message(
        self, store: ContentAddressedToolResultStore, pattern: str, complaint: str
    ) -> None:
        answer = make_read_tool(store).invoke(reference=store.write(key="log.txt", content=self.LOG), pattern=pattern)
        assert isinstance(answer, str) and answer.startswith("Error: ") and complaint in answer

    @pytest.mark.parametrize("pattern", ["(a+)+$", "(.*){50}x", "(x+x+)+y", "(?:a|b|c|d|e|f|g)[^z]{500}z9", "(a|aa)*b"])
    def test_no_pattern_can_stall_the_agent(self, store: ContentAddressedToolResultStore, pattern: str) -> None:
        hostile = "a" * 2_500_000 + "\n" + "x" * 2_500_000 + "\n" + "ab" * 100_000
        reference = store.write(key="hostile.txt", content=hostile)
        started = time.monotonic()
        answer = make_read_tool(store).invoke(reference=reference, pattern=pattern)
        assert time.monotonic() - started < 5 + _SLACK
        assert isinstance(answer, str) and len(answer) <= CAP

    @pytest.mark.parametrize("layout", ["lines", "one line"])
    @pytest.mark.parametrize("pattern", _EXPENSIVE_PATTERNS)
    def test_an_expensive_pattern_answers_by_the_deadline(
        self, shared_store: ContentAddressedToolResultStore, expensive_texts: dict[str, str], pattern: str, layout: str
    ) -> None:
        seconds = 0.5
        tool = make_read_tool(shared_store, search_seconds=seconds)
        started = time.monotonic()
        answer = tool.invoke(reference=expensive_texts[layout], pattern=pattern)
        elapsed = time.monotonic() - started
        # Each RE2 call searches a chunk sized to cost about 50 ms, so the deadline is overrun by about that much.
        # Searching the 4 MB in one call took up to 28 s.
        assert elapsed < seconds + _SLACK, f"{elapsed:.1f} s"
        assert isinstance(answer, str) and len(answer) <= CAP
        # No line holds a c: the search either went through the whole text, or says it stopped and where to go on.
        finished = answer.startswith("[No line matches ")
        footer = answer.splitlines()[-1]
        assert finished or (
            footer.startswith("[The search stopped after 0.5 seconds at line ") and _NEXT.search(footer) is not None
        )
        if pattern == _EXPENSIVE_PATTERNS[2]:
            assert not finished  # about 30 s of work on the machine this was measured on

    def test_an_expensive_search_goes_on_where_it_stopped(
        self, shared_store: ContentAddressedToolResultStore, expensive_texts: dict[str, str]
    ) -> None:
        tool = make_read_tool(shared_store, search_seconds=0.3)
        arguments: dict[str, Any] = {"reference": expensive_texts["one line"], "pattern": _EXPENSIVE_PATTERNS[2]}
        reached = 0
        for _ in range(3):
            started = time.monotonic()
            answer = tool.invoke(**arguments)
            assert time.monotonic() - started < 0.3 + _SLACK
            lines = answer.splitlines()
            assert lines[-2].startswith("[Lines longer than ") and "may be missed" in lines[-2]
            following = _NEXT.search(lines[-1])
            assert following is not None and "stopped" in lines[-1]
            assert int(following[1]) == 1 and int(following[2]) > reached
            reached = int(following[2])
            arguments = {**arguments, "offset": 1, "char_offset": reached}

    @pytest.mark.parametrize(
        ("pattern", "complaint"),
        [
            (r"(?:\pL{3}.){40}Q", "too complex to search: it compiles to too many RE2 instructions"),
            (".{0,1000}.{0,200}", "too complex to search: it compiles to 10,804 RE2 instructions"),
            ("(?:" + "|".join(f"a.{{{number}}}b" for number in range(1, 60)) + ")c", "at most 10,000 are allowed"),
            ("(?:a{100}){20}", "counts nested in counts multiply"),
        ],
    )
    def test_a_too_complex_pattern_is_a_message(
        self, store: ContentAddressedToolResultStore, pattern: str, complaint: str
    ) -> None:
        reference = store.write(key="log.txt", content=self.LOG)
        started = time.monotonic()
        answer = make_read_tool(store).invoke(reference=reference, pattern=pattern)
        assert time.monotonic() - started < _SLACK
        assert isinstance(answer, str) and answer.startswith("Error: The pattern ") and complaint in answer
        assert "write large counts such as .{0,500} or [a-z]{200}" in answer or "write large ones as * or +" in answer

    @pytest.mark.slow
    def test_a_search_that_runs_out_of_time_says_where_to_go_on(self, store: ContentAddressedToolResultStore) -> None:
        text = "".join(f"{number} " + "filler " * 20 + "\n" for number in range(60_000)) + "needle\n"
        reference = store.write(key="hay.txt", content=text)
        tool = make_read_tool(store, search_seconds=1e-6)
        arguments: dict[str, Any] = {"reference": reference, "pattern": "needle"}
        for _ in range(100):
            answer = tool.invoke(**arguments)
            footer = answer.splitlines()[-1]
            if "stopped" not in footer:
                break
            assert "call read_offloaded_result again with the same reference and pattern and offset=" in footer
            next_call = _NEXT.search(footer)
            assert next_call is not None
            arguments["offset"] = int(next_call[1])
        assert "60001: needle" in answer


class TestBinary:
    def test_an_image_comes_back_as_an_image(self, store: ContentAddressedToolResultStore) -> None:
        image = png_bytes(500, seed=3)
        reference = store.write(key="shot.png", content=image)
        answer = make_read_tool(store).invoke(reference=reference)
        assert isinstance(answer, list)
        text, picture = answer
        assert isinstance(text, TextContent) and "image/png" in text.text and reference in text.text
        assert isinstance(picture, ImageContent) and picture.mime_type == "image/png"
        assert base64.b64decode(picture.base64_image) == image

    def test_an_image_without_a_telling_extension_is_recognised(self, store: ContentAddressedToolResultStore) -> None:
        answer = make_read_tool(store).invoke(reference=store.write(key="blob.bin", content=png_bytes(300)))
        assert isinstance(answer, list) and isinstance(answer[1], ImageContent)

    def test_other_binary_content_is_described(self, store: ContentAddressedToolResultStore) -> None:
        reference = store.write(key="report.pdf", content=pdf_bytes(12_345))
        assert make_read_tool(store).invoke(reference=reference) == (
            f"'{reference}' holds application/pdf (12,345 bytes), which cannot be shown as text."
        )

    def test_a_huge_image_is_described(self, store: ContentAddressedToolResultStore) -> None:
        reference = store.write(key="huge.png", content=png_bytes(5_000))
        answer = make_read_tool(store, max_image_bytes=1_000).invoke(reference=reference)
        assert isinstance(answer, str) and "larger than the 1,000 bytes this tool returns" in answer

    def test_an_image_reaches_the_model_in_a_real_agent_run(self, store: ContentAddressedToolResultStore) -> None:
        image = png_bytes(6_000, seed=9)

        def take_screenshot() -> list[ImageContent]:
            """Take a screenshot of the page."""
            return [image_block(image)]

        seen: list[ChatMessage] = []

        def model(messages: list[ChatMessage]) -> ChatMessage:
            seen[:] = messages
            calls = [call.tool_name for message in messages for call in message.tool_calls]
            if calls.count("take_screenshot") < 2:
                return ChatMessage.from_assistant(tool_calls=[ToolCall(tool_name="take_screenshot", arguments={})])
            if "read_offloaded_result" not in calls:
                reference = next(r for message in messages for r in message.meta.get("tool_result_offloaded", []))
                arguments = {"reference": reference}
                return ChatMessage.from_assistant(tool_calls=[ToolCall("read_offloaded_result", arguments, id="r")])
            return ChatMessage.from_assistant("I saw it.")

        screenshot = create_tool_from_function(take_screenshot, outputs_to_string={"raw_result": True})
        agent = Agent(
            chat_generator=MockChatGenerator(response_fn=model, meta={"usage": None}),
            tools=[screenshot, make_read_tool(store)],
            hooks={
                "before_llm": [
                    CompactionHook(
                        compactor=DedupOffloadCompactor(store),
                        context_window=5_000,
                        token_counter=PayloadCounter(),  # measures images by their payload
                    )
                ]
            },
        )
        agent.warm_up()
        agent.run(messages=[ChatMessage.from_user("Look at the page.")])

        [read_back] = [
            message for message in seen if message.tool_call_result and message.tool_call_result.origin.id == "r"
        ]
        assert read_back.tool_call_result is not None
        parts = read_back.tool_call_result.result
        assert isinstance(parts, list) and isinstance(parts[1], ImageContent)
        assert base64.b64decode(parts[1].base64_image) == image
        assert any("tool_result_offloaded" in message.meta for message in seen)


class TestErrors:
    @pytest.mark.parametrize(
        "reference",
        [
            "not a reference",
            "blake3/9b/" + "0" * 62,  # too short a digest
            "BLAKE3/00/" + "0" * 62 + ".txt",
            "../../../etc/passwd",
            "/etc/passwd",
            "blake3/00/" + "0" * 62 + ".txt",  # well formed, never written
        ],
    )
    def test_unknown_or_malformed_references(self, store: ContentAddressedToolResultStore, reference: str) -> None:
        answer = make_read_tool(store).invoke(reference=reference)
        assert isinstance(answer, str) and answer.startswith("Error: no offloaded result at ")
        assert "Traceback" not in answer

    def test_another_namespace_is_as_unknown_as_nothing(self, store_root: Path) -> None:
        with (
            ContentAddressedToolResultStore(store_root, namespace="alice") as alice,
            ContentAddressedToolResultStore(store_root, namespace="mallory") as mallory,
        ):
            theirs = alice.write(key="secret.txt", content="alice's secret")
            never = "blake3/00/" + "0" * 62 + ".txt"
            tool = make_read_tool(mallory)
            assert tool.invoke(reference=theirs) == tool.invoke(reference=never).replace(never, theirs)
            assert "secret" not in tool.invoke(reference=theirs).replace("secret.txt", "")

    def test_a_damaged_blob_is_a_message(self, file_store: ContentAddressedToolResultStore) -> None:
        reference = file_store.write(key="r.txt", content="precious " * 1000)
        [blob] = [path for path in (file_store.root / "blobs").rglob("*") if path.is_file()]
        blob.write_bytes(b"not zstd at all")
        answer = make_read_tool(file_store).invoke(reference=reference)
        assert answer == f"Error: the offloaded result at '{reference}' could not be read: it is missing or damaged."

    def test_a_planted_symlink_is_a_damaged_result_and_a_warning(
        self, file_store: ContentAddressedToolResultStore, tmp_path: Path, caplog: pytest.LogCaptureFixture
    ) -> None:
        reference = file_store.write(key="r.txt", content="precious " * 1000)
        [blob] = [path for path in (file_store.root / "blobs").rglob("*") if path.is_file()]
        outside = tmp_path / "outside.zst"
        outside.write_bytes(blob.read_bytes())
        blob.unlink()
        blob.symlink_to(outside)
        answer = make_read_tool(file_store).invoke(reference=reference)
        assert answer == f"Error: the offloaded result at '{reference}' could not be read: it is missing or damaged."
        assert any("symlink" in record.getMessage() for record in caplog.records if record.levelname == "WARNING")

    def test_a_closed_store_is_a_message(self, store_root: Path) -> None:
        store = ContentAddressedToolResultStore(store_root)
        reference = store.write(key="r.txt", content="gone")
        store.close()
        answer = make_read_tool(store).invoke(reference=reference)
        assert answer == f"Error: the store could not read '{reference}' (StoreClosedError); the result is unavailable."

    def test_a_file_system_store_never_reads_outside_its_root(self, tmp_path: Path) -> None:
        (tmp_path / "secret.txt").write_text("outside the store")
        root = tmp_path / "store"
        store = FileSystemToolResultStore(root)
        reference = store.write(key="inside.txt", content="inside the store")
        tool = make_read_tool(store)
        assert tool.invoke(reference=reference) == "inside the store"
        for escape in ["../secret.txt", str(tmp_path / "secret.txt"), "inside.txt/../../secret.txt"]:
            answer = tool.invoke(reference=escape)
            assert answer.startswith("Error: no offloaded result") and "outside the store" not in answer
        assert tool.invoke(reference=".").startswith("Error: ")

    @pytest.mark.parametrize(
        ("arguments", "complaint"),
        [
            ({"offset": 0}, "`offset` must be at least 1, got 0."),
            ({"offset": "twelve"}, "`offset` must be a whole number"),
            ({"offset": 99}, "offset=99 is past the end: the result has 3 lines, so use an offset from 1 to 3."),
            ({"offset": 2, "char_offset": 50}, "char_offset=50 is past the end of line 2, which has 3 characters"),
            ({"limit": 0}, "`limit` must be at least 1, got 0."),
            ({"pattern": "x", "context": 11}, "`context` must be from 0 to 10, got 11."),
            ({"pattern": 5}, "`pattern` must be a string, got int."),
            ({"path": "x"}, "Unknown argument(s) 'path'; the arguments are reference, offset, limit,"),
            ({"reference": None}, "`reference` is required"),
            ({"reference": 12}, "`reference` must be a string"),
            # More digits than Python converts to a number.
            ({"offset": "9" * 5_000}, "`offset` must be at least 1, written in at most 4,000 digits; got more."),
            ({"limit": " 9" + "0" * 5_000}, "`limit` must be at least 1, written in at most 4,000 digits; got more."),
            ({"char_offset": "1" * 4_301}, "`char_offset` must be at least 0, written in at most 4,000 digits"),
            ({"pattern": "x", "context": "5" * 4_400}, "`context` must be from 0 to 10, written in at most 4,000"),
            ({"offset": -(10**5_000)}, "`offset` must be at least 1, written in at most 4,000 digits; got more."),
            ({"offset": "0" * 5_000 + "9"}, "offset=9 is past the end: the result has 3 lines"),
        ],
    )
    def test_bad_arguments_are_messages(
        self, store: ContentAddressedToolResultStore, arguments: dict[str, Any], complaint: str
    ) -> None:
        reference = store.write(key="r.txt", content="one\ntwo\nsix\n")
        answer = make_read_tool(store).invoke(**{"reference": reference, **arguments})
        assert isinstance(answer, str) and answer.startswith("Error: ") and complaint in answer

    def test_even_a_message_stays_within_the_cap(self, store: ContentAddressedToolResultStore) -> None:
        reference = store.write(key="r.txt", content="text")
        tool = make_read_tool(store, max_chars=1_000)
        cases: list[dict[str, Any]] = [{"pattern": "(" * 999}, {f"argument_{number}" * 10: 1 for number in range(500)}]
        for arguments in cases:
            answer = tool.invoke(reference=reference, **arguments)
            assert isinstance(answer, str) and answer.startswith("Error: ") and len(answer) <= 1_000

    def test_numbers_written_as_strings_are_accepted(self, store: ContentAddressedToolResultStore) -> None:
        reference = store.write(key="r.txt", content="one\ntwo\nsix\n")
        assert make_read_tool(store).invoke(reference=reference, offset="2", limit="1") == (
            "[Lines 2-2 of 3.]\ntwo\n\n[Not finished: call read_offloaded_result again with the same reference and "
            "offset=3 for the next lines (1 of 3 left).]"
        )


class TestTheTool:
    def test_schema_and_descriptions(self, store: ContentAddressedToolResultStore) -> None:
        tool = make_read_tool(store)
        assert tool.name == "read_offloaded_result"
        Draft202012Validator.check_schema(tool.parameters)
        assert tool.parameters["required"] == ["reference"]
        assert set(tool.parameters["properties"]) == {
            "reference",
            "offset",
            "limit",
            "char_offset",
            "pattern",
            "context",
            "jmespath",
        }
        assert all(len(spec["description"]) > 30 for spec in tool.parameters["properties"].values())
        assert "reference" in tool.description and "pattern" in tool.description
        assert make_read_tool(store, name="fetch_back").tool_spec["name"] == "fetch_back"

    @pytest.mark.parametrize(
        ("settings", "complaint"),
        [
            ({"max_chars": 999}, "`max_chars` must be at least 1000"),
            ({"name": "has space"}, "`name` must be 1 to 64"),
            ({"max_image_bytes": -1}, "`max_image_bytes` must be at least 0"),
            ({"search_seconds": 0}, "`search_seconds` must be more than 0"),
        ],
    )
    def test_rejects_bad_settings(
        self, store: ContentAddressedToolResultStore, settings: dict[str, Any], complaint: str
    ) -> None:
        with pytest.raises(ValueError, match=re.escape(complaint)):
            make_read_tool(store, **settings)
