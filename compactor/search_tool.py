"""
`make_search_tool`: a Haystack `Tool` the model calls to find again what it saw in any result its namespace offloaded.

The model passes words and "quoted phrases"; each is a case-insensitive substring, never an engine's query syntax.
The answer lists the best results first, each distinct result once, with its reference, tool and time when known,
size, and its matching lines with their numbers and a line of context, so the model can go on with
`read_offloaded_result(reference, offset=...)`. It never exceeds `max_chars`, says how many more results there
were, and comes back as a message, never an exception, whatever the query.
"""

import re
from typing import Any

from haystack import logging
from haystack.core.serialization import generate_qualified_class_name
from haystack.hooks.tool_result_offloading.types import ToolResultStore
from haystack.tools.tool import Tool
from haystack.utils.deserialization import deserialize_component_inplace

from casstore import CasStoreError
from casstore.compactor.binary_content import quoted
from casstore.compactor.read_tool import DEFAULT_NAME as READ_TOOL_NAME
from casstore.compactor.read_tool import MIN_MAX_CHARS
from casstore.repository import MIN_TERM_CHARS, SearchHit, SearchOutcome
from casstore.stores.local import RepositoryToolResultStore

logger = logging.getLogger(__name__)

DEFAULT_NAME = "search_offloaded_results"
DEFAULT_MAX_CHARS = 20_000
DEFAULT_MAX_HITS = 10
MAX_HITS = 100
# How long one search may take before it answers with what it found.
SEARCH_SECONDS = 3.0
# The query's terms searched at most, and the characters of one term; a longer query is cut, and the answer says so.
MAX_TERMS = 32
MAX_TERM_CHARS = 500
MAX_QUERY_CHARS = 20_000
# Per hit: the matching lines listed at most, lines of context around each, and characters shown of one line.
_LINES_PER_HIT = 3
_CONTEXT = 1
_LINE_CHARS = 200
_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
# A quoted phrase, or a run of anything but white space.
_TERM = re.compile(r'"([^"]*)"|(\S+)')
# Left off a bare word's ends: quotes and list punctuation the model may copy along with it.
_WORD_EDGES = "'`\",;"

_DESCRIPTION = (
    "Search every tool result offloaded from this conversation (and earlier ones in the same namespace) for words or "
    '"quoted phrases": each is matched as a case-insensitive substring of at least 3 characters, so identifiers, '
    "paths, error codes and parts of words work as written (ToolResultStore.write, test_case_39, E1102). The answer "
    "lists the best results first, each with its reference, its tool and time when known, its size, and its matching "
    f"lines with their numbers: read one further with {READ_TOOL_NAME}(reference, offset=LINE). Pass `tool_name` to "
    "search only one tool's results."
)

_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {
            "type": "string",
            "description": 'Words and "quoted phrases" to find, such as \'KeyError "def write"\'. Each is a '
            "case-insensitive substring of 3 or more characters; results holding more of them come first, and among "
            "those the ones holding the query exactly (a whole identifier, the words as a phrase), then rarer terms. "
            "No operators: AND, OR, *, : and quotes inside a phrase are searched as text.",
        },
        "tool_name": {
            "type": "string",
            "description": "Only results of this tool, such as 'read_file'.",
        },
        "limit": {
            "type": "integer",
            "minimum": 1,
            "description": "The most results to list (default and most: the tool's maximum, usually 10).",
        },
    },
    "required": ["query"],
    "additionalProperties": False,
}


class _ArgumentError(ValueError):
    """An argument the model passed is unusable; the message says which and why."""


