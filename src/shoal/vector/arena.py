"""Shared memory that is shoal's alone: each block a mapping of its own, never a block another library freed.

``multiprocessing.RawArray`` carves its arrays out of one heap per process, and hands a freed block to the next
array: the next vector env's buffers or counters may lie where another library's worker processes still write. One
such library is PufferLib: its ``Multiprocessing.close()`` terminates its workers without joining them, and with
Ray's SIGTERM handler installed (any program that called ``ray.init()``) a terminated worker went on writing its
observations and flags into its freed arrays for up to ~50 ms (7 of 40 runs here, caught by a probe array allocated
after ``close()``). A shoal vector env made in that window had its counters overwritten: a worker woke to a command
nobody posted and stepped envs that were never reset (CI, 2026-11-30). A block from :func:`shared_bytes` is a new
file mapping, unlinked at once, as ``multiprocessing``'s own arenas are: nothing written into memory freed before
it can reach it, and a worker of shoal's that outlives its vector env's memory writes only into its own mapping.
It works under fork, spawn and forkserver as a ``RawArray`` does (it pickles as one: the file's descriptor).
"""

from __future__ import annotations

import ctypes
from multiprocessing import heap, sharedctypes
from typing import Any


class _OwnArena(heap.BufferWrapper):
    """A ``BufferWrapper`` over an arena of its own (the whole of it), not a block of the process's shared heap;
    the arena is unmapped, and its file closed, when the last array over it goes."""

    def __init__(self, size: int) -> None:  # (not BufferWrapper's: that one takes a block from the shared heap)
        self._state = ((heap.Arena(size), 0, size), size)


def shared_bytes(nbytes: int) -> Any:
    """A zeroed ``ctypes`` array of ``nbytes`` bytes (at least 1) in shared memory of its own, page-aligned: a
    ``RawArray("b", nbytes)`` that no other allocation ever shares (see the module's docs)."""
    nbytes = max(int(nbytes), 1)
    return sharedctypes.rebuild_ctype(ctypes.c_byte * nbytes, _OwnArena(nbytes), None)  # type: ignore[attr-defined]
