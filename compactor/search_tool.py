"""
`make_search_tool`: a Haystack `Tool` the model calls to find again what it saw in any result its namespace offloaded.

The model passes words and "quoted phrases"; each is a case-insensitive substring, never an engine's query syntax.
The answer lists the best results first, each distinct result once, with its reference, tool and time when known,
size, and its matching lines with their numbers and a line of context, so the model can go on with
`read_offloaded_result(reference, offset=...)` (under the name the read tool is registered with, `read_tool_name`).
It never exceeds `max_chars`, says how many more results there were, and comes back as a message, never an
exception, whatever the query.

Here: the tool's surface (its description and parameters for the model, its serialization, and one call of it,
which never raises). The model's arguments are checked by `casstore.compactor.search_query`, and the answer is
written by `casstore.compactor.search_answer`.
"""

from typing import Any

from haystack import logging
from haystack.core.serialization import generate_qualified_class_name
from haystack.hooks.tool_result_offloading.types import ToolResultStore
from haystack.tools.tool import Tool
from haystack.utils.deserialization import deserialize_component_inplace

from casstore import CasStoreError
from casstore.compactor.read_tool import DEFAULT_NAME as READ_TOOL_NAME
from casstore.compactor.read_tool import MIN_MAX_CHARS
from casstore.compactor.search_answer import render_answer
from casstore.compactor.search_query import TOOL_NAME, ArgumentError, limit_argument, parse_query, tool_name_argument
from casstore.compactor.store_protocols import check_store
from casstore.stores.local import RepositoryToolResultStore

logger = logging.getLogger(__name__)

DEFAULT_NAME = "search_offloaded_results"

DEFAULT_MAX_CHARS = 20_000

DEFAULT_MAX_HITS = 10

MAX_HITS = 100

# How long one search may take before it answers with what it found.
SEARCH_SECONDS = 3.0


