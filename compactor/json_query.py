"""
JMESPath queries into JSON results, for the read tool's `jmespath` argument.

The expression runs on the result parsed as JSON (the `jmespath` library, the AWS CLI's `--query`), and the selection
comes back as indented JSON text, which the read tool then pages like any text. A result that is not JSON, an
invalid expression, or one that fails on this data gets a message saying so. A selection is written out only up to a
bound: a small expression can select the same large part many times over (`[@, @, @]` nested), and writing that out
in full would take memory and time without end.
"""

import io
import json
from typing import Any

import jmespath
from jmespath.exceptions import JMESPathError

from casstore.compactor.json_evaluation import EVALUATION_BUDGET, BudgetExceeded, evaluate

# The longest expression accepted, and the most characters of JSON a selection is written out to.
MAX_EXPRESSION_CHARS = 2_000
MAX_SELECTION_CHARS = 8 * 1024 * 1024
_NARROW = "narrow the expression (a projection such as 'items[*].name', or an index such as 'items[:20]')."


class JsonQueryError(ValueError):
    """The expression cannot be used on this result; the message says why and what to do."""


def select(text: str, expression: object, *, reference: str) -> str:
    """
    :param text: The result's text.
    :param expression: A JMESPath expression, such as `items[?status=='failed'].name`.
    :param reference: The result's reference, for messages.
    :returns: The selected part as JSON text (`null` when the expression selects nothing).
    :raises JsonQueryError: If the result is not JSON, or the expression is invalid, fails on this data, or selects
        more than `MAX_SELECTION_CHARS` characters of JSON.
    """
    if not isinstance(expression, str) or not expression.strip():
        raise JsonQueryError(
            f"`jmespath` must be a JMESPath expression, such as 'items[0].name'; got {expression!r:.60}."
        )
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise JsonQueryError(f"`jmespath` is {len(expression):,} characters; at most {MAX_EXPRESSION_CHARS:,}.")
    try:
        compiled = jmespath.compile(expression)
    except JMESPathError as error:
        raise JsonQueryError(f"`jmespath` is not a valid JMESPath expression: {_first_line(error)}") from None
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as error:
        raise JsonQueryError(
            f"the result at {reference!r} is not JSON ({_first_line(error)}), so `jmespath` cannot query it; read it "
            f"as text, or search it with `pattern`."
        ) from None
    try:
        selected = evaluate(compiled, data)
    except BudgetExceeded:
        raise JsonQueryError(
            f"`jmespath` takes too much work on this result: evaluating it builds or walks over "
            f"{EVALUATION_BUDGET:,} values and characters (an expression such as `[@, @][]` repeated multiplies "
            f"them); {_NARROW}"
        ) from None
    except (JMESPathError, TypeError, ValueError, ArithmeticError, RecursionError) as error:  # `avg` of huge ints
        raise JsonQueryError(f"`jmespath` failed on this result: {_first_line(error)}") from None
    return _written(selected)


def _written(selected: Any) -> str:
    written = io.StringIO()  # not a list of pieces: one per value, each a string object, many times their size
    size = 0
    try:
        for piece in json.JSONEncoder(indent=2, ensure_ascii=False).iterencode(selected):
            size += len(piece)
            if size > MAX_SELECTION_CHARS:
                raise JsonQueryError(f"the selection is over {MAX_SELECTION_CHARS:,} characters of JSON; {_NARROW}")
            written.write(piece)
    except RecursionError:
        raise JsonQueryError("the selection is nested too deeply to write out; narrow the expression.") from None
    return written.getvalue()


def _first_line(error: BaseException) -> str:
    message = str(error).strip().splitlines()
    return (message[0] if message else type(error).__name__)[:300]
