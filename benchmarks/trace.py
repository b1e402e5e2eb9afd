"""
The agent trace: the tool results a long-running coding agent produces, built deterministically from a seed.

Everything in it is real content found on the machine: the source files, READMEs and metadata of the installed
packages (read whole, re-read, read by line range and by page, re-read after small edits), `grep -rn`-like searches
and `ls -la`-like listings over them, real `git log` / `git show` output of a git repository at hand (and `git diff` /
`git status` of the agent's own edits), and PNG/JPEG images shipped with packages or under /usr/share, sent as
multi-part results. No random text is generated: the seed only decides which tool is called on what, and when.

`generate` yields results lazily. `materialize` writes them once into a pack file (content bytes back to back, plus a
small index) so that a benchmark can replay the same trace many times, slice by slice, without holding it in memory
and without paying the generator's cost again. Same seed and same machine (same installed files and git history) give
the same trace; `PackedTrace.fingerprint` tells whether two traces are the same.

This module is the trace's public face; the parts live in modules of their own:

- `trace_plan`: the sizes, the mix of tools per profile, and the shape of a result (`TraceSize`, `ToolResult`).
- `corpus`: where the content comes from on this machine (`Corpus`); `git_history`: the git output at hand.
- `agent`: the loop that picks the calls (`generate`); `agent_session`: its state between calls;
  `tool_results`: each tool's real output.
- `trace_pack`: the on-disk pack (`materialize`, `PackedTrace`, `TraceStats`).
"""

import json
import sys
from pathlib import Path

from benchmarks.agent import generate
from benchmarks.corpus import Corpus
from benchmarks.trace_pack import PackedTrace, TraceStats, materialize
from benchmarks.trace_plan import GENERATOR_VERSION, SIZES, Part, ToolResult, TraceSize

__all__ = [
    "GENERATOR_VERSION",
    "SIZES",
    "Corpus",
    "PackedTrace",
    "Part",
    "ToolResult",
    "TraceSize",
    "TraceStats",
    "generate",
    "materialize",
]


if __name__ == "__main__":  # pragma: no cover - a quick look at a trace
    import tempfile

    chosen = SIZES[sys.argv[1] if len(sys.argv) > 1 else "small"]
    with tempfile.TemporaryDirectory() as folder:
        packed = materialize(chosen, 0, Path(folder))
        print(json.dumps(packed.stats.to_dict(), indent=2), packed.fingerprint, f"{packed.generation_seconds:.1f}s")