def _description(read_tool_name: str) -> str:
    """The description the model sees, naming the read tool as it is registered."""
    return (
        "Search every tool result offloaded from this conversation (and earlier ones in the same namespace) for "
        'words or "quoted phrases": each is matched as a case-insensitive substring of at least 3 characters, so '
        "identifiers, paths, error codes and parts of words work as written (ToolResultStore.write, test_case_39, "
        "E1102). The answer lists the best results first, each with its reference, its tool and time when known, its "
        f"size, and its matching lines with their numbers: read one further with {read_tool_name}(reference, "
        "offset=LINE). Pass `tool_name` to search only one tool's results."
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


class _Searcher:
    """Searches one store and answers the model. Shared, never copied: it holds the store."""

    def __init__(
        self, store: ToolResultStore, *, name: str, read_tool_name: str, max_chars: int, max_hits: int
    ) -> None:
        self.store = store
        self.name = name
        self.read_tool_name = read_tool_name
        self.max_chars = max_chars
        self.max_hits = max_hits

    def __deepcopy__(self, memo: dict[int, Any]) -> "_Searcher":
        return self

    def search(self, *, query: object = None, tool_name: object = None, limit: object = None, **unexpected: Any) -> str:
        """Answer one call of the tool. Never raises: every problem comes back as a message for the model."""
        try:
            answer = self._answer(query=query, tool_name=tool_name, limit=limit, unexpected=unexpected)
        except ArgumentError as error:
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
            raise ArgumentError(f"Unknown argument(s) {names}; the arguments are query, tool_name and limit.")
        terms, notes = parse_query(query)
        tool = tool_name_argument(tool_name)
        count = limit_argument(limit, self.max_hits)
        store = self.store
        if not isinstance(store, RepositoryToolResultStore):
            return (
                f"Error: this agent's store ({type(store).__name__}) cannot be searched; read results by their "
                f"reference with {self.read_tool_name}."
            )
        try:
            outcome = store.search(terms=terms, tool_name=tool, limit=count, seconds=SEARCH_SECONDS)
        except CasStoreError as error:
            logger.warning("Could not search the offloaded results: {error}", error=error)
            return f"Error: the store could not be searched ({type(error).__name__}); read results by reference."
        if not outcome.enabled:
            return (
                "This store has no search index, so its offloaded results cannot be searched; read them by reference "
                f"with {self.read_tool_name}. (To turn searching on, open the store with search_index=True "
                "(ContentAddressedToolResultStore or SharedToolResultStore) and run `casstore search-index` once for "
                "the results written before.)"
            )
        return render_answer(
            outcome, terms=terms, notes=notes, tool=tool, max_chars=self.max_chars, read_tool_name=self.read_tool_name
        )


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
        read_tool_name: str = READ_TOOL_NAME,
        max_chars: int = DEFAULT_MAX_CHARS,
        max_hits: int = DEFAULT_MAX_HITS,
    ) -> None:
        """
        Build the tool; see `make_search_tool` for the parameters.

        :raises TypeError: If `store` has no callable `write` and `read`.
        :raises ValueError: If a parameter is out of range.
        """
        check_store(store, owner="make_search_tool")
        if not isinstance(name, str) or not TOOL_NAME.fullmatch(name):
            raise ValueError(f"`name` must be 1 to 64 letters, digits, '_' or '-', got {name!r}.")
        if not isinstance(read_tool_name, str) or not TOOL_NAME.fullmatch(read_tool_name):
            raise ValueError(
                "`read_tool_name` must be the name the read tool is registered under (`make_read_tool(store, "
                f"name=...)`): 1 to 64 letters, digits, '_' or '-', got {read_tool_name!r}."
            )
        if max_chars < MIN_MAX_CHARS:
            raise ValueError(f"`max_chars` must be at least {MIN_MAX_CHARS}, got {max_chars}.")
        if not 1 <= max_hits <= MAX_HITS:
            raise ValueError(f"`max_hits` must be from 1 to {MAX_HITS}, got {max_hits}.")
        self._searcher = _Searcher(
            store, name=name, read_tool_name=read_tool_name, max_chars=max_chars, max_hits=max_hits
        )
        super().__init__(
            name=name,
            description=_description(read_tool_name),
            parameters=_PARAMETERS,
            function=self._searcher.search,
        )

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
                "read_tool_name": searcher.read_tool_name,
                "max_chars": searcher.max_chars,
                "max_hits": searcher.max_hits,
            },
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "SearchOffloadedResultsTool":
        """
        Rebuild the tool and its store from what `to_dict` produced.

        :param data: A dictionary produced by `to_dict`. It is not changed. Without `read_tool_name` the tool names the
            read tool by its default name.
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
    read_tool_name: str = READ_TOOL_NAME,
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

    A read tool registered under another name is named to the search tool too:
    `make_search_tool(store, read_tool_name="fetch_archive")` beside `make_read_tool(store, name="fetch_archive")`.

    The model passes `query` (words and "quoted phrases", each a case-insensitive substring of at least 3
    characters, never query syntax), and optionally `tool_name` (only that tool's results) and `limit` (default and
    most: `max_hits`). The answer lists the best results first, each distinct result once, with its reference, tool
    and time when known, size, and matching lines with their numbers and context; it never exceeds `max_chars` and
    says how many more results there were. Over a store without a search index it says how to turn one on.

    :param store: The store the agent offloads to (a `ContentAddressedToolResultStore`, ideally opened with
        `search_index=True`).
    :param name: The tool's name, as the model sees it.
    :param read_tool_name: The name the read tool is registered under (the `name` given to `make_read_tool`), which
        the tool's description and answers tell the model to call to read a hit further.
    :param max_chars: No answer is longer than this many characters.
    :param max_hits: The most results one answer lists, and the default `limit`.
    :returns: A Haystack `Tool` (a `SearchOffloadedResultsTool`, serializable with its store).
    :raises TypeError: If `store` has no callable `write` and `read` (a path, None: pass a store).
    :raises ValueError: If `name` or `read_tool_name` is not a valid tool name, `max_chars` is below 1,000 or
        `max_hits` is not from 1 to 100.
    """
    return SearchOffloadedResultsTool(
        store=store, name=name, read_tool_name=read_tool_name, max_chars=max_chars, max_hits=max_hits
    )
