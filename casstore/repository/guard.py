"""
`OpenGuard`: lets `close()` wait for operations in flight, so nothing uses a file descriptor after it is closed.

Without it, a thread staging a blob while another thread closes the store could write through a descriptor number
that the process has already reused for something else, outside the store.
"""

import threading

from casstore import forks
from casstore.errors import StoreClosedError


class OpenGuard:
    """Counts operations in flight; `close` refuses new ones and waits for the running ones to end."""

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self._generation = forks.generation
        # Every operation takes `_lock` directly (a C-level context manager, cheaper than the condition's own);
        # only `close` waits on the condition.
        self._lock = threading.Lock()
        self._condition = threading.Condition(self._lock)
        self._active = 0
        self._closing = False

    def _for_this_process(self) -> None:
        # After fork(), operations counted in the parent belong to threads the child does not have.
        if self._generation != forks.generation:
            closing = self._closing
            self._reset()
            self._closing = closing

    def held(self) -> "OpenGuard":
        """
        :returns: A context manager that keeps the store open for the duration of the block (the guard itself).
        :raises StoreClosedError: On entering, if the store is closed or closing.
        """
        return self

    def __enter__(self) -> None:
        if self._generation != forks.generation:
            self._for_this_process()
        with self._lock:
            if self._closing:
                # Both stores share this guard, so the message names neither: "open it again" fits either one.
                raise StoreClosedError(
                    "This casstore store is closed; open the store again (a new store object on the same location) "
                    "to go on."
                )
            self._active += 1

    def __exit__(self, *exc_info: object) -> None:
        with self._lock:
            self._active -= 1
            if self._active == 0 and self._closing:
                self._condition.notify_all()

    def close(self) -> bool:
        """
        Refuse new operations and wait for the running ones to end.

        :returns: True the first time, False if the guard was already closed.
        """
        self._for_this_process()
        with self._condition:
            if self._closing:
                return False
            self._closing = True
            self._condition.wait_for(lambda: self._active == 0)
            return True
