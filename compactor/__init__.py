"""
compactor: a deduplicating offload compactor for Haystack's `CompactionHook`, and a tool to read offloaded results.

```python
from casstore.compactor import DedupOffloadCompactor, make_read_tool
```
"""

from casstore.compactor.dedup_compactor import DedupOffloadCompactor
from casstore.compactor.read_tool import make_read_tool

__all__ = ["DedupOffloadCompactor", "make_read_tool"]
