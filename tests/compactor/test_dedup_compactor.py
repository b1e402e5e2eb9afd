"""
`DedupOffloadCompactor` on its own: the same decisions and the same reference text as Haystack's
`ToolResultOffloadCompactor`, checked side by side, and what it does better (no orphans, dedup, history).
"""

import ast
import asyncio
import json
import logging
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest
from haystack.dataclasses import ChatMessage, ToolCall
from haystack.hooks.compaction import ToolResultOffloadCompactor, ToolResultPruningCompactor
from haystack.hooks.compaction.utils import _COMPACTION_META_KEY
from haystack.hooks.tool_result_offloading import FileSystemToolResultStore
from haystack.hooks.tool_result_offloading.utils import _OFFLOADED_META_KEY
from haystack.tools import ToolsType

from casstore import ContentAddressedToolResultStore, compactor
from casstore.compactor import DedupOffloadCompactor
from casstore.compactor.pointers import CASSTORE_META_KEY, COMPACTION_META_KEY, OFFLOADED_META_KEY
from tests.compactor_helpers import (
    PayloadCounter,
    file_block,
    image_block,
    normalised,
    pdf_bytes,
    png_bytes,
    tool_call,
    tool_pairs_intact,
    tool_result,
    zoo_conversation,
)

pytestmark = pytest.mark.filterwarnings("ignore::haystack.utils.experimental.ExperimentalWarning")

COUNTER = PayloadCounter()


def _both_compact(
    theirs_store: Any, ours_store: Any, settings: dict[str, Any], messages: list[ChatMessage], target: int
) -> tuple[list[ChatMessage] | None, list[ChatMessage] | None]:
    """Haystack's compactor and ours, each over its own store, on the same conversation and target."""
    theirs = ToolResultOffloadCompactor(store=theirs_store, **settings).compact(
        messages=messages, target_tokens=target, token_counter=COUNTER
    )
    ours = DedupOffloadCompactor(ours_store, **settings).compact(
        messages=messages, target_tokens=target, token_counter=COUNTER
    )
    return theirs, ours


class TextOnlyStore:
    """A small in-memory `ToolResultStore` without binary support, as a user might write one."""

    supports_binary_content = False

    def __init__(self) -> None:
        self.entries: dict[str, str] = {}

    def write(self, *, key: str, content: str | bytes) -> str:
        assert isinstance(content, str), "a text-only store is only ever given text"
        reference = f"mem://{key}"
        self.entries[reference] = content
        return reference

    def read(self, reference: str) -> str | bytes:
        return self.entries[reference]

    def to_dict(self) -> dict[str, Any]:
        return {"type": "test_compactor.TextOnlyStore", "init_parameters": {}}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "TextOnlyStore":
        return cls()


def _table(store: ContentAddressedToolResultStore, query: str) -> list[tuple[Any, ...]]:
    """Ask `index.db` directly, as a person with `sqlite3 index.db` would."""
    with sqlite3.connect(store.root / "index.db") as connection:
        return connection.execute(query).fetchall()


def _offloaded_positions(messages: list[ChatMessage]) -> list[int]:
    return [
        index
        for index, message in enumerate(messages)
        if isinstance(message.meta.get(COMPACTION_META_KEY), dict)
        and message.meta[COMPACTION_META_KEY].get("strategy") == "tool_result_offloading"
    ]


def _result(message: ChatMessage) -> Any:
    assert message.tool_call_result is not None
    return message.tool_call_result.result


def _without_casstore_meta(messages: list[ChatMessage]) -> list[dict[str, Any]]:
    """The messages as dictionaries without casstore's own meta (the compaction id), all else as it is."""
    dictionaries = []
    for message in messages:
        data = message.to_dict()
        data["meta"] = {key: value for key, value in data["meta"].items() if key != CASSTORE_META_KEY}
        dictionaries.append(data)
    return dictionaries


