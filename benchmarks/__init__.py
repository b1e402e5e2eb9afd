"""
Benchmarks of casstore against Haystack's FileSystemToolResultStore on a realistic agent trace.

Run `python -m benchmarks` (small trace), `--size medium` or `--size scale`. The modules, one concept each:

- `trace`: the deterministic agent trace, built from real content on the machine, and its on-disk pack; it gathers
  the public names of the modules that build it:
  - `trace_plan`: the trace sizes, each profile's mix of tool calls, and the shape of a tool result.
  - `corpus`: where the content comes from on the machine; `git_history`: the real git output at hand.
  - `agent`: the loop that picks each call from the seed; `agent_session`: the agent's state between calls.
  - `tool_results`: each tool's real output (reads, edits, searches, listings, git, images).
  - `trace_pack`: the pack file, its index and figures, and `materialize`.
  - `lru_cache`: the small cache the generator keeps file texts and git output in.
- `measure`: timing both stores over the same chunks, alternating; reads checked for equality; disk usage.
- `floors`: the least a recorded write, a new write and a verified read can cost, measured beside the stores.
- `memory`: each store's peak memory while writing the trace, in a child process of its own.
- `compaction`: `DedupOffloadCompactor` against Haystack's `ToolResultOffloadCompactor` over one long conversation.
- `report`: medians, ratios with their range, targets, the markdown table and the JSON.
"""
