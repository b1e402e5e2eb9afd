"""
What the history knows of a search's hits: each hit's first write in the namespace (reference, key, time) and the
tool it came from, and which results a tool produced (for a search of one tool's results), from the `writes` and
`offloads` tables and the keys Haystack gives a tool's results.
"""

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from casstore.errors import InvalidReferenceError
from casstore.references import parse_reference
from casstore.search.engine import SearchText


@dataclass(frozen=True, slots=True)
class HitDetails:
    """What the history knows of a hit in one namespace: its first write's reference, key and time, and its tool."""

    reference: str
    key: str
    written_at: str
    tool_name: str | None


def tool_digests(connection: Any, engine: SearchText, *, namespace: str, tool_name: str) -> set[str]:
    """
    :returns: The digests of the namespace's results of the tool `tool_name`: those the offload history names for
        it, and those whose key has the form Haystack gives a tool's keys (`<step>_<tool>_...` from the offload hook,
        `compacted_<tool>_...` from the compactors).
    """
    pattern = re.compile(rf"(?:\d+|compacted)_{re.escape(tool_name)}_")
    rows = connection.execute(
        f"SELECT DISTINCT digest, key FROM writes WHERE namespace = ? AND {engine.contains_sql.format('key')}",
        (namespace, f"_{tool_name}_"),
    )
    digests = {digest for digest, key in rows if pattern.match(key) and _key_may_be_of(key, tool_name)}
    offloaded = connection.execute(
        f"SELECT DISTINCT part.value FROM offloads o, {engine.json_refs_sql} WHERE o.namespace = ? AND o.tool_name = ?",
        (namespace, tool_name),
    )
    for (reference,) in offloaded:
        digest = _digest_of(reference)
        if digest is not None:
            digests.add(digest)
    return digests


def hit_details(
    connection: Any, engine: SearchText, *, namespace: str, documents: Sequence[int]
) -> dict[int, HitDetails]:
    """:returns: For each of `documents` the namespace holds, what the history knows of its first write there."""
    if not documents:
        return {}
    marks = ", ".join("?" for _ in documents)
    first: dict[int, tuple[str, str, str]] = {}
    for document, reference, key, written_at in connection.execute(
        f"SELECT e.document, w.reference, w.key, w.written_at FROM search_entries e JOIN writes w ON w.id = e.write_id "
        f"WHERE e.namespace = ? AND e.document IN ({marks})",
        (namespace, *documents),
    ):
        first[document] = (reference, key, written_at)
    tools: dict[str, str] = {}
    references = [reference for reference, _, _ in first.values()]
    if references and connection.execute("SELECT 1 FROM offloads WHERE namespace = ? LIMIT 1", (namespace,)).fetchone():
        marks = ", ".join("?" for _ in references)
        for reference, tool_name in connection.execute(
            f"SELECT part.value, o.tool_name FROM offloads o, {engine.json_refs_sql} "
            f"WHERE o.namespace = ? AND part.value IN ({marks}) ORDER BY o.id",
            (namespace, *references),
        ):
            tools[reference] = tool_name
    return {
        document: HitDetails(
            reference=reference,
            key=key,
            written_at=written_at,
            tool_name=tools.get(reference) or _tool_of_key(key),
        )
        for document, (reference, key, written_at) in first.items()
    }


# `compacted_<tool>_<32 hex>` (Haystack's compactor) and `..._<n>` for a part, with an extension.
_COMPACTED_KEY = re.compile(r"compacted_(.+)_[0-9a-f]{32}(?:_\d+)?(?:\.[A-Za-z0-9_+-]{1,16})?")


def _key_may_be_of(key: str, tool_name: str) -> bool:
    # A compactor's key names its tool whole (`compacted_read_file_<32 hex>` is read_file's, never read's); a hook's
    # key cannot be split, so one of the form `<step>_<tool_name>_...` may be that tool's.
    named = _tool_of_key(key)
    return named is None or named == tool_name


def _tool_of_key(key: str) -> str | None:
    # A hook's key, `<step>_<tool>_<call id>`, cannot be split where a name or a call id holds `_`: not guessed.
    match = _COMPACTED_KEY.fullmatch(key)
    return match.group(1) if match else None


def _digest_of(reference: object) -> str | None:
    try:
        return parse_reference(reference).digest
    except InvalidReferenceError:  # a row written by hand: not a reference this store hands out
        return None
