"""
Benchmarks of casstore against Haystack's FileSystemToolResultStore on a realistic agent trace.

Run `python -m benchmarks` (small trace), `--size medium` or `--size scale`. The modules, one concept each:

- `trace`: the deterministic agent trace, built from real content on the machine, and its on-disk pack.
- `measure`: timing both stores over the same chunks, alternating; reads checked for equality; disk usage; the floor.
- `memory`: each store's peak memory while writing the trace, in a child process of its own.
- `compaction`: `DedupOffloadCompactor` against Haystack's `ToolResultOffloadCompactor` over one long conversation.
- `report`: medians, ratios with their range, targets, the markdown table and the JSON.
"""
