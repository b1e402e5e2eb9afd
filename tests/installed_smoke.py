"""
A script that uses an installed casstore end to end; `tests/packaging/test_dependency_floors.py` runs it in a
virtualenv holding every runtime dependency at its declared floor.

    python installed_smoke.py WORK_DIR EXPECTED_MODULE ...

It imports every module of the installed package (and checks that they are exactly the expected ones), writes and
reads text and bytes through the store (one result large enough to be hashed in parallel and kept in a blob file),
compacts a conversation with `DedupOffloadCompactor`, reads an offloaded result back with the tool `make_read_tool`
makes, and runs the `casstore` console script's `stats`, `verify` and `gc --dry-run`. Any failure raises, so the
script exits non-zero with a traceback saying what did not work.
"""

import importlib
import json
import pkgutil
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

# Above the store's threshold for hashing with several threads, and above its default `inline_max`.
LARGE_TEXT_CHARS = 5 * 1024 * 1024


def import_every_module(expected: set[str]) -> None:
    import casstore

    for name in sorted(expected - {"casstore.__main__"}):
        importlib.import_module(name)

    def fail(name: str) -> None:
        raise ImportError(f"cannot import {name} while listing the installed package")

    found = {"casstore"} | {
        module.name for module in pkgutil.walk_packages(casstore.__path__, prefix="casstore.", onerror=fail)
    }
    assert found == expected, (
        f"the installed package's modules differ from the repository's: missing {sorted(expected - found)}, "
        f"unexpected {sorted(found - expected)}"
    )
    # `casstore.__main__` runs the command when imported: run it as `python -m casstore` instead.
    completed = subprocess.run(
        [sys.executable, "-m", "casstore", "--help"], capture_output=True, text=True, check=False
    )
    assert completed.returncode == 0 and "verify" in completed.stdout, (
        f"python -m casstore --help exited with {completed.returncode}:\n{completed.stdout}{completed.stderr}"
    )