class TestSettings:
    @pytest.mark.parametrize(
        ("settings", "message"),
        [
            ({"min_keep_steps": 0}, "`min_keep_steps` must be at least 1"),
            ({"min_tokens": -1}, "`min_tokens` must be at least 0"),
            ({"preview_chars": -1}, "`preview_chars` must be at least 0"),
        ],
    )
    def test_rejects_what_haystack_rejects(self, tmp_path: Path, settings: dict[str, Any], message: str) -> None:
        store = FileSystemToolResultStore(root=tmp_path)
        with pytest.raises(ValueError, match=message):
            ToolResultOffloadCompactor(store=store, **settings)
        with pytest.raises(ValueError, match=message):
            DedupOffloadCompactor(store, **settings)

    def test_defaults_are_haystacks(self, tmp_path: Path) -> None:
        store = FileSystemToolResultStore(root=tmp_path)
        theirs = ToolResultOffloadCompactor(store=store)
        ours = DedupOffloadCompactor(store)
        assert (ours.min_keep_steps, ours.min_tokens, ours.preview_chars) == (
            theirs.min_keep_steps,
            theirs.min_tokens,
            theirs.preview_chars,
        )


SIDE_BY_SIDE = [
    pytest.param({}, 0.0, id="defaults-target-0"),
    pytest.param({"min_tokens": 0, "preview_chars": 0}, 0.0, id="everything"),
    pytest.param({"min_tokens": 0}, 0.6, id="stops-at-target"),
    pytest.param({"min_keep_steps": 3, "min_tokens": 50}, 0.0, id="keep-three-steps"),
    pytest.param({"preview_chars": 5000, "min_tokens": 0}, 0.0, id="references-longer-than-results"),
    pytest.param({"min_tokens": 10_000}, 0.0, id="nothing-large-enough"),
    pytest.param({}, 2.0, id="already-fits"),
]


class TestIndependence:
    def test_uses_no_private_helper_of_haystack(self) -> None:
        package = Path(compactor.__file__).parent
        for module in package.glob("*.py"):
            for node in ast.walk(ast.parse(module.read_text())):
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("haystack"):
                    private = [alias.name for alias in node.names if alias.name.startswith("_")]
                    assert not private, f"{module.name} imports {private} from {node.module}"

    def test_marks_messages_with_haystacks_meta_keys(self) -> None:
        assert (COMPACTION_META_KEY, OFFLOADED_META_KEY) == (_COMPACTION_META_KEY, _OFFLOADED_META_KEY)


class TestSideBySideWithHaystack:
    @pytest.mark.parametrize(("settings", "fraction"), SIDE_BY_SIDE)
    def test_same_offloads_as_haystack_on_file_system_stores(
        self, tmp_path: Path, settings: dict[str, int], fraction: float
    ) -> None:
        messages = zoo_conversation()
        target = int(COUNTER.count(messages) * fraction)
        # Roots of equal length, so references of equal length, so equal token counts.
        theirs_store, ours_store = FileSystemToolResultStore(tmp_path / "a"), FileSystemToolResultStore(tmp_path / "b")

        theirs, ours = _both_compact(theirs_store, ours_store, settings, messages, target)
        if theirs is None:
            assert ours is None
            return
        assert ours is not None
        assert _offloaded_positions(ours) == _offloaded_positions(theirs)
        assert normalised(ours, ours_store.read) == normalised(theirs, theirs_store.read)

    @pytest.mark.parametrize(("settings", "fraction"), SIDE_BY_SIDE)
    def test_byte_for_byte_haystacks_text_on_content_addressed_stores(
        self, tmp_path: Path, settings: dict[str, int], fraction: float
    ) -> None:
        # Content-addressed references depend only on the content, so both compactors reference the same hashes.
        messages = zoo_conversation()
        target = int(COUNTER.count(messages) * fraction)
        with (
            ContentAddressedToolResultStore(tmp_path / "theirs") as theirs_store,
            ContentAddressedToolResultStore(tmp_path / "ours") as ours_store,
        ):
            theirs, ours = _both_compact(theirs_store, ours_store, settings, messages, target)
        if theirs is None:
            assert ours is None
            return
        assert ours is not None
        assert _without_casstore_meta(ours) == _without_casstore_meta(theirs)

    def test_pointer_formats(self, store: ContentAddressedToolResultStore) -> None:
        text = "x" * 1000
        image, document = png_bytes(900), pdf_bytes(800)
        messages = [
            ChatMessage.from_user("task"),
            tool_call("one"),
            tool_result(text, call_id="one"),
            tool_call("many"),
            tool_result([image_block(image), file_block(document), image_block(image, "image/jpeg")], call_id="many"),
            tool_call("last"),
            tool_result("newest", call_id="last"),
        ]
        compacted = DedupOffloadCompactor(store, min_tokens=0, preview_chars=4).compact(messages, 0, COUNTER)

        assert compacted is not None
        [text_reference] = compacted[2].meta[OFFLOADED_META_KEY]
        assert compacted[2].tool_call_result is not None
        assert compacted[2].tool_call_result.result == (
            f"Tool result offloaded to text (1000 characters) at '{text_reference}'. Preview: xxxx..."
        )
        png_reference, pdf_reference, jpeg_reference = compacted[4].meta[OFFLOADED_META_KEY]
        assert compacted[4].tool_call_result is not None
        assert compacted[4].tool_call_result.result == (
            "Tool result offloaded to 3 files:\n"
            f"1. image/png ({len(image)} bytes) at '{png_reference}'\n"
            f"2. application/pdf named 'report.pdf' ({len(document)} bytes) at '{pdf_reference}'\n"
            f"3. image/jpeg ({len(image)} bytes) at '{jpeg_reference}'"
        )
        assert (png_reference.endswith(".png"), pdf_reference.endswith(".pdf")) == (True, True)
        assert jpeg_reference.endswith(".jpg") and jpeg_reference[:-4] == png_reference[:-4]
        assert store.read(png_reference) == image
        assert store.read(pdf_reference) == document


