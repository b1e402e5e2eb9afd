"""
compactor: a deduplicating offload compactor for Haystack's `CompactionHook`, tools to read and to search offloaded
results, and offload strategies for Haystack's `ToolResultOffloadHook` that keep those tools' answers in context.

```python
from casstore.compactor import DedupOffloadCompactor, keep_in_context, make_read_tool, make_search_tool
```
"""

from casstore.compactor.dedup_compactor import DedupOffloadCompactor
from casstore.compactor.offload_strategies import keep_in_context
from casstore.compactor.read_tool import make_read_tool
from casstore.compactor.search_tool import make_search_tool

__all__ = ["DedupOffloadCompactor", "keep_in_context", "make_read_tool", "make_search_tool"]
