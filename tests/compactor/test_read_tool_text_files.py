"""
Binary references that hold text: a tool's `FileContent` of `text/csv` or `application/json` is stored as bytes, and
the read tool gives it to the model as text, paged and searched exactly like a text result, as Haystack's own store
and read tool would. Images stay images, and other binary content stays a description.
"""

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from haystack.dataclasses import ImageContent
from haystack.hooks.tool_result_offloading import FileSystemToolResultStore
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from casstore import ContentAddressedToolResultStore
from casstore.compactor import make_read_tool
from tests.compactor_helpers import pdf_bytes, png_bytes

CSV = "".join(f"{number},item {number},{number * 7 % 13}\n" for number in range(1, 41))


@pytest.fixture(scope="module")
def shared_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ContentAddressedToolResultStore]:
    """One store for the property test, which writes many small results."""
    with ContentAddressedToolResultStore(tmp_path_factory.mktemp("shared")) as opened:
        yield opened


@pytest.mark.parametrize(
    ("key", "text"),
    [
        ("rows.csv", CSV),
        ("data.json", '{"rows": [1, 2, 3], "name": "caf\u00e9 \U0001f600"}\n'),
        ("page.svg", '<svg xmlns="http://www.w3.org/2000/svg"><rect width="1" height="1"/></svg>'),
        ("compacted_fetch_1.bin", "Haystack names a file of unknown type .bin; its text is still text.\n"),
        ("no-extension", "plain words\n"),
        ("report.pdf", "%PDF-1.4\nan all-ASCII PDF is text, as Haystack's store reads it\n"),
        ("marked.txt", "\ufeffa byte-order mark stays, as in Haystack's store\n"),
    ],
)
def test_binary_that_is_utf8_text_reads_back_as_that_text(
    store: ContentAddressedToolResultStore, key: str, text: str
) -> None:
    reference = store.write(key=key, content=text.encode())
    assert isinstance(store.read(reference), bytes)  # the store still returns what was written
    assert make_read_tool(store).invoke(reference=reference) == text


def test_a_long_csv_is_paged_and_searched_like_text(store: ContentAddressedToolResultStore) -> None:
    rows = "".join(f"{number},{'x' * 40},{number % 5}\n" for number in range(1, 2001))
    reference = store.write(key="big.csv", content=rows.encode())
    tool = make_read_tool(store, max_chars=1_000)

    first = tool.invoke(reference=reference)
    assert isinstance(first, str) and first.startswith("[Lines 1-") and first.count("\n") > 5
    window = tool.invoke(reference=reference, offset=1500, limit=2)
    assert isinstance(window, str)
    header_end, footer_start = window.index("\n"), window.rindex("\n")  # the frame lines hold no newline
    header, body, footer = window[:header_end], window[header_end + 1 : footer_start], window[footer_start + 1 :]
    assert header == "[Lines 1500-1501 of 2000.]"
    assert body == f"1500,{'x' * 40},0\n1501,{'x' * 40},1\n"
    assert footer.startswith("[Not finished: call read_offloaded_result again with the same reference and offset=1502 ")
    found = make_read_tool(store).invoke(reference=reference, pattern=r"^199[0-9],", context=0)
    assert isinstance(found, str)
    assert [line.split(":")[0] for line in found.splitlines()[1:-1]] == [str(number) for number in range(1990, 2000)]
    assert found.splitlines()[-1] == "[No more matches.]"


_LINES = st.lists(st.text(st.characters(codec="utf-8", exclude_characters="\x00\n"), max_size=300), max_size=40)
_ARGUMENTS = st.fixed_dictionaries(
    {},
    optional={
        "offset": st.integers(1, 45),
        "limit": st.integers(1, 50),
        "char_offset": st.integers(0, 400),
        "pattern": st.sampled_from(["a", "(?i)b", "^", "[0-9]+", "x|y", "\u00e9"]),
        "context": st.integers(0, 3),
    },
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=_LINES, ending=st.sampled_from(["", "\n", "\r\n"]), arguments=_ARGUMENTS)
def test_every_answer_is_the_answer_for_the_same_text(
    shared_store: ContentAddressedToolResultStore, lines: list[str], ending: str, arguments: dict[str, Any]
) -> None:
    text = "\n".join(lines) + (ending if lines else "")
    as_text = shared_store.write(key="r.txt", content=text)
    as_file = shared_store.write(key="r.csv", content=text.encode())
    tool = make_read_tool(shared_store, max_chars=1_000)
    assert tool.invoke(reference=as_file, **arguments) == tool.invoke(reference=as_text, **arguments)


def test_the_same_answers_as_over_haystacks_store(tmp_path: Path, store: ContentAddressedToolResultStore) -> None:
    # Haystack's store reads a UTF-8 file back as `str`; ours keeps bytes; the tool answers alike over both.
    haystack_store = FileSystemToolResultStore(tmp_path / "haystack")
    data = CSV.encode() * 30
    theirs, ours = make_read_tool(haystack_store), make_read_tool(store)
    theirs_reference = haystack_store.write(key="rows.csv", content=data)
    ours_reference = store.write(key="rows.csv", content=data)
    cases: list[dict[str, Any]] = [
        {},
        {"offset": 700},
        {"pattern": "^7,", "context": 1},
        {"offset": 3, "char_offset": 2},
    ]
    for arguments in cases:
        assert ours.invoke(reference=ours_reference, **arguments) == theirs.invoke(
            reference=theirs_reference, **arguments
        )


@pytest.mark.parametrize(
    ("key", "data", "kind"),
    [
        ("notes.txt", "UTF-16 text holds NUL bytes".encode("utf-16-le"), "text/plain"),
        ("table.csv", b"id,name\n1,a\x00b\n", "text/csv"),
        ("latin1.csv", "caf\u00e9,1\n".encode("latin-1"), "text/csv"),
        ("report.pdf", pdf_bytes(2_000), "application/pdf"),
        ("archive.zip", b"PK\x05\x06" + b"\x00" * 18, "application/zip"),
    ],
)
def test_binary_that_is_not_text_is_described(
    store: ContentAddressedToolResultStore, key: str, data: bytes, kind: str
) -> None:
    reference = store.write(key=key, content=data)
    assert make_read_tool(store).invoke(reference=reference) == (
        f"'{reference}' holds {kind} ({len(data):,} bytes), which cannot be shown as text."
    )


@pytest.mark.parametrize(
    ("key", "data"),
    [
        ("shot.png", png_bytes(400)),
        ("tiny.gif", b"GIF89a" + b"x" * 30),  # all ASCII, so UTF-8, but an image by its extension
        ("blob.bin", b"GIF89a" + b"y" * 30),  # and by its signature
    ],
)
def test_images_stay_images_even_when_their_bytes_are_utf8(
    store: ContentAddressedToolResultStore, key: str, data: bytes
) -> None:
    answer = make_read_tool(store).invoke(reference=store.write(key=key, content=data))
    assert isinstance(answer, list)
    image = answer[1]
    assert isinstance(image, ImageContent) and base64.b64decode(image.base64_image) == data


def test_empty_binary_reads_as_an_empty_text(store: ContentAddressedToolResultStore) -> None:
    reference = store.write(key="empty.csv", content=b"")
    assert make_read_tool(store).invoke(reference=reference) == "[The result is empty: it has no lines.]"