class TestRules:
    def test_keeps_origin_error_flag_and_meta_and_marks_the_message(
        self, store: ContentAddressedToolResultStore
    ) -> None:
        origin = ToolCall(tool_name="search", arguments={"q": "x"}, id="c1")
        messages = [
            tool_call("c1"),
            ChatMessage.from_tool(tool_result="r" * 2000, origin=origin, meta={"source": "web"}),
            *zoo_conversation()[-3:],
        ]
        compacted = DedupOffloadCompactor(store).compact(messages, 0, COUNTER)

        assert compacted is not None
        message = compacted[1]
        assert message.tool_call_result is not None
        assert message.tool_call_result.origin == origin
        assert message.tool_call_result.error is False
        assert message.meta["source"] == "web"
        assert message.meta[_OFFLOADED_META_KEY] == [store.prepare_write(key="k.txt", content="r" * 2000).reference]
        # Haystack's marker holds exactly Haystack's keys; casstore's compaction id has a key of its own.
        assert message.meta[_COMPACTION_META_KEY] == {
            "strategy": "tool_result_offloading",
            "original_tokens": COUNTER.count(messages=[messages[1]]),
        }
        assert set(message.meta) == {"source", _OFFLOADED_META_KEY, _COMPACTION_META_KEY, "casstore"}
        assert set(message.meta["casstore"]) == {"compaction_id"}
        # Haystack's own compactors treat the message as offloaded and leave it alone (the original they would take).
        assert ToolResultOffloadCompactor(store=store, min_tokens=0).compact(messages, 0, COUNTER) is not None
        assert ToolResultOffloadCompactor(store=store, min_tokens=0).compact(compacted, 0, COUNTER) is None
        assert ToolResultPruningCompactor(min_tokens=0).compact(compacted, 0, COUNTER) is None

    def test_never_mutates_the_input_and_keeps_calls_paired(self, store: ContentAddressedToolResultStore) -> None:
        messages = zoo_conversation()
        before = [message.to_dict() for message in messages]
        snapshot = list(messages)

        compacted = DedupOffloadCompactor(store, min_tokens=0).compact(messages, 0, COUNTER)

        assert compacted is not None and compacted is not messages
        assert messages == snapshot
        assert [message.to_dict() for message in messages] == before
        assert len(compacted) == len(messages)
        assert tool_pairs_intact(compacted)

    def test_leaves_ineligible_results_alone_and_stores_nothing(self, store: ContentAddressedToolResultStore) -> None:
        messages = [
            ChatMessage.from_user("task"),
            tool_call("small"),
            tool_result("small", call_id="small"),
            tool_call("error"),
            tool_result("error" * 100, call_id="error", error=True),
            tool_call("offloaded"),
            ChatMessage.from_tool(
                tool_result="offloaded" * 100,
                origin=ToolCall(tool_name="search", arguments={}, id="offloaded"),
                meta={OFFLOADED_META_KEY: ["stored-result"]},
            ),
            tool_call("compacted"),
            ChatMessage.from_tool(
                tool_result="compacted" * 100,
                origin=ToolCall(tool_name="search", arguments={}, id="compacted"),
                meta={COMPACTION_META_KEY: {"strategy": "other"}},
            ),
            tool_call("empty"),
            tool_result([], call_id="empty"),
            tool_call("newest"),
            tool_result("newest" * 1000, call_id="newest"),
        ]
        assert DedupOffloadCompactor(store, min_tokens=100).compact(messages, 0, COUNTER) is None
        assert _table(store, "SELECT count(*) FROM blobs") == [(0,)]
        assert _table(store, "SELECT count(*) FROM writes") == [(0,)]

    def test_protects_the_latest_tool_calling_steps(self, store: ContentAddressedToolResultStore) -> None:
        messages = [
            ChatMessage.from_user("task"),
            *(
                message
                for index in range(4)
                for message in (tool_call(f"c{index}"), tool_result("y" * 2000, call_id=f"c{index}"))
            ),
            ChatMessage.from_assistant("Thinking without tools does not count as a step."),
        ]
        compacted = DedupOffloadCompactor(store, min_keep_steps=2).compact(messages, 0, COUNTER)

        assert compacted is not None
        assert _offloaded_positions(compacted) == [2, 4]

    def test_returns_none_when_the_conversation_fits(self, store: ContentAddressedToolResultStore) -> None:
        messages = zoo_conversation()
        assert DedupOffloadCompactor(store).compact(messages, COUNTER.count(messages), COUNTER) is None

    def test_images_stay_with_a_store_without_binary_support(self, caplog: pytest.LogCaptureFixture) -> None:
        store = TextOnlyStore()
        messages = zoo_conversation()
        with caplog.at_level(logging.WARNING):
            compacted = DedupOffloadCompactor(store, min_tokens=0).compact(messages, 0, COUNTER)

        assert compacted is not None
        assert compacted[11] == messages[11]  # text, image and file
        assert compacted[19] == messages[19]  # an image
        assert "does not support binary content" in caplog.text and "screenshot" in caplog.text
        assert all(isinstance(content, str) for content in store.entries.values())


