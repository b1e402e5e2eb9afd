"""
compactor: compactors for Haystack's `CompactionHook` (a deduplicating offload compactor, a step archive that loses
nothing, and a chain of compactors), tools to read and to search what they stored, and offload strategies for
Haystack's `ToolResultOffloadHook` that keep those tools' answers in context.

```python
from casstore.compactor import (
    CompactorChain,
    DedupOffloadCompactor,
    StepArchiveCompactor,
    keep_in_context,
    make_read_tool,
    make_search_tool,
)
```
"""

from casstore.compactor.chain import CompactorChain
from casstore.compactor.dedup_compactor import DedupOffloadCompactor
from casstore.compactor.offload_strategies import keep_in_context
from casstore.compactor.read_tool import make_read_tool
from casstore.compactor.search_tool import make_search_tool
from casstore.compactor.step_archive import StepArchiveCompactor

__all__ = [
    "CompactorChain",
    "DedupOffloadCompactor",
    "StepArchiveCompactor",
    "keep_in_context",
    "make_read_tool",
    "make_search_tool",
]
