"""
JMESPath evaluation within a budget of work, for the read tool's `jmespath` argument.

The `jmespath` library evaluates any expression to the end, and a short one can ask for work without end: `[@, @][]`
doubles a list, so twenty of them in a pipe build a list of a million times the first; `join('', [@, @])` doubles a
string; and `[@, @]` nested thirty times is small in memory (each level holds the one below twice) but is a billion
values to `to_string`, `==` or `contains`, which walk it as a tree. So the expression is evaluated by an interpreter
that counts, against one budget of `EVALUATION_BUDGET` units, each part of the expression it evaluates, each element
and character of the values it builds, and each element and character a function or comparison walks; a character
compared or scanned in C (by `==`, `sort`, `contains`) counts a sixteenth, being that much faster. Whatever builds or
walks values of unknown size is counted before it runs, from the sizes of its arguments (a list's length, a tree's
size counted up to what is left of the budget), so no step can take more than what is left. When the budget runs out
the evaluation stops with `BudgetExceeded`.
"""

import math
from collections.abc import Iterable
from typing import Any

from jmespath import functions
from jmespath.visitor import Options, TreeInterpreter

# The units an evaluation may spend: as many as the characters of JSON a selection is written out to. A unit is
# about a microsecond of work at most, or some 8 to 20 bytes of memory (a list's element, a small dict's entry).
EVALUATION_BUDGET = 8 * 1024 * 1024
# Units per node of the expression evaluated (on one value): the slowest work, a call in Python.
_VISIT = 2
# Units for a list or dict built by a multi-select, beyond its elements: its header and table, some 60 to 200 bytes.
_CONTAINER = 16
# Characters compared or scanned in C per unit.
_CHARS_PER_UNIT = 16
# Units per character of a string that `to_string` writes out escaped (as \uXXXX), for one that is not ASCII.
_ESCAPED = 6


class BudgetExceeded(Exception):
    """The evaluation ran out of its budget of work, and stopped."""


