"""
`keep_in_context`: offload strategies for Haystack's `ToolResultOffloadHook` that never offload casstore's own tools.

The read tool's answer (and the search tool's) is what the model asked to see. Offloaded again, by a
`"*": AlwaysOffload()` entry say, the model asks for lines and gets another reference, and no number of calls gets it
further. Haystack's hook takes the
policy of an exact tool name before a tuple of names holding it and before `"*"`, so an exact entry of `NeverOffload()`
per tool name keeps those answers in the conversation whatever the rest of the mapping says.
"""

from collections.abc import Iterable, Mapping

from haystack.hooks.tool_result_offloading import NeverOffload, OffloadPolicy

from casstore.compactor.read_tool import DEFAULT_NAME as READ_TOOL_NAME
from casstore.compactor.search_tool import DEFAULT_NAME as SEARCH_TOOL_NAME

# The tools casstore ships for the model, under the names `make_read_tool` and `make_search_tool` give them by default.
CASSTORE_TOOL_NAMES: tuple[str, ...] = (READ_TOOL_NAME, SEARCH_TOOL_NAME)

StrategyKey = str | tuple[str, ...]


def keep_in_context(
    strategies: Mapping[StrategyKey, OffloadPolicy], *, tool_names: Iterable[str] = ()
) -> dict[StrategyKey, OffloadPolicy]:
    """
    Return a copy of `ToolResultOffloadHook` strategies in which casstore's tools are never offloaded.

    ```python
    from haystack.hooks.tool_result_offloading import AlwaysOffload, ToolResultOffloadHook

    from casstore import ContentAddressedToolResultStore
    from casstore.compactor import keep_in_context, make_read_tool

    store = ContentAddressedToolResultStore("tool_results", namespace="run-42")
    hook = ToolResultOffloadHook(store=store, offload_strategies=keep_in_context({"*": AlwaysOffload()}))
    # Agent(..., tools=[*my_tools, make_read_tool(store)], hooks={"after_tool": [hook]})
    ```

    Each of casstore's tool names (`read_offloaded_result` and `search_offloaded_results`, the read and search tools'
    default names) and each name in `tool_names` maps to Haystack's `NeverOffload()` under an exact key, which
    Haystack's hook resolves before a tuple key and before `"*"`. An exact entry the caller gave for one of those
    names is replaced: the read tool's answer must reach the model, or the model asks for lines and gets a reference
    back. A tuple key naming one of them is kept as it is, so it still applies to its other names. Every other entry
    is kept, and `strategies` is not changed.

    :param strategies: The mapping for `ToolResultOffloadHook(offload_strategies=...)`: tool name, tuple of tool
        names or `"*"` to an `OffloadPolicy`.
    :param tool_names: More names to keep in context: the `name` given to `make_read_tool` or `make_search_tool`
        when it is not the default. The default names are kept in context either way.
    :returns: A new dictionary, for `offload_strategies`.
    :raises TypeError: If `strategies` is not a mapping, `tool_names` is a single string rather than a collection of
        names, or a name is not a string.
    :raises ValueError: If a name in `tool_names` is empty.
    """
    if not isinstance(strategies, Mapping):
        raise TypeError(
            f"`strategies` must be the mapping given to ToolResultOffloadHook's `offload_strategies`, such as "
            f'{{"*": AlwaysOffload()}}; got {type(strategies).__name__}.'
        )
    names = tool_name_list(tool_names, parameter="tool_names")
    for name in names:
        if not name:
            raise ValueError("A name in `tool_names` is empty; pass the `name` given to make_read_tool.")
    kept: dict[StrategyKey, OffloadPolicy] = dict(strategies)
    never = NeverOffload()
    for name in (*CASSTORE_TOOL_NAMES, *names):
        kept[name] = never
    return kept


def tool_name_list(names: Iterable[str], *, parameter: str) -> list[str]:
    """
    :param names: Tool names, as a caller passed them for `parameter`.
    :returns: The names as a list.
    :raises TypeError: If `names` is one string (not a collection of them) or holds something other than strings.
    """
    if isinstance(names, str):
        raise TypeError(
            f"`{parameter}` takes a collection of tool names; pass {parameter}=[{names!r}], not a single string."
        )
    listed = list(names)
    for name in listed:
        if not isinstance(name, str):
            raise TypeError(f"Every name in `{parameter}` must be a tool's name (a string), got {name!r:.80}.")
    return listed
