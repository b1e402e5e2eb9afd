"""
The checks `record_offloads`, `record_compaction` and `record_archive` make before anything is written: the records
must be of their types, their references references, their token counts whole numbers that could be counts, and their
tool names and ids text both indexes keep (SQLite and PostgreSQL alike). The compactors' own records always pass.
"""

from collections.abc import Sequence

from casstore.references import is_utf8_encodable, parse_reference
from casstore.repository import ArchiveRecord, CompactionRecord, OffloadRecord

__all__ = ["MAX_TOKENS", "check_archive", "check_compaction", "check_compaction_id", "check_offloads"]

# More tokens than any conversation holds; it also keeps the history's sums of them far from a 64-bit overflow.
MAX_TOKENS = 10**12


def check_compaction_id(compaction_id: object) -> None:
    """
    :raises TypeError: If `compaction_id` is not a string.
    :raises ValueError: If it is empty, or holds a NUL or a lone surrogate.
    """
    _check_text("compaction_id", compaction_id)


def check_compaction(compaction: object) -> None:
    """
    :raises TypeError: If `compaction` is not a `CompactionRecord`, or a count in it not an `int` (`context_window`
        may be None).
    :raises ValueError: If a count is negative or over `MAX_TOKENS`.
    """
    if not isinstance(compaction, CompactionRecord):
        raise TypeError(f"`compaction` must be a CompactionRecord, got {type(compaction).__name__}.")
    _check_tokens("tokens_before", compaction.tokens_before)
    _check_tokens("tokens_after", compaction.tokens_after)
    _check_tokens("target_tokens", compaction.target_tokens)
    if compaction.context_window is not None:
        _check_tokens("context_window", compaction.context_window)


def check_offloads(offloads: object) -> None:
    """
    :raises TypeError: If `offloads` is not a sequence of `OffloadRecord`, or in one of them `tool_name` is not a
        string, `tool_call_id` not a string or None, `references` a string or not a sequence, or a token count not an
        `int`.
    :raises ValueError: If a `tool_name` is empty, or a `tool_name` or `tool_call_id` holds a NUL or a lone
        surrogate; if a token count is negative or over `MAX_TOKENS`, or `saved_tokens` is over `original_tokens`.
    :raises InvalidReferenceError: If a reference is not one this store hands out (a `ValueError`).
    """
    if isinstance(offloads, (str, bytes)) or not isinstance(offloads, Sequence):
        raise TypeError(f"`offloads` must be a list of OffloadRecord, got {type(offloads).__name__}.")
    for offload in offloads:
        if not isinstance(offload, OffloadRecord):
            raise TypeError(f"`offloads` must hold OffloadRecord, got {type(offload).__name__}.")
        _check_text("tool_name", offload.tool_name)
        if offload.tool_call_id is not None:
            _check_text("tool_call_id", offload.tool_call_id, empty=True)
        _check_references(offload.references)
        _check_saving(
            offload.original_tokens, offload.saved_tokens, what="an offload saves at most the tokens the result took"
        )


def check_archive(archive: object) -> None:
    """
    :raises TypeError: If `archive` is not an `ArchiveRecord`, its `references` a string or not a sequence, or a count
        or step not an `int` (both steps may be None: an archive that held no step).
    :raises ValueError: If it names no reference, a count is negative or over `MAX_TOKENS`, a step is below 1, or
        `first_step` is after `last_step`.
    :raises InvalidReferenceError: If a reference is not one this store hands out (a `ValueError`).
    """
    if not isinstance(archive, ArchiveRecord):
        raise TypeError(f"`archive` must be an ArchiveRecord, got {type(archive).__name__}.")
    _check_references(archive.references)
    if not archive.references:
        raise ValueError("`references` must name the archived transcript first; it is empty.")
    _check_tokens("messages", archive.messages)
    # Not bounded by `original_tokens`: what the conversation lost is counted on the whole conversation, which a
    # token counter need not count as the sum of its messages.
    _check_tokens("original_tokens", archive.original_tokens)
    _check_tokens("saved_tokens", archive.saved_tokens)
    steps = (archive.first_step, archive.last_step)
    if steps != (None, None):
        for name, step in zip(("first_step", "last_step"), steps, strict=True):
            if isinstance(step, bool) or not isinstance(step, int):
                raise TypeError(f"`{name}` must be a step number or None, got {step!r:.60} ({type(step).__name__}).")
        first, last = steps
        assert first is not None and last is not None
        if not 1 <= first <= last:
            raise ValueError(f"The archived steps must run from a first to a last of 1 or more, got {first} to {last}.")


def _check_references(references: object) -> None:
    if isinstance(references, (str, bytes)) or not isinstance(references, Sequence):
        hint = " (one reference: wrap it in a list)" if isinstance(references, str) else ""
        raise TypeError(
            "`references` must be a list of references such as ['blake3/9b/1c4e...e4a.txt'], "
            f"got {type(references).__name__}{hint}."
        )
    for reference in references:
        parse_reference(reference)


def _check_saving(original_tokens: object, saved_tokens: object, *, what: str) -> None:
    _check_tokens("original_tokens", original_tokens)
    _check_tokens("saved_tokens", saved_tokens)
    assert isinstance(original_tokens, int) and isinstance(saved_tokens, int)
    if saved_tokens > original_tokens:
        raise ValueError(
            f"`saved_tokens` ({saved_tokens}) cannot be over `original_tokens` ({original_tokens}): {what}."
        )


def _check_text(name: str, value: object, *, empty: bool = False) -> None:
    if not isinstance(value, str):
        raise TypeError(f"`{name}` must be a string, got {type(value).__name__}.")
    if not value and not empty:
        raise ValueError(f"`{name}` must not be empty.")
    if "\x00" in value or not (value.isascii() or is_utf8_encodable(value)):
        raise ValueError(f"`{name}` must be text both indexes keep: no NUL and no lone surrogate, got {value[:80]!r}.")


def _check_tokens(name: str, value: object) -> None:
    # A bool is an int to Python, but `saved_tokens=True` is a mistake, not the count 1.
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"`{name}` must be a whole number of tokens, got {value!r:.60} ({type(value).__name__}).")
    if not 0 <= value <= MAX_TOKENS:
        raise ValueError(f"`{name}` must be from 0 to {MAX_TOKENS:,} tokens, got {value:,}.")
