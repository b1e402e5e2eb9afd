"""
Agent steps in a conversation: which tool results belong to the most recent tool-calling steps.

A step is an assistant message and the tool results that immediately follow it, so parallel results of one call stay
in one step. This mirrors how Haystack's compactors group a conversation, re-implemented so the compactor does not
depend on Haystack's private helpers.
"""

from haystack.dataclasses import ChatMessage, ChatRole


def agent_step_spans(messages: list[ChatMessage]) -> list[tuple[int, int]]:
    """
    Find the Agent steps in a conversation.

    :param messages: The conversation, oldest to newest.
    :returns: One `(start, end)` span per step, oldest first: `messages[start]` is the assistant message and
        `messages[start + 1:end]` are the tool results that immediately follow it.
    """
    spans: list[tuple[int, int]] = []
    index = 0
    while index < len(messages):
        # Only an assistant message starts a step.
        if not messages[index].is_from(role=ChatRole.ASSISTANT):
            index += 1
            continue
        end = index + 1
        while end < len(messages) and messages[end].tool_call_results:
            end += 1
        spans.append((index, end))
        index = end
    return spans


def protected_result_positions(messages: list[ChatMessage], *, keep_steps: int) -> set[int]:
    """
    Find the tool results of the most recent tool-calling steps, which a compactor must leave alone.

    :param messages: The conversation, oldest to newest.
    :param keep_steps: How many of the most recent tool-calling steps to protect (at least 1).
    :returns: The positions of the tool-result messages of those steps.
    """
    # An assistant message without results is not a tool-calling step and must not use up one of `keep_steps`.
    result_steps = [range(start + 1, end) for start, end in agent_step_spans(messages) if end > start + 1]
    return {position for step in result_steps[-keep_steps:] for position in step}
