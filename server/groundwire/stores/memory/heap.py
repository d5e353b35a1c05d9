"""Giving freed memory back to the operating system after a compaction.

A compaction drops the rows of deleted or replaced documents (their text, term counts
and vectors), but the C allocator keeps the freed pages in its arenas: the server's
RSS would stay at its peak after a large document is deleted (the red team's 12,699
chunk CSV left 1.4 GiB behind). glibc's `malloc_trim(0)` returns the free pages at
the top of each arena and every whole free page inside them; elsewhere (musl, macOS)
there is nothing to call and this does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from collections.abc import Callable


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        trim: Callable[[int], int] = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None
    return trim


def release_free_memory() -> None:
    """Return the allocator's free pages to the system (a few ms; off the event loop)."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
