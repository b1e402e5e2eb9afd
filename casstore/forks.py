"""
Which process an object was made in, without a system call: `os.getpid()` costs one on every call, and the store
asks on every read and write.

`generation` counts the forks between the first process and this one; `os.fork()` increments it in the child. An
object that records the generation it was made in knows it has crossed a fork when the two differ.
"""

import os

generation = 0


def _count_fork() -> None:
    global generation  # noqa: PLW0603 - the point of this module
    generation += 1


os.register_at_fork(after_in_child=_count_fork)
