"""
Which process an object was made in, without a system call: `os.getpid()` costs one on every call, and the store
asks on every read and write.

`generation` counts the forks between the first process and this one; `os.fork()` (and so `multiprocessing`'s fork
start method) increments it in the child. An object that records the generation it was made in knows it has crossed a
fork when the two differ. A fork made by C code that never tells Python (`libc.fork()` through `ctypes`, say) is not
counted: such a child must not use a store its parent opened.
"""

import os

generation = 0


def _count_fork() -> None:
    global generation  # noqa: PLW0603 - the point of this module
    generation += 1


os.register_at_fork(after_in_child=_count_fork)