class _Searcher:
    """Searches one store and answers the model. Shared, never copied: it holds the store."""

    def __init__(self, store: ToolResultStore, *, name: str, max_chars: int, max_hits: int) -> None:
        self.store = store
        self.name = name
        self.max_chars = max_chars
        self.max_hits = max_hits

    def __deepcopy__(self, memo: dict[int, Any]) -> "_Searcher":
        return self

    def search(self, *, query: object = None, tool_name: object = None, limit: object = None, **unexpected: Any) -> str:
        """Answer one call of the tool. Never raises: every problem comes back as a message for the model."""
        try:
            answer = self._answer(query=query, tool_name=tool_name, limit=limit, unexpected=unexpected)
        except _ArgumentError as error:
            answer = f"Error: {error}"
        except Exception as error:
            # A bug, or a store failing in an unexpected way: the model gets a message, the log gets the trace.
            logger.exception("Searching the offloaded results failed.")
            answer = f"Error: the search failed ({type(error).__name__}); try again, or read a result by its reference."
        if len(answer) > self.max_chars:
            answer = answer[: self.max_chars - 1] + "…"
        return answer

    def _answer(self, *, query: object, tool_name: object, limit: object, unexpected: dict[str, Any]) -> str:
        if unexpected:
            names = ", ".join(f"{name[:40]!r}" for name in sorted(unexpected)[:5])
            raise _ArgumentError(f"Unknown argument(s) {names}; the arguments are query, tool_name and limit.")
        terms, notes = parse_query(query)
        tool = _tool_name(tool_name)
        count = _limit(limit, self.max_hits)
        store = self.store
        if not isinstance(store, RepositoryToolResultStore):
            return (
                f"Error: this agent's store ({type(store).__name__}) cannot be searched; read results by their "
                f"reference with {READ_TOOL_NAME}."
            )
        try:
            outcome = store.search(terms=terms, tool_name=tool, limit=count, seconds=SEARCH_SECONDS)
        except CasStoreError as error:
            logger.warning("Could not search the offloaded results: {error}", error=error)
            return f"Error: the store could not be searched ({type(error).__name__}); read results by reference."
        if not outcome.enabled:
            return (
                "This store has no search index, so its offloaded results cannot be searched; read them by reference "
                f"with {READ_TOOL_NAME}. (To turn searching on, open the store with search_index=True "
                "(ContentAddressedToolResultStore or SharedToolResultStore) and run `casstore search-index` once for "
                "the results written before.)"
            )
        return _render(outcome, terms=terms, notes=notes, tool=tool, max_chars=self.max_chars)


def parse_query(query: object) -> tuple[list[str], list[str]]:
    """
    Split a query into the terms searched: "quoted phrases" whole, other words at white space, each as written
    (case does not matter), duplicates once.

    :returns: The terms, and notes on what was left out (terms too short, beyond the limits).
    :raises _ArgumentError: If the query is not a string or leaves no term to search.
    """
    if not isinstance(query, str):
        raise _ArgumentError(f'`query` must be a string of words or "quoted phrases", got {query!r:.60}.')
    # Text a store can hold: no NUL, no lone surrogate (JSON can carry one).
    text = query[:MAX_QUERY_CHARS].replace("\x00", " ").encode("utf-8", "ignore").decode("utf-8")
    notes = []
    if len(query) > MAX_QUERY_CHARS:
        notes.append(f"the query was cut to its first {MAX_QUERY_CHARS:,} characters")
    terms: list[str] = []
    seen: set[str] = set()
    short: list[str] = []
    for match in _TERM.finditer(text):
        phrase, word = match.groups()
        term = phrase if phrase is not None else word.strip(_WORD_EDGES)
        if phrase is not None and not phrase.strip():
            continue
        if len(term) < MIN_TERM_CHARS:
            if term and term not in short:
                short.append(term)
            continue
        if len(term) > MAX_TERM_CHARS:
            term = term[:MAX_TERM_CHARS]
            notes.append(f"a term was cut to its first {MAX_TERM_CHARS} characters")
        if term.lower() in seen:
            continue
        seen.add(term.lower())
        terms.append(term)
    if short:
        listed = ", ".join(repr(term) for term in short[:5])
        notes.append(f"terms shorter than {MIN_TERM_CHARS} characters cannot be searched and were left out ({listed})")
    if len(terms) > MAX_TERMS:
        notes.append(f"only the first {MAX_TERMS} of {len(terms)} terms were searched")
        terms = terms[:MAX_TERMS]
    if not terms:
        reason = f" ({notes[-1]})" if notes else ""
        raise _ArgumentError(
            f'nothing to search for{reason}. Pass words or "quoted phrases" of at least {MIN_TERM_CHARS} '
            f"characters, such as 'KeyError' or '\"def write\"'."
        )
    return terms, notes


def _tool_name(value: object) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str) or not _TOOL_NAME.fullmatch(value.strip()):
        raise _ArgumentError(
            f"`tool_name` must be a tool's name (letters, digits, '_' or '-'), such as 'read_file'; got {value!r:.60}."
        )
    return value.strip()


def _limit(value: object, ceiling: int) -> int:
    if value is None:
        return ceiling
    if isinstance(value, str) and value.strip().isdecimal():
        value = int(value.strip())
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise _ArgumentError(f"`limit` must be a whole number from 1 to {ceiling}, got {value!r:.40}.")
    return min(value, ceiling)


