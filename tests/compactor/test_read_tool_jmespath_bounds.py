"""
The read tool's `jmespath` takes bounded memory and time, whatever the expression: a short one that multiplies a
result (`[@, @][]` repeated), a string (`join('', [@, @])`) or the walk of a value held many times (`to_string` of
`[@, @]` nested) stops with a message, within the bound docs/search.md states, and ordinary ones still answer.
"""

import json
import subprocess
import sys
import textwrap
import time
import tracemalloc
from pathlib import Path
from typing import Any

import jmespath
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jmespath.exceptions import JMESPathError

from casstore.compactor.json_evaluation import BudgetExceeded, evaluate
from casstore.compactor.json_query import JsonQueryError, select

# The bound docs/search.md states for one evaluation: memory above what the process held before, and CPU time (it
# measures about a quarter of each on an idle machine).
MAX_GROWTH_MB = 100
MAX_CPU_SECONDS = 5.0
TOO_MUCH = "Error: `jmespath` takes too much work on this result"

# Each expression, run in a fresh process, prints its answer's start, CPU time and the process's peak memory. The
# process may not grow by a GiB (should the bound fail, it fails with MemoryError instead of taking the machine).
_CHILD = textwrap.dedent(
    """
    import json, resource, sys, time
    from casstore import ContentAddressedToolResultStore
    from casstore.compactor import make_read_tool

    store = ContentAddressedToolResultStore(sys.argv[1], namespace="n")
    cases = json.loads(sys.stdin.read())
    tool = make_read_tool(store)
    references = [store.write(key="r.json", content=json.dumps(document)) for document, _ in cases]
    tool.invoke(reference=references[0], jmespath="@")  # everything loaded before the baseline
    with open("/proc/self/status") as status:
        size = next(int(line.split()[1]) for line in status if line.startswith("VmSize:")) * 1024
    resource.setrlimit(resource.RLIMIT_AS, (size + 2**30, size + 2**30))
    baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for reference, (_, expression) in zip(references, cases):
        before = resource.getrusage(resource.RUSAGE_SELF)
        answer = tool.invoke(reference=reference, jmespath=expression)
        after = resource.getrusage(resource.RUSAGE_SELF)
        cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
        print(json.dumps([answer[:200], cpu, (after.ru_maxrss - baseline) / 1024]), flush=True)
    """
)


def _run_each(tmp_path: Path, cases: list[tuple[Any, str]]) -> list[tuple[str, float, float]]:
    """:returns: Per case, the answer's start, the CPU seconds it took and the process's growth in MB so far."""
    completed = subprocess.run(
        [sys.executable, "-c", _CHILD, str(tmp_path / "store")],
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-2_000:]
    return [(answer, cpu, growth) for answer, cpu, growth in map(json.loads, completed.stdout.splitlines())]


NUMBERS = {"a": list(range(100))}
NESTED_30 = "a" + " | [@, @]" * 30  # small in memory, 2^30 lists of 100 numbers as a tree


@pytest.mark.slow  # each case in a child process of its own, measured; the budget's logic is in the quick tier below
@pytest.mark.parametrize(
    "cases",
    [
        pytest.param(
            [
                (NUMBERS, "a" + " | [@, @][]" * 20),  # 221 characters: took 60 s and 2.2 GB
                (NUMBERS, "a" + " | [@, @][]" * 23),  # MemoryError after 113 s
                ({"a": "x" * 1000}, "to_string(@)" + " | join('', [@, @])" * 20),  # 14.5 s and 2.2 GB
            ],
            id="multiplying",
        ),
        pytest.param(
            [
                (NUMBERS, f"{NESTED_30} | to_string(@)"),
                (NUMBERS, f"[{NESTED_30}, {NESTED_30}] | [0] == [1]"),
                (NUMBERS, f"[{NESTED_30}, {NESTED_30}] | contains([[0]], [1])"),
                (NUMBERS, "a" + " | [@, @]" * 20 + " | [@, @][]" * 3 + " | max_by(@, &length(to_string(@)))"),
                (NUMBERS, "a" + " | [@, @][]" * 15 + " | sort_by(@, &to_string(@))"),
            ],
            id="walking a value held many times",
        ),
    ],
)
def test_an_expression_multiplying_work_stops_with_a_message_within_the_bound(
    tmp_path: Path, cases: list[tuple[Any, str]]
) -> None:
    results = _run_each(tmp_path, cases)
    assert len(results) == len(cases)
    for (answer, cpu, growth), (_, expression) in zip(results, cases, strict=True):
        assert answer.startswith(TOO_MUCH), (expression, answer)
        assert cpu < MAX_CPU_SECONDS and growth < MAX_GROWTH_MB, (expression, cpu, growth)