class _Budget:
    def __init__(self, units: int) -> None:
        self.left = units

    def spend(self, units: int) -> None:
        self.left -= units
        if self.left < 0:
            raise BudgetExceeded

    def scanned(self, chars: int) -> None:
        self.spend(chars // _CHARS_PER_UNIT)

    def walk(self, value: Any, *, char_units: int = 0) -> None:
        """
        Spend a unit per value in `value` as a tree (a value held twice counts twice) and per element walked, and for
        each character of its strings and numbers `char_units` (0: a sixteenth), stopping as soon as the budget runs
        out.
        """
        stack, chars = [value], 0
        left = self.left  # counted here, not by `spend`: a call per value would double the walk's time
        while stack and left >= 0:
            item = stack.pop()
            left -= 1
            if isinstance(item, str):  # with its quotes
                chars += 2 + (len(item) if item.isascii() else len(item) * _ESCAPED)
            elif isinstance(item, int):
                chars += item.bit_length() // 3  # its digits, or more (a JSON number has at most 4,300)
            elif isinstance(item, float):
                chars += 24
            elif isinstance(item, list | dict):
                left -= len(item)
                if left < 0:
                    break  # before its elements are copied to the stack
                if isinstance(item, dict):
                    chars += sum(len(key) + 4 for key in item)  # each key with its quotes, colon and comma
                    stack.extend(item.values())
                else:
                    stack.extend(item)
            left -= chars * char_units if char_units else chars // _CHARS_PER_UNIT
            chars = 0
        self.left = left
        self.spend(0)


def evaluate(parsed: Any, data: Any, *, budget: int = EVALUATION_BUDGET) -> Any:
    """
    :param parsed: A compiled expression (`jmespath.compile`).
    :param data: The JSON value to evaluate it on.
    :param budget: The units of work the evaluation may spend.
    :returns: What the expression selects, as `parsed.search(data)` does.
    :raises BudgetExceeded: If the evaluation would spend more than `budget` units.
    :raises JMESPathError: If the expression fails on this data.
    """
    return _Interpreter(_Budget(budget)).visit(parsed.parsed, data)


class _Interpreter(TreeInterpreter):
    """`TreeInterpreter`, spending a unit per node it evaluates, and units for the values it builds and walks."""

    def __init__(self, budget: _Budget) -> None:
        super().__init__(Options(custom_functions=_Functions(budget)))
        self._budget = budget

    def visit(self, node: Any, *args: Any, **kwargs: Any) -> Any:
        budget = self._budget
        budget.left -= _VISIT
        if budget.left < 0:
            raise BudgetExceeded
        return super().visit(node, *args, **kwargs)

    def visit_flatten(self, node: Any, value: Any) -> Any:
        base = self.visit(node["children"][0], value)
        if not isinstance(base, list):
            return None
        # Counted before it is built: a list holding one long list many times flattens to a product.
        self._budget.spend(len(base))
        self._budget.spend(sum(len(element) if isinstance(element, list) else 1 for element in base))
        merged: list[Any] = []
        for element in base:
            if isinstance(element, list):
                merged.extend(element)
            else:
                merged.append(element)
        return merged

    def visit_slice(self, node: Any, value: Any) -> Any:
        if isinstance(value, list):
            self._budget.spend(len(range(*slice(*node["children"]).indices(len(value)))))
        return super().visit_slice(node, value)

    def visit_projection(self, node: Any, value: Any) -> Any:
        return self._built(super().visit_projection(node, value))

    def visit_filter_projection(self, node: Any, value: Any) -> Any:
        return self._built(super().visit_filter_projection(node, value))

    def visit_value_projection(self, node: Any, value: Any) -> Any:
        return self._built(super().visit_value_projection(node, value))

    def visit_multi_select_list(self, node: Any, value: Any) -> Any:
        return self._built(super().visit_multi_select_list(node, value), _CONTAINER)

    def visit_multi_select_dict(self, node: Any, value: Any) -> Any:
        return self._built(super().visit_multi_select_dict(node, value), _CONTAINER)

    def visit_comparator(self, node: Any, value: Any) -> Any:
        # As `TreeInterpreter.visit_comparator`, with the comparison counted before it runs.
        left = self.visit(node["children"][0], value)
        right = self.visit(node["children"][1], value)
        if left is right and isinstance(left, list | dict) and node["value"] in ("eq", "ne"):
            # Equal, as Python finds after comparing each element with itself: answered without that walk, which
            # `@ == @` on a large result would repeat uncounted.
            return node["value"] == "eq"
        _spend_comparing(self._budget, left, right)
        compare = self.COMPARATOR_FUNC[node["value"]]
        if node["value"] in ("eq", "ne") or (_ordered(left) and _ordered(right)):
            return compare(left, right)
        return None  # an order between values other than numbers and strings

    def _built(self, built: Any, overhead: int = 0) -> Any:
        """A list or dict built of values counted already: a unit per element, and `overhead`."""
        if built is not None:
            self._budget.spend(len(built) + overhead)
        return built


def _ordered(value: Any) -> bool:
    """Whether JMESPath orders the value (`<` and the like): a number or a string."""
    return isinstance(value, int | float | str) and not isinstance(value, bool)


def _spend_comparing(budget: _Budget, left: Any, right: Any) -> None:
    """Spend what `left == right` may cost: a walk of one, when both are lists or dicts of one length."""
    if left is right or type(left) is not type(right):
        return
    if isinstance(left, str):
        budget.scanned(min(len(left), len(right)))
    elif isinstance(left, list | dict) and len(left) == len(right):
        budget.walk(left)


class _Functions(functions.Functions):
    """JMESPath's functions, spending units for what each builds or walks, before it runs."""

    def __init__(self, budget: _Budget) -> None:
        super().__init__()
        self._budget = budget
        # Per `sort_by`, `min_by` or `max_by` running: how many comparisons each element's key may be in.
        self._key_comparisons: list[int] = []

    def call_function(self, function_name: str, resolved_args: Iterable[Any]) -> Any:
        args, budget = list(resolved_args), self._budget
        if function_name not in _FUNCTIONS:  # one this module does not know (a later jmespath's): walked whole
            for arg in args:
                budget.walk(arg)
        elif function_name in _OVER_ELEMENTS:  # a type check or a copy going over an array's or object's elements
            budget.spend(sum(len(arg) for arg in args if isinstance(arg, list | dict)))
        first, last = (args[0], args[-1]) if args else (None, None)
        if function_name == "to_string" and not isinstance(first, str):
            budget.walk(first, char_units=1)  # what it writes out, before it does
        elif function_name in ("max", "min", "sort") and isinstance(first, list):
            comparisons = _log2(len(first))
            budget.spend(len(first) * comparisons)
            budget.scanned(sum(len(item) for item in first if isinstance(item, str)) * comparisons)
        elif function_name == "join" and isinstance(first, str) and isinstance(last, list):
            budget.spend(len(first) * len(last) + sum(len(item) for item in last if isinstance(item, str)))
        elif function_name == "contains" and isinstance(first, list):
            for item in first:
                _spend_comparing(budget, item, last)
        elif function_name in ("contains", "starts_with", "ends_with", "to_number") and isinstance(first, str):
            budget.scanned(len(first))
            if function_name == "to_number":  # Python converts up to 4,300 digits, in time growing as their square
                budget.spend(min(len(first), 5_000) ** 2 // 50_000)
        elif function_name == "reverse" and isinstance(first, str):
            budget.spend(len(first))
        elif function_name in ("sort_by", "min_by", "max_by") and isinstance(first, list):
            # Each key is evaluated (counted as any evaluation) and compared: a string key's characters count once
            # per comparison it may be in.
            self._key_comparisons.append(_log2(len(first)) if function_name == "sort_by" else 1)
            budget.spend(len(first) * self._key_comparisons[-1])
            try:
                return super().call_function(function_name, args)
            finally:
                self._key_comparisons.pop()
        result = super().call_function(function_name, args)
        if function_name == "to_string" and result is not first:  # the string written, unless given one
            budget.spend(len(result))
        return result

    def _create_key_func(self, expref: Any, allowed_types: Any, function_name: str) -> Any:
        # Not in jmespath's type stubs: the method `sort_by`, `min_by` and `max_by` get their key functions from.
        keyfunc = super()._create_key_func(expref, allowed_types, function_name)  # type: ignore[misc]
        comparisons, budget = self._key_comparisons[-1], self._budget

        def counted(value: Any) -> Any:
            key = keyfunc(value)
            if isinstance(key, str):
                budget.scanned(len(key) * comparisons)
            return key

        return counted


# JMESPath's functions, as of jmespath 1.1.0; those that go over the elements of an array or object argument.
_FUNCTIONS = frozenset(
    {"abs", "avg", "ceil", "contains", "ends_with", "floor", "join", "keys", "length", "map", "max", "max_by"}
    | {"merge", "min", "min_by", "not_null", "reverse", "sort", "sort_by", "starts_with", "sum", "to_array"}
    | {"to_number", "to_string", "type", "values"}
)
_OVER_ELEMENTS = frozenset(
    {"avg", "contains", "join", "keys", "map", "max", "max_by", "merge", "min", "min_by", "reverse", "sort"}
    | {"sort_by", "sum", "values"}
)


def _log2(count: int) -> int:
    """Comparisons per element of a sort of `count` elements, at most."""
    return max(1, math.ceil(math.log2(count + 1)))