class TestWhatItDoesBetter:
    def test_no_orphan_entries_where_haystack_leaves_them(self, tmp_path: Path) -> None:
        # With the whole text quoted as the preview, no reference saves tokens, so no result is replaced.
        messages = zoo_conversation()
        with (
            ContentAddressedToolResultStore(tmp_path / "theirs") as theirs_store,
            ContentAddressedToolResultStore(tmp_path / "ours") as ours_store,
        ):
            settings: dict[str, Any] = {"min_tokens": 0, "preview_chars": 100_000}
            theirs = ToolResultOffloadCompactor(store=theirs_store, **settings).compact(messages, 0, COUNTER)
            ours = DedupOffloadCompactor(ours_store, **settings).compact(messages, 0, COUNTER)

            # Both replace only the results with images, whose references are short...
            assert theirs is not None and ours is not None
            assert _offloaded_positions(theirs) == _offloaded_positions(ours) == [11, 19]
            referenced = {reference for position in (11, 19) for reference in ours[position].meta[OFFLOADED_META_KEY]}
            ours_written = {row[0] for row in _table(ours_store, "SELECT reference FROM writes")}
            theirs_written = {row[0] for row in _table(theirs_store, "SELECT reference FROM writes")}
            # ...but Haystack's also wrote the texts it then left in the conversation.
            assert ours_written == referenced
            stayed = {theirs_store.read(reference) for reference in theirs_written - ours_written}
            assert stayed == {_result(messages[7]), "tiny"}
            assert _table(ours_store, "SELECT count(*) FROM blobs") == [(len(referenced),)]

    def test_only_replaced_results_are_stored(self, store: ContentAddressedToolResultStore) -> None:
        messages = zoo_conversation()
        target = int(COUNTER.count(messages) * 0.6)
        compacted = DedupOffloadCompactor(store, min_tokens=0).compact(messages, target, COUNTER)

        assert compacted is not None
        referenced = {reference for message in compacted for reference in message.meta.get(OFFLOADED_META_KEY, [])}
        referenced.discard("elsewhere")  # offloaded before, by someone else
        stored = {row[0] for row in _table(store, "SELECT reference FROM writes")}
        assert stored == referenced

    def test_identical_results_share_one_blob_and_one_reference(self, store: ContentAddressedToolResultStore) -> None:
        messages = zoo_conversation()
        compacted = DedupOffloadCompactor(store, min_tokens=0).compact(messages, 0, COUNTER)

        assert compacted is not None
        # c1, c6 (and the text part of c5, written under another key) are the same text.
        first, second = compacted[3].meta[OFFLOADED_META_KEY], compacted[13].meta[OFFLOADED_META_KEY]
        assert first == second
        assert compacted[11].meta[OFFLOADED_META_KEY][0] == first[0]
        blobs = _table(store, "SELECT count(*) FROM blobs")[0][0]
        distinct = {
            reference
            for position in _offloaded_positions(compacted)
            for reference in compacted[position].meta[OFFLOADED_META_KEY]
        }
        assert blobs == len({reference.rsplit(".", 1)[0].replace("/bin/", "/") for reference in distinct})

    def test_identical_parts_share_a_reference_with_any_store(self, tmp_path: Path) -> None:
        store = FileSystemToolResultStore(root=tmp_path)
        messages = zoo_conversation()
        compacted = DedupOffloadCompactor(store, min_tokens=0).compact(messages, 0, COUNTER)

        assert compacted is not None
        assert compacted[3].meta[OFFLOADED_META_KEY] == compacted[13].meta[OFFLOADED_META_KEY]
        written = sorted(path.name for path in tmp_path.iterdir())
        referenced = {
            Path(reference).name
            for position in _offloaded_positions(compacted)
            for reference in compacted[position].meta[OFFLOADED_META_KEY]
        }
        # A store that cannot tell a reference in advance is written first, as in Haystack: the small result whose
        # reference would cost more than itself was written, then left in the conversation.
        unused = {(tmp_path / name).read_text() for name in set(written) - referenced}
        assert referenced <= set(written)
        assert unused == {"tiny"}
        assert all(
            name.startswith(("compacted_search_", "compacted_fetch_", "compacted_screenshot_")) for name in written
        )

    def test_records_every_offload_of_a_compaction_under_one_id(self, store: ContentAddressedToolResultStore) -> None:
        messages = zoo_conversation()
        compacted = DedupOffloadCompactor(store, min_tokens=0).compact(messages, 0, COUNTER)

        assert compacted is not None
        rows = _table(
            store,
            "SELECT compaction_id, namespace, tool_name, tool_call_id, refs, original_tokens, saved_tokens "
            "FROM offloads ORDER BY id",
        )
        positions = _offloaded_positions(compacted)
        assert len(rows) == len(positions)
        assert len({row[0] for row in rows}) == 1
        for row, position in zip(rows, positions, strict=True):
            original, offloaded = messages[position], compacted[position]
            assert offloaded.tool_call_result is not None
            assert row[0] == offloaded.meta[CASSTORE_META_KEY]["compaction_id"]
            # Haystack's marker carries exactly what Haystack's own compactor writes, nothing of casstore's.
            assert offloaded.meta[COMPACTION_META_KEY] == {
                "strategy": "tool_result_offloading",
                "original_tokens": COUNTER.count(messages=[original]),
            }
            assert row[1:4] == (
                "default",
                offloaded.tool_call_result.origin.tool_name,
                offloaded.tool_call_result.origin.id,
            )
            assert json.loads(row[4]) == offloaded.meta[OFFLOADED_META_KEY]
            assert row[5] == COUNTER.count(messages=[original])
            assert row[6] == COUNTER.count(messages=[original]) - COUNTER.count(messages=[offloaded])

    def test_the_compaction_id_joins_casstore_meta_already_there(self, store: ContentAddressedToolResultStore) -> None:
        origin = ToolCall(tool_name="search", arguments={}, id="c1")
        earlier = {"casstore": {"source": "replayed"}, "other": 1}
        messages = [
            tool_call("c1"),
            ChatMessage.from_tool(tool_result="r" * 2000, origin=origin, meta=earlier),
            *zoo_conversation()[-3:],
        ]
        compacted = DedupOffloadCompactor(store).compact(messages, 0, COUNTER)

        assert compacted is not None
        assert compacted[1].meta["other"] == 1
        assert compacted[1].meta["casstore"] == {
            "source": "replayed",
            "compaction_id": _table(store, "SELECT compaction_id FROM offloads")[0][0],
        }
        assert messages[1].meta == earlier  # the input is not changed

    def test_a_store_without_history_gets_haystacks_meta_alone(self, tmp_path: Path) -> None:
        compacted = DedupOffloadCompactor(FileSystemToolResultStore(tmp_path), min_tokens=0).compact(
            zoo_conversation(), 0, COUNTER
        )

        assert compacted is not None
        offloaded = [compacted[position] for position in _offloaded_positions(compacted)]
        assert offloaded
        for message in offloaded:
            assert CASSTORE_META_KEY not in message.meta
            assert set(message.meta[COMPACTION_META_KEY]) == {"strategy", "original_tokens"}

    def test_each_compaction_has_its_own_id(self, store: ContentAddressedToolResultStore) -> None:
        compactor = DedupOffloadCompactor(store, min_tokens=0)
        first = compactor.compact(zoo_conversation()[:6] + zoo_conversation()[-3:], 0, COUNTER)
        second = compactor.compact(zoo_conversation(), 0, COUNTER)

        assert first is not None and second is not None
        assert len(_table(store, "SELECT DISTINCT compaction_id FROM offloads")) == 2


