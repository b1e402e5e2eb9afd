"""
The figures every command prints, defined once: ratios and byte counts mean the same in `casstore stats`, `casstore
demo` and their `--json`, and as the view `dedup_summary` computes them.

- dedup ratio = logical bytes / unique bytes: everything written over each distinct result once;
- compression ratio = unique bytes / stored bytes: the distinct results over their zstd frames;
- total ratio = logical bytes / stored bytes (the two together).

Each is rounded to two decimals (half up, as `dedup_summary` rounds), and is `None` (`-` in text) when there is
nothing to divide by: nothing is stored. What the bytes count differs by command, and each says so (its `scope`):
the whole store, one namespace, or one demo run.
"""

from decimal import ROUND_HALF_UP, Decimal

_HUNDREDTHS = Decimal("0.01")
_BYTE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB")


def ratio(numerator: int, denominator: int) -> float | None:
    """
    :returns: `numerator / denominator` rounded to two decimals (half up), or None if `denominator` is 0.
    :raises ValueError: If either is negative.
    """
    if numerator < 0 or denominator < 0:
        raise ValueError(f"A ratio of byte counts takes counts of at least 0, got {numerator} / {denominator}.")
    if denominator == 0:
        return None
    return float((Decimal(numerator) / Decimal(denominator)).quantize(_HUNDREDTHS, rounding=ROUND_HALF_UP))


def format_ratio(value: float | None) -> str:
    """:returns: A ratio as `2.45x`, or `-` when there is nothing to divide by (nothing stored)."""
    return "-" if value is None else f"{value:.2f}x"


def format_bytes(count: int) -> str:
    """:returns: A byte count in binary units: `512 B`, `1.5 KiB`, `3.2 MiB`, `1.0 GiB`, `2.0 TiB`."""
    size = float(count)
    for unit in _BYTE_UNITS:
        if abs(size) < 1024 or unit == _BYTE_UNITS[-1]:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")