def _render(outcome: SearchOutcome, *, terms: list[str], notes: list[str], tool: str | None, max_chars: int) -> str:
    searched = " ".join(f'"{term}"' if " " in term else term for term in terms)
    scope = f" among the results of {tool}" if tool else ""
    lines_notes = [f"Note: {note}." for note in notes]
    if outcome.pending:
        lines_notes.append(
            f"Note: {outcome.pending} result(s) written lately are not indexed yet and could not be searched; search "
            f"again in a moment."
        )
    if outcome.timed_out and not outcome.hits:
        return "\n".join(
            [
                f"The search for {_shown(searched)}{scope} took too long and was stopped; search for fewer or longer "
                f"terms.",
                *lines_notes,
            ]
        )
    if not outcome.hits:
        more = f" ({outcome.unreadable} could not be read)" if outcome.unreadable else ""
        return "\n".join([f"No offloaded result holds {_shown(searched)}{scope}{more}.", *lines_notes])
    blocks = [_block(position, hit) for position, hit in enumerate(outcome.hits, start=1)]
    shown: list[str] = []
    header = f"Results holding {_shown(searched)}{scope}, best first:"
    for block in blocks:
        footer = _footer(outcome, left_out=len(blocks) - len(shown) - 1)
        if len(header) + sum(len(b) + 2 for b in shown) + len(block) + 2 + len(footer) + 1 > max_chars - 200:
            break
        shown.append(block)
    if not shown:  # even the best hit's block is too long: its first lines, cut
        footer = _footer(outcome, left_out=len(blocks) - 1)
        room = max(100, max_chars - len(header) - len(footer) - 250)
        shown.append(blocks[0][:room] + " [cut]")
    footer = _footer(outcome, left_out=len(blocks) - len(shown))
    return "\n\n".join([header, *shown, "\n".join([footer, *lines_notes])])


def _footer(outcome: SearchOutcome, *, left_out: int) -> str:
    more = outcome.more_hits + left_out
    parts = []
    if more:
        parts.append(f"{more} more result{'s' if more != 1 else ''} hold a term")
    if outcome.unread:
        parts.append(f"up to {outcome.unread} more may (not read: the search stops after the best-placed ones)")
    if outcome.timed_out:
        parts.append("the search stopped at its time limit")
    if outcome.unreadable:
        parts.append(f"{outcome.unreadable} result(s) could not be read (missing or damaged)")
    tail = f"Read one with {READ_TOOL_NAME}(reference, offset=LINE)."
    if not parts:
        return f"That is every result that holds a term. {tail}"
    return f"{'; '.join(parts).capitalize()}: narrow the query or pass tool_name to see others. {tail}"


def _block(position: int, hit: SearchHit) -> str:
    text = hit.text
    lowered = text.lower()
    line_count = text.count("\n") + 1
    about = [
        f"tool {hit.tool_name}" if hit.tool_name else None,
        f"written {hit.written_at} UTC" if hit.written_at else None,
        f"{hit.size:,} bytes, {line_count:,} lines",
        "holds " + ", ".join(_shown(term, 60) for term in hit.terms),
    ]
    out = [f"{position}. {quoted(hit.reference)} ({'; '.join(part for part in about if part)})"]
    # The first matching lines, found by searching the whole text (fast on a long one), not line by line.
    folded = [term.lower() for term in hit.terms]
    starts, more = _first_matching_lines(text, lowered, folded)
    if not starts:
        out.append("   (the match spans lines)")
        return "\n".join(out)
    lines = {start: number for number, start in starts}
    last_shown = -1
    for number, start in starts:
        first = max(number - _CONTEXT, last_shown + 1)
        if last_shown >= 0 and first > last_shown + 1:
            out.append("   ...")
        for index in range(first, number + _CONTEXT + 1):
            if index >= line_count:
                break
            line = _line(text, start, index - number)
            marker = ":" if index == number or _line_start(text, start, index - number) in lines else "-"
            out.append(f"   {index + 1}{marker} {_excerpt(line, folded)}".rstrip(" "))
            last_shown = index
    if more:
        out.append(f"   (and {more} more match(es) after line {starts[-1][0] + 1})")
    return "\n".join(out)


def _first_matching_lines(text: str, lowered: str, folded: list[str]) -> tuple[list[tuple[int, int]], int]:
    """:returns: `(line number from 0, start of line)` of the first matching lines, and how many matches follow."""
    found: list[tuple[int, int]] = []
    position = 0
    number = 0
    counted = 0
    while len(found) < _LINES_PER_HIT:
        hits = [index for index in (lowered.find(term, position) for term in folded) if index >= 0]
        if not hits:
            return found, 0
        at = min(hits)
        start = lowered.rfind("\n", 0, at) + 1
        number += text.count("\n", counted, start)
        counted = start
        found.append((number, start))
        end = lowered.find("\n", at)
        if end < 0:
            return found, 0
        position = end + 1
    more = sum(lowered.count(term, position) for term in folded)
    return found, more


def _line_start(text: str, start: int, offset: int) -> int:
    """:returns: Where the line `offset` lines from the one starting at `start` starts (-1 before the first)."""
    for _ in range(offset):
        end = text.find("\n", start)
        if end < 0:
            return -1
        start = end + 1
    for _ in range(-offset):
        if start == 0:
            return -1
        start = text.rfind("\n", 0, start - 1) + 1
    return start