class TestFailures:
    def test_a_failed_write_leaves_the_result_and_warns(
        self, store_root: Path, caplog: pytest.LogCaptureFixture
    ) -> None:
        store = ContentAddressedToolResultStore(store_root)
        store.close()  # every write now fails
        messages = zoo_conversation()
        with caplog.at_level(logging.WARNING):
            compacted = DedupOffloadCompactor(store, min_tokens=0).compact(messages, 0, COUNTER)

        assert compacted is None
        assert "Failed to offload the result of tool 'search' to ContentAddressedToolResultStore" in caplog.text

    def test_content_the_store_refuses_stays_and_the_rest_goes(
        self, store: ContentAddressedToolResultStore, caplog: pytest.LogCaptureFixture
    ) -> None:
        messages = [
            tool_call("bad"),
            tool_result("\ud800 a lone surrogate cannot be UTF-8 " * 50, call_id="bad", name="scraper"),
            *zoo_conversation()[2:4],
            *zoo_conversation()[-3:],
        ]
        with caplog.at_level(logging.WARNING):
            compacted = DedupOffloadCompactor(store, min_tokens=0).compact(messages, 0, COUNTER)

        assert compacted is not None
        assert compacted[1] == messages[1]
        assert _offloaded_positions(compacted) == [3]
        assert "tool 'scraper'" in caplog.text and "ContentAddressedToolResultStore" in caplog.text

    def test_a_file_system_store_that_cannot_write(self, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
        blocker = tmp_path / "not-a-folder"
        blocker.write_text("a file where the store's folder should be")
        with caplog.at_level(logging.WARNING):
            compacted = DedupOffloadCompactor(FileSystemToolResultStore(blocker)).compact(
                zoo_conversation(), 0, COUNTER
            )

        assert compacted is None
        assert "to FileSystemToolResultStore; leaving the result in context" in caplog.text


class SlowCounter(PayloadCounter):
    """Counts like `PayloadCounter`, but takes a while, like a tokenizer or a provider call."""

    def count(self, messages: list[ChatMessage], tools: ToolsType | None = None) -> int:
        time.sleep(0.02)
        return super().count(messages, tools)


class TestAsync:
    def test_compact_async_matches_compact_and_does_not_block_the_loop(self, tmp_path: Path) -> None:
        messages = zoo_conversation()

        async def main() -> tuple[list[ChatMessage] | None, int]:
            ticks = 0

            async def ticker() -> None:
                nonlocal ticks
                while True:
                    await asyncio.sleep(0.005)
                    ticks += 1

            task = asyncio.create_task(ticker())
            with ContentAddressedToolResultStore(tmp_path / "async") as store:
                result = await DedupOffloadCompactor(store, min_tokens=0).compact_async(messages, 0, SlowCounter())
            task.cancel()
            return result, ticks

        compacted_async, ticks = asyncio.run(main())
        with ContentAddressedToolResultStore(tmp_path / "sync") as store:
            compacted = DedupOffloadCompactor(store, min_tokens=0).compact(messages, 0, COUNTER)

        assert ticks >= 10  # the loop kept running while the compactor counted and wrote
        assert compacted is not None and compacted_async is not None
        assert _without_casstore_meta(compacted_async) == _without_casstore_meta(compacted)


def test_it_is_a_haystack_compactor_as_haystack_s_own_are() -> None:
    from haystack.hooks.compaction import ToolResultOffloadCompactor
    from haystack.hooks.compaction.types import Compactor

    # `Compactor` is a Protocol without runtime checks, so `issubclass` cannot tell; the class hierarchy can.
    assert Compactor in DedupOffloadCompactor.__mro__ and Compactor in ToolResultOffloadCompactor.__mro__