def use_the_store(root: Path) -> list[str | bytes]:
    """Write and read through the store; returns the content of every write."""
    from casstore import ContentAddressedToolResultStore

    text = "a tool result, repeated " * 100
    large = "".join(f"line {number}: {number * number}\n" for number in range(LARGE_TEXT_CHARS // 16))[
        :LARGE_TEXT_CHARS
    ]
    data = bytes(range(256)) * 40
    with ContentAddressedToolResultStore(root, namespace="smoke") as store:
        reference = store.write(key="search.txt", content=text)
        assert store.write(key="again.txt", content=text) == reference, "equal content must get the same reference"
        large_reference = store.write(key="big.txt", content=large)
        binary_reference = store.write(key="blob.bin", content=data)
        assert store.read(reference) == text
        assert store.read(large_reference) == large
        assert store.read(binary_reference) == data
    with ContentAddressedToolResultStore(root, namespace="smoke") as reopened:
        assert reopened.read(large_reference) == large, "a reopened store must read what was written"
    return [text, text, large, data]


def use_the_compactor(root: Path) -> list[str | bytes]:
    """Compact a conversation and read a result back with the tool; returns the content of every offload."""
    from haystack.dataclasses import ChatMessage, ToolCall
    from haystack.token_counters import ApproximateTokenCounter

    from casstore import ContentAddressedToolResultStore
    from casstore.compactor import DedupOffloadCompactor, make_read_tool

    def step(call_id: str, result: str) -> list[ChatMessage]:
        call = ToolCall(tool_name="search", arguments={"q": call_id}, id=call_id)
        return [ChatMessage.from_assistant(tool_calls=[call]), ChatMessage.from_tool(tool_result=result, origin=call)]

    old_result = "".join(f"line {number}: an old search result\n" for number in range(200))
    old_calls = ["c1", "c2"]
    messages = [
        ChatMessage.from_system("You are a research agent."),
        ChatMessage.from_user("Look things up."),
        *(message for call_id in old_calls for message in step(call_id, old_result)),
        *step("c3", "the newest result"),
    ]
    with ContentAddressedToolResultStore(root, namespace="smoke") as store:
        compacted = DedupOffloadCompactor(store, min_tokens=0).compact(
            messages=messages, target_tokens=0, token_counter=ApproximateTokenCounter()
        )
        assert compacted is not None, "the compactor offloaded nothing"
        references = [reference for message in compacted for reference in message.meta.get("tool_result_offloaded", [])]
        assert len(references) == len(old_calls) and len(set(references)) == 1, (
            f"expected one reference, shared by the old results: {references}"
        )
        assert compacted[-1].tool_call_result is not None
        assert compacted[-1].tool_call_result.result == "the newest result", "the last step must stay"
        answer = make_read_tool(store).invoke(reference=references[0])
        assert answer == old_result, f"the read tool answered {answer!r:.200}"
        # An RE2 pattern: line 8 (counted from 1) is the only one that matches.
        matches = make_read_tool(store).invoke(reference=references[0], pattern="^line 7: an old sea+rch")
        assert isinstance(matches, str), matches
        matching = [line for line in matches.splitlines() if re.match(r"\d+: ", line)]
        assert matching == ["8: line 7: an old search result"], f"the read tool's search answered {matches!r}"
        # Patterns RE2 refuses, and one it compiles to a program too large to run: each answered with the reason.
        for pattern, reason in [
            ("(", "is not a valid RE2 regular expression"),
            (".{0,1000}.{0,1000}", "is too complex to search"),
        ]:
            refusal = make_read_tool(store).invoke(reference=references[0], pattern=pattern)
            assert isinstance(refusal, str) and reason in refusal, (
                f"the read tool answered {pattern!r} with {refusal!r}"
            )
        return [store.read(reference) for reference in references]


def use_the_search(root: Path) -> None:
    """
    Index the store with `casstore search-index`, find a result with the search tool, and query a JSON result with
    the read tool's `jmespath` (the `jmespath` dependency).
    """
    from casstore import ContentAddressedToolResultStore
    from casstore.compactor import make_read_tool, make_search_tool

    indexed = casstore_command(root, "search-index")
    assert indexed["indexed"] >= 2, indexed
    with ContentAddressedToolResultStore(root, namespace="smoke", search_index=True) as store:
        answer = make_search_tool(store).invoke(query='"an old sea"')
        assert "   1: line 0: an old search result" in answer, f"the search tool answered {answer!r}"
        data = store.write(key="ci.json", content=json.dumps({"jobs": [{"name": "a", "ok": False}, {"name": "b"}]}))
        selected = make_read_tool(store).invoke(reference=data, jmespath="jobs[?ok==`false`].name")
        assert json.loads(selected) == ["a"], f"the read tool's jmespath answered {selected!r}"
        found = make_search_tool(store).invoke(query='"ok": false')  # indexed as it was written
        assert f"1. '{data}'" in found, f"the search tool answered {found!r}"


def casstore_command(root: Path, *arguments: str) -> Any:
    executable = shutil.which("casstore", path=str(Path(sys.executable).parent))
    assert executable is not None, f"no casstore console script beside {sys.executable}"
    completed = subprocess.run(
        [executable, *arguments, "--root", str(root), "--json"], capture_output=True, text=True, check=False
    )
    assert completed.returncode == 0, (
        f"casstore {' '.join(arguments)} exited with {completed.returncode}:\n{completed.stdout}{completed.stderr}"
    )
    return json.loads(completed.stdout)


def use_the_command(root: Path, *, written: list[str | bytes], offloaded: list[str | bytes]) -> None:
    """Run `stats`, `verify` and `gc --dry-run` over the store the other steps wrote to."""
    everything = written + offloaded
    distinct = {content.encode() if isinstance(content, str) else content for content in everything}
    stats = casstore_command(root, "stats")
    assert (stats["blobs"], stats["writes"]) == (len(distinct), len(everything)), stats
    assert [row["namespace"] for row in stats["namespaces"]] == ["smoke"], stats
    assert [(row["tool_name"], row["offloads"]) for row in stats["tools"]] == [("search", len(offloaded))], stats
    verify = casstore_command(root, "verify")
    assert verify["ok"] and verify["clean"] and verify["blobs_checked"] == len(distinct), verify
    gc = casstore_command(root, "gc", "--dry-run")
    assert gc["dry_run"] and gc["blobs_deleted"] == 0 and gc["writes_forgotten"] == 0, gc


def main() -> None:
    work, *expected = sys.argv[1:]
    root = Path(work) / "store"
    import_every_module(set(expected))
    written = use_the_store(root)
    offloaded = use_the_compactor(root)
    use_the_command(root, written=written, offloaded=offloaded)
    use_the_search(root)
    print("casstore works")


if __name__ == "__main__":
    main()
