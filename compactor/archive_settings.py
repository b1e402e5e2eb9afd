"""
The checks `StepArchiveCompactor` makes of its settings when it is made, so a wrong value fails there, with a message
that says what to pass, rather than at every compaction of a run (or, for a tool name, in the note the model reads).
"""

from typing import Any


def check_settings(
    *,
    min_keep_steps: Any,
    summarizer: Any,
    summary_instruction: Any,
    read_tool_name: Any,
    search_tool_name: Any,
    context_window: Any,
) -> None:
    """
    Refuse settings `StepArchiveCompactor` cannot work with.

    :raises TypeError: If `summarizer` is neither None nor a chat generator (an object with a callable `run`; a class
        is refused), or `summary_instruction`, `read_tool_name` or `search_tool_name` (unless None) is not a string.
    :raises ValueError: If `min_keep_steps` is negative or not whole, `summary_instruction` or a tool name is empty, or
        `context_window` is given and not a positive whole number.
    """
    if isinstance(min_keep_steps, bool) or not isinstance(min_keep_steps, int) or min_keep_steps < 0:
        raise ValueError(
            f"`min_keep_steps` must be a whole number, at least 0, got {min_keep_steps!r}: it is how many of the "
            f"newest steps always stay in the conversation."
        )
    _check_summarizer(summarizer)
    _check_text("summary_instruction", summary_instruction, "the system prompt the summarizer is given")
    _check_text("read_tool_name", read_tool_name, "the name the read tool is registered under with the Agent")
    if search_tool_name is not None:
        _check_text(
            "search_tool_name",
            search_tool_name,
            "the name the search tool is registered under with the Agent, or None when the Agent has no search tool",
        )
    if context_window is not None and (
        isinstance(context_window, bool) or not isinstance(context_window, int) or context_window < 1
    ):
        raise ValueError(f"`context_window` must be a positive number of tokens, or None; got {context_window!r}.")


def _check_summarizer(summarizer: Any) -> None:
    if summarizer is None:
        return
    if isinstance(summarizer, type):
        # A class's `run` is callable too, but every compaction would fail calling it without an instance.
        raise TypeError(
            f"`summarizer` must be a Haystack chat generator object, got the class {summarizer.__name__}: pass a "
            f"generator made from it, such as {summarizer.__name__}(...), or None for notes without a summary."
        )
    if not callable(getattr(summarizer, "run", None)):
        raise TypeError(
            f"`summarizer` must be a Haystack chat generator (an object with a callable `run`, such as "
            f"OpenAIChatGenerator(model='gpt-4o-mini')), or None for notes without a summary; got "
            f"{_described(summarizer)}."
        )


def _check_text(name: str, value: Any, meaning: str) -> None:
    if not isinstance(value, str):
        raise TypeError(f"`{name}` must be a non-empty string, {meaning}; got {_described(value)}.")
    if not value.strip():
        raise ValueError(f"`{name}` must be a non-empty string, {meaning}; got {value!r}.")


def _described(value: Any) -> str:
    """:returns: What a wrong value is, for a message: `None`, or its type and a short repr (`the str 'gpt-4o'`)."""
    if value is None:
        return "None"
    return f"the {type(value).__name__} {value!r:.60}"
