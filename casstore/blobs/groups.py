"""
Which results share a trained dictionary: a group per tool (`tool_of`, from the key Haystack's offload hook writes),
and under `namespace` dedup scope a group per namespace and tool (`scoped_group`).
"""

from casstore.hook_keys import CALL_ID_MARKERS

# Between a namespace and a tool in the group name of a namespace's own dictionaries (`scoped_group`): a control
# character, which no namespace holds, so the first one ends the namespace.
_GROUP_SEPARATOR = "\x1f"


def scoped_group(namespace: str | None, tool: str) -> str:
    """
    :param namespace: Under `namespace` dedup scope, the writing namespace; None under `store` scope.
    :param tool: `tool_of(key)`.
    :returns: The group a result is sampled for and compressed with the dictionary of: `tool` itself, or under
        `namespace` scope the namespace's own group for it (`<namespace>` U+001F `<tool>`), so one namespace's
        dictionaries are never trained on, nor used for, another's results.
    """
    return tool if namespace is None else f"{namespace}{_GROUP_SEPARATOR}{tool}"


def group_namespace(group: str) -> str | None:
    """:returns: The namespace of a group `scoped_group` made under `namespace` scope, else None."""
    namespace, separator, _ = group.partition(_GROUP_SEPARATOR)
    return namespace if separator else None


def tool_of(key: str) -> str:
    """
    The group a result's dictionary is trained for: the tool name in a Haystack key.

    Haystack's offload hook writes `{step}_{tool}_{call id}[_{part}].{ext}`; the step, the call id (`call_...`,
    `toolu_...`, `fc_...`) and the part are taken away, and the extension kept (text and images of one tool differ). A
    key of another shape is grouped by its extension alone.

    :param key: The key a write was made with.
    :returns: The group's name, at most 100 characters.
    """
    # String methods, not a regular expression: this runs on every new write.
    stem, dot, extension = key.rpartition(".")
    if not dot or len(extension) > 10:
        stem, extension = key, ""
    step, underscore, tool = stem.partition("_")
    if not underscore or not step.isdigit() or not step.isascii():
        return f".{extension}"[:100]
    for marker in CALL_ID_MARKERS:
        cut = tool.rfind(marker)
        if cut > 0:
            tool = tool[:cut]
            break
    return f"{tool}.{extension}"[:100]