def _line(text: str, start: int, offset: int) -> str:
    begin = _line_start(text, start, offset)
    if begin < 0:
        return ""
    end = text.find("\n", begin)
    return text[begin : end if end >= 0 else len(text)]


def _excerpt(line: str, folded: list[str]) -> str:
    """A line, or the part of a long one around its first match, within `_LINE_CHARS`."""
    if len(line) <= _LINE_CHARS:
        return line
    lowered = line.lower()
    found = [lowered.find(term) for term in folded if term in lowered]
    start = max(0, min(found) - _LINE_CHARS // 4) if found else 0
    piece = line[start : start + _LINE_CHARS]
    return f"{'…' if start else ''}{piece}{'…' if start + _LINE_CHARS < len(line) else ''}"


def _shown(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


class SearchOffloadedResultsTool(Tool):
    """
    The `Tool` `make_search_tool` returns, serializable with its store.

    Create it with `make_search_tool`; this class exists so an Agent holding the tool can be serialized.
    """

    def __init__(
        self,
        *,
        store: ToolResultStore,
        name: str = DEFAULT_NAME,
        max_chars: int = DEFAULT_MAX_CHARS,
        max_hits: int = DEFAULT_MAX_HITS,
    ) -> None:
        """
        Build the tool; see `make_search_tool` for the parameters.

        :raises ValueError: If a parameter is out of range.
        """
        if not isinstance(name, str) or not _TOOL_NAME.fullmatch(name):
            raise ValueError(f"`name` must be 1 to 64 letters, digits, '_' or '-', got {name!r}.")
        if max_chars < MIN_MAX_CHARS:
            raise ValueError(f"`max_chars` must be at least {MIN_MAX_CHARS}, got {max_chars}.")
        if not 1 <= max_hits <= MAX_HITS:
            raise ValueError(f"`max_hits` must be from 1 to {MAX_HITS}, got {max_hits}.")
        self._searcher = _Searcher(store, name=name, max_chars=max_chars, max_hits=max_hits)
        super().__init__(name=name, description=_DESCRIPTION, parameters=_PARAMETERS, function=self._searcher.search)

    @property
    def store(self) -> ToolResultStore:
        """The store the tool searches."""
        return self._searcher.store

    def to_dict(self) -> dict[str, Any]:
        """
        Serialize the tool's settings and its store.

        :returns: A dictionary for Haystack's tool serialization.
        """
        searcher = self._searcher
        return {
            "type": generate_qualified_class_name(type(self)),
            "data": {
                "store": searcher.store.to_dict(),
                "name": searcher.name,
                "max_chars": searcher.max_chars,
                "max_hits": searcher.max_hits,
            },
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "SearchOffloadedResultsTool":
        """
        Rebuild the tool and its store from what `to_dict` produced.

        :param data: A dictionary produced by `to_dict`. It is not changed.
        :returns: The tool.
        :raises DeserializationError: If the store's class is not on Haystack's deserialization allowlist.
        """
        settings = dict(data["data"])
        deserialize_component_inplace(settings, key="store")
        return cls(**settings)


def make_search_tool(
    store: ToolResultStore,
    *,
    name: str = DEFAULT_NAME,
    max_chars: int = DEFAULT_MAX_CHARS,
    max_hits: int = DEFAULT_MAX_HITS,
) -> Tool:
    """
    Make the tool the model calls to search everything its namespace offloaded.

    ```python
    from casstore import ContentAddressedToolResultStore
    from casstore.compactor import make_read_tool, make_search_tool

    store = ContentAddressedToolResultStore("tool_results", namespace="run-42", search_index=True)
    tools = [make_search_tool(store), make_read_tool(store)]  # next to the agent's own tools
    ```

    The model passes `query` (words and "quoted phrases", each a case-insensitive substring of at least 3
    characters, never query syntax), and optionally `tool_name` (only that tool's results) and `limit` (default and
    most: `max_hits`). The answer lists the best results first, each distinct result once, with its reference, tool
    and time when known, size, and matching lines with their numbers and context; it never exceeds `max_chars` and
    says how many more results there were. Over a store without a search index it says how to turn one on.

    :param store: The store the agent offloads to (a `ContentAddressedToolResultStore`, ideally opened with
        `search_index=True`).
    :param name: The tool's name, as the model sees it.
    :param max_chars: No answer is longer than this many characters.
    :param max_hits: The most results one answer lists, and the default `limit`.
    :returns: A Haystack `Tool` (a `SearchOffloadedResultsTool`, serializable with its store).
    :raises ValueError: If `name` is not a valid tool name, `max_chars` is below 1,000 or `max_hits` is not from 1
        to 100.
    """
    return SearchOffloadedResultsTool(store=store, name=name, max_chars=max_chars, max_hits=max_hits)
