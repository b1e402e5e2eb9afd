"""
The settings every store takes (the local and the shared one), checked for type and range before anything is opened,
created or connected to.
"""

from casstore.namespaces import check_namespace

# A frame of at most 64 KiB stays inside index.db (on the medium trace, all but 6 of its 10,265 blobs).
DEFAULT_INLINE_MAX = 64 * 1024
# The largest `inline_max`: neither SQLite (SQLITE_MAX_LENGTH) nor PostgreSQL (a bytea value) keeps a value over
# about a billion bytes in a row, so a larger setting would only turn a large write into a failed one.
INLINE_MAX_LIMIT = 1_000_000_000


def check_settings(*, namespace: str, compression_level: int, inline_max: int, **switches: bool) -> None:
    """
    Check the settings every store takes, before anything is opened or created.

    :param switches: The store's on/off settings by name (`durable`, `learn`, `search_index`).
    :raises TypeError: If `namespace` is not a string, `compression_level` or `inline_max` is not an `int` (a `bool`,
        a `float` such as 3.5, a string), or a switch is not a `bool` (such as "no" or 1). The message names the
        setting, what it got and what it takes.
    :raises ValueError: If `namespace` is empty, too long or contains control characters, or if `compression_level`
        is not from 1 to 22 or `inline_max` not from 0 to `INLINE_MAX_LIMIT`.
    """
    check_namespace(namespace)
    _check_whole_number("compression_level", compression_level, minimum=1, maximum=22, meaning="the zstd level")
    _check_whole_number("inline_max", inline_max, minimum=0, maximum=INLINE_MAX_LIMIT, meaning="a size in bytes")
    for name, value in switches.items():
        if not isinstance(value, bool):
            raise TypeError(f"`{name}` must be True or False, got {value!r:.60} ({type(value).__name__}).")


def _check_whole_number(name: str, value: object, *, minimum: int, maximum: int | None, meaning: str) -> None:
    accepted = f"from {minimum} to {maximum}" if maximum is not None else f"{minimum} or more"
    # A bool is an int to Python, but `compression_level=True` is a mistake, not the level 1.
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(
            f"`{name}` must be a whole number {accepted} ({meaning}), got {value!r:.60} ({type(value).__name__})."
        )
    if value < minimum or (maximum is not None and value > maximum):
        raise ValueError(f"`{name}` must be {accepted} ({meaning}), got {value}.")
