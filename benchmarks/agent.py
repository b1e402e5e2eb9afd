"""
The simulated agent's loop: step by step it picks tool calls from the seed, runs them, and yields their results.

The seed only decides which tool is called on what, and when; the content is real (see `benchmarks.tool_results`).
"""

import bisect
from collections.abc import Iterator

from benchmarks.agent_session import AgentSession
from benchmarks.corpus import Corpus
from benchmarks.tool_results import TOOLS
from benchmarks.trace_plan import TOOL_WEIGHTS, Part, ToolResult, TraceSize


def generate(size: TraceSize, seed: int, corpus: Corpus | None = None) -> Iterator[ToolResult]:
    """
    Yield the trace's tool results lazily, in order.

    :param size: Which trace (see `SIZES`).
    :param seed: Same seed, same machine: same trace.
    :param corpus: The content to draw from; discovered on this machine by default.
    :returns: An iterator of `size.results` tool results.
    """
    session = AgentSession(corpus or Corpus.discover(), size, seed)
    return _results(session, _ToolChoice(session), size.results)


class _ToolChoice:
    """The profile's tools, chosen by weight; those the machine cannot serve (no git history, no image) left out."""

    def __init__(self, session: AgentSession) -> None:
        weights = dict(TOOL_WEIGHTS[session.size.profile])
        if not session.git:
            weights["git_log"] = weights["git_show"] = 0
        if not session.corpus.images:
            weights["view_image"] = 0
        self._tools = [tool for tool, weight in weights.items() if weight > 0]
        self._cumulative: list[float] = []
        total = 0.0
        for tool in self._tools:
            total += weights[tool]
            self._cumulative.append(total)

    def pick(self, session: AgentSession) -> str:
        """:returns: The next tool: a follow-up a tool asked for, else one drawn by weight."""
        if session.pending:
            return session.pending.pop(0)
        return self._tools[bisect.bisect(self._cumulative, session.rng.random() * self._cumulative[-1])]


def _results(session: AgentSession, choice: _ToolChoice, count: int) -> Iterator[ToolResult]:
    """
    Run the agent until it produced `count` results.

    :returns: The results; a multi-part result's keys are numbered, a single part's key is the call's prefix alone.
    """
    produced = step = 0
    while produced < count:
        if session.task.remaining <= 0:
            session.task = session.new_task()
        step += 1
        # An agent step calls one tool, sometimes a few in parallel.
        calls = 1 if session.rng.random() < 0.8 else session.rng.randint(2, 3)
        for _ in range(min(calls, count - produced)):
            tool = choice.pick(session)
            arguments, parts = TOOLS[tool](session)
            call_id = f"call_{session.rng.getrandbits(64):016x}"
            prefix = f"{step}_{tool}_{call_id}"
            if len(parts) == 1:
                keyed: tuple[Part, ...] = (Part(f"{prefix}{parts[0][0]}", parts[0][1]),)
            else:
                keyed = tuple(
                    Part(f"{prefix}_{position}{extension}", content)
                    for position, (extension, content) in enumerate(parts)
                )
            session.task.remaining -= 1
            produced += 1
            yield ToolResult(step, tool, call_id, arguments, keyed)
