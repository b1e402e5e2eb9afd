"""
Which messages a sliding window keeps and which it gives up, decided exactly as Haystack's `SlidingWindowCompactor`
decides (`haystack/hooks/compaction/sliding_window.py`), re-implemented so casstore does not depend on Haystack's
private helpers.

Leading system messages and the latest user message (not a compactor's note) are protected. Earlier turns (a real user
message and everything up to the next) go before the current task's steps (an assistant message and the tool results
right after it), whole and oldest first; the `min_keep_steps` newest steps stay even over the budget. An earlier note
of the same strategy belongs to no turn and no step, so it is always given up: the new note stands in for it.
"""

from collections.abc import Callable
from dataclasses import dataclass

from haystack.dataclasses import ChatMessage, ChatRole
from haystack.token_counters import TokenCounter

from casstore.compactor.pointers import COMPACTION_META_KEY


@dataclass(frozen=True, slots=True)
class WindowSplit:
    """A conversation cut in two: what stays, where a note goes among it, and what leaves."""

    kept: list[ChatMessage]
    # The position in `kept` where the removed messages used to sit: after the system messages when only earlier turns
    # left, after the task's user message when its own steps did.
    note_index: int
    removed: list[ChatMessage]


def is_note(message: ChatMessage, *, strategy: str) -> bool:
    """
    :returns: Whether `message` is a user message a compactor of `strategy` left (its `context_compaction` meta says
        so).
    """
    marker = message.meta.get(COMPACTION_META_KEY)
    return message.is_from(ChatRole.USER) and isinstance(marker, dict) and marker.get("strategy") == strategy


def split_window(
    messages: list[ChatMessage],
    *,
    target_tokens: int,
    token_counter: TokenCounter,
    min_keep_steps: int,
    strategy: str,
) -> WindowSplit:
    """
    Choose the messages to keep within `target_tokens` and those to give up.

    :param messages: The conversation, oldest to newest.
    :param target_tokens: The budget for what is kept.
    :param token_counter: Measures the protected messages, turns and steps.
    :param min_keep_steps: The newest steps of the current task kept even over the budget.
    :param strategy: The `context_compaction` strategy of the notes this split folds away.
    :returns: The split; `removed` is empty when everything fits.
    """
    system_end = _leading_system_end(messages)
    task_index = _latest_user_index(messages)
    task = [task_index] if task_index is not None else []
    history_end = task_index if task_index is not None else system_end
    turns = [
        [index for index in turn if not is_note(messages[index], strategy=strategy)]
        for turn in _turns(messages, start=system_end, end=history_end)
    ]
    steps = _steps(messages, start=task_index + 1 if task_index is not None else system_end)

    def tokens(indices: list[int]) -> int:
        return token_counter.count(messages=[messages[index] for index in indices])

    available = target_tokens - tokens([*range(system_end), *task])
    task_tokens = tokens([index for step in steps for index in step])
    if task_tokens > available:
        # The task alone is over the budget: every earlier turn goes, then its oldest steps, down to the newest ones.
        first_turn = len(turns)
        first_step = min(_first_fitting(steps, available, tokens), max(len(steps) - min_keep_steps, 0))
    else:
        first_turn = _first_fitting(turns, available - task_tokens, tokens)
        first_step = 0
    kept_turns = [index for turn in turns[first_turn:] for index in turn]
    kept_indices = [*range(system_end), *kept_turns, *task, *(index for step in steps[first_step:] for index in step)]
    note_index = system_end if first_step == 0 else system_end + len(kept_turns) + len(task)
    kept_set = set(kept_indices)
    return WindowSplit(
        kept=[messages[index] for index in kept_indices],
        note_index=note_index,
        removed=[message for index, message in enumerate(messages) if index not in kept_set],
    )


def _first_fitting(groups: list[list[int]], available: int, tokens: Callable[[list[int]], int]) -> int:
    """:returns: Where in `groups` to keep from: adding them up newest first, up to the first that does not fit."""
    first = len(groups)
    while first > 0:
        cost = tokens(groups[first - 1])
        if cost > available:
            break
        available -= cost
        first -= 1
    return first


def _leading_system_end(messages: list[ChatMessage]) -> int:
    for index, message in enumerate(messages):
        if not message.is_from(ChatRole.SYSTEM) or COMPACTION_META_KEY in message.meta:
            return index
    return len(messages)


def _latest_user_index(messages: list[ChatMessage]) -> int | None:
    for index in reversed(range(len(messages))):
        message = messages[index]
        if message.is_from(ChatRole.USER) and COMPACTION_META_KEY not in message.meta:
            return index
    return None


def _turns(messages: list[ChatMessage], *, start: int, end: int) -> list[list[int]]:
    """:returns: Each real user message in `messages[start:end]` with everything up to the next one (or `end`)."""
    users = [
        index
        for index in range(start, end)
        if messages[index].is_from(ChatRole.USER) and COMPACTION_META_KEY not in messages[index].meta
    ]
    return [list(range(user, users[n + 1] if n + 1 < len(users) else end)) for n, user in enumerate(users)]


def _steps(messages: list[ChatMessage], *, start: int) -> list[list[int]]:
    """:returns: Each assistant message from `start` on with the tool results right after it."""
    steps: list[list[int]] = []
    index = start
    while index < len(messages):
        if not messages[index].is_from(ChatRole.ASSISTANT):
            index += 1
            continue
        end = index + 1
        while end < len(messages) and messages[end].tool_call_results:
            end += 1
        steps.append(list(range(index, end)))
        index = end
    return steps
