"""
The step archive in a real Agent run of 400 steps with a small window: the window holds at every request, and every
fact planted in the early steps can still be read back at the end, through the references the conversation holds.
Haystack's `SlidingWindowCompactor`, in the same run, holds the window and loses them.
"""

import itertools
import json

from haystack.hooks.compaction import SlidingWindowCompactor

from casstore.compactor import CompactorChain, DedupOffloadCompactor, StepArchiveCompactor
from tests.compactor.archive_helpers import planted, reachable_facts, run_agent
from tests.store_backends import Backend

STEPS = 400
WINDOW = 4_000


def test_the_window_holds_and_every_planted_fact_stays_reachable(backend: Backend) -> None:
    store = backend.open(namespace="long-run")
    chain = CompactorChain(
        compactors=[DedupOffloadCompactor(store=store, min_tokens=100), StepArchiveCompactor(store=store)]
    )

    messages, model, read_tool = run_agent(chain, store=store, steps=STEPS, window=WINDOW)

    assert model.step == STEPS and len(model.requests) == STEPS + 1
    assert max(model.requests) <= WINDOW, [tokens for tokens in model.requests if tokens > WINDOW]
    # The run needed both: results were offloaded, and steps archived many times over.
    archives = backend.rows(
        "SELECT refs, first_step, last_step FROM archives WHERE namespace = ? ORDER BY id", ["long-run"]
    )
    assert len(archives) > 10 and backend.count("offloads") > 10
    # The archives cover the steps in order, each going on where the one before stopped.
    spans = [(first, last) for _, first, last in archives]
    assert spans[0][0] == 1 and all(after[0] == before[1] + 1 for before, after in itertools.pairwise(spans))
    # One note stands, naming the latest archive.
    notes = [message for message in messages if "context_compaction" in message.meta and message.texts]
    text = notes[0].text or ""
    assert len(notes) == 1 and json.loads(archives[-1][0])[0] in text
    assert "archived" in text and "read_offloaded_result" in text
    # The early steps are gone from the conversation, and every fact planted in them is reachable.
    assert not planted() & reachable_facts(messages, None)
    assert reachable_facts(messages, read_tool) >= planted()


def test_a_sliding_window_holds_the_window_and_loses_the_facts() -> None:
    messages, model, _ = run_agent(SlidingWindowCompactor(), store=None, steps=STEPS, window=WINDOW)

    assert model.step == STEPS and max(model.requests) <= WINDOW
    assert any("cannot be recovered" in (message.text or "") for message in messages)
    assert not planted() & reachable_facts(messages, None)