@pytest.mark.slow
def test_ordinary_expressions_on_a_large_result_still_answer(tmp_path: Path) -> None:
    items = {"items": [{"id": number, "name": f"item {number:06}", "tags": ["a", "b"]} for number in range(50_000)]}
    cases = [
        (items, "items[?id >= `49998`].name"),
        (items, "sort_by(items, &name)[-1].id"),
        (items, "length(items[*].{id: id, first: tags[0]})"),
        (items, "max_by(items, &id).name"),
    ]
    results = _run_each(tmp_path, cases)
    assert [json.loads(answer) for answer, _, _ in results] == [
        ["item 049998", "item 049999"],
        49_999,
        50_000,
        "item 049999",
    ]
    assert all(cpu < MAX_CPU_SECONDS and growth < MAX_GROWTH_MB for _, cpu, growth in results), results


# Stages of a pipeline, each taking any value: each multiplies, builds or walks what the one before gives.
_STAGES = [
    "[@, @]",
    "[@, @][]",
    "[@, @, @, @][]",
    "join('', [to_string(@), to_string(@)])",
    "to_string(@)",
    "to_array(@)[*].[@, @]",
    "to_array(@)[*].{a: @, b: @}",
    "to_array(@)[]",
    "sort_by(to_array(@), &to_string(@))",
    "max_by(to_array(@), &length(to_string(@)))",
    "sort(to_array(@)[*].to_string(@))",
    "[@, @] | [0] == [1]",
    "[@ == @, @ != @]",
    "map(&[@ == @], [@, @, @])",
    "contains(to_array(@), @)",
    "map(&[@, @], to_array(@))",
    "values({a: @, b: @})",
    "merge({a: @}, {b: @})",
    "reverse(to_array(@))",
    "to_array(@)[::-1]",
    "to_array(@)[*].to_number(to_string(@))",
]
# The units of the budget each example gets, and what one may cost at most: the bound scaled down.
_BUDGET = 40_000
_BYTES_PER_UNIT = 40
_SECONDS_PER_UNIT = 25e-6


@settings(max_examples=150, deadline=None)
@given(
    start=st.sampled_from(["a", "b", "c"]),
    stages=st.lists(st.sampled_from(_STAGES), min_size=1, max_size=30),
)
def test_any_pipeline_stays_within_what_its_budget_allows(start: str, stages: list[str]) -> None:
    data = {"a": list(range(20)), "b": "xé" * 20, "c": [{"k": "v" * 10, "n": [1, 2]}] * 5}
    expression = " | ".join([start, *stages])
    parsed = jmespath.compile(expression)
    tracemalloc.start()
    started = time.process_time()
    try:
        evaluate(parsed, data, budget=_BUDGET)
    except (BudgetExceeded, JMESPathError, TypeError, ValueError):
        pass  # stopped, or failed on this data as it does without a budget
    finally:
        seconds = time.process_time() - started
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert peak < _BUDGET * _BYTES_PER_UNIT, (expression, peak)
    assert seconds < 0.2 + _BUDGET * _SECONDS_PER_UNIT, (expression, seconds)


@settings(max_examples=100, deadline=None)
@given(stages=st.lists(st.sampled_from(_STAGES), min_size=1, max_size=4))
def test_within_its_budget_an_evaluation_selects_what_jmespath_does(stages: list[str]) -> None:
    data = {"a": list(range(5)), "b": "xy"}
    expression = " | ".join(["a", *stages])
    try:
        expected: Any = jmespath.search(expression, data)
    except (JMESPathError, TypeError, ValueError) as error:
        expected = type(error)
    try:
        selected: Any = evaluate(jmespath.compile(expression), data)
    except (JMESPathError, TypeError, ValueError) as error:
        selected = type(error)
    assert selected == expected


def test_a_value_compared_with_itself_costs_no_walk_of_it() -> None:
    # `@ == @` compares each element with itself, which no budget counted: repeated through `map`, a large result
    # took 14 s of CPU (and any time, with more levels) before it answered.
    copies = "[" + ", ".join(["@"] * 25) + "]"
    expression = f"length(map(&map(&map(&[@ == @, @ != @], {copies}), {copies}), {copies}))"
    started = time.process_time()
    assert evaluate(jmespath.compile(expression), list(range(100_000))) == 25
    assert time.process_time() - started < 1.0
    assert jmespath.search("[@ == @, @ != @, [0] == [0]]", [[1, 2]]) == evaluate(
        jmespath.compile("[@ == @, @ != @, [0] == [0]]"), [[1, 2]]
    )


def test_a_number_too_large_for_a_float_is_a_message_not_a_crash() -> None:
    with pytest.raises(JsonQueryError, match="failed on this result"):
        select('{"n": [1' + "0" * 400 + "]}", "avg(n)", reference="blake3/ab/" + "c" * 62 + ".json")
