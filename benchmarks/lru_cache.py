"""A small least-recently-used cache, for outputs the trace generator computes again and again (file texts, git)."""

from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

_Key = TypeVar("_Key", bound=Hashable)
_Value = TypeVar("_Value")


class LruCache(Generic[_Key, _Value]):
    """
    At most `capacity` values; a hit makes its value the most recent, a miss past capacity drops the least recent.

    Only for values that are a pure function of their key: what is kept then changes the cost, never the trace.
    """

    def __init__(self, capacity: int) -> None:
        """:param capacity: How many values to keep at most."""
        self._capacity = capacity
        self._values: OrderedDict[_Key, _Value] = OrderedDict()

    def get_or_compute(self, key: _Key, compute: Callable[[], _Value]) -> _Value:
        """
        :param key: What the value is of.
        :param compute: Makes the value on a miss.
        :returns: The kept value, or the one `compute` made (then kept).
        """
        if key in self._values:
            self._values.move_to_end(key)
            return self._values[key]
        value = compute()
        self._values[key] = value
        if len(self._values) > self._capacity:
            self._values.popitem(last=False)
        return value

    def peek(self, key: _Key) -> _Value | None:
        """:returns: The kept value for `key`, or `None`; unlike `get_or_compute` it leaves the order alone."""
        return self._values.get(key)
