"""Keep freed heap memory for reuse in a process that steps envs (glibc only; elsewhere nothing happens).

glibc maps an allocation above its mmap threshold (128 KiB at first) as new pages and unmaps it when freed, and
returns freed memory at the top of the heap to the kernel; it raises the threshold as such blocks are freed, but a
process whose large blocks come and go in the wrong order never gets there. numpy's temporaries of a batch-native
step are such blocks (65536 instances x 8 bytes is 512 KiB), so the first env of a process paid ~350 page faults a
step, every step: a step of the sanity envs' Bandit at 65536 instances took 1.47 ms instead of 0.63, and every
worker process, which hosts one engine, was always in that state. :func:`retain_freed_memory` fixes both
thresholds at the values glibc's own adjustment ends at (32 MiB, and twice that for trimming), so those blocks come
from the heap and stay there.

What it costs: up to :data:`TRIM_THRESHOLD` bytes of freed memory stay with the process, and blocks under 32 MiB are
no longer given back one by one. It is applied in shoal's worker processes and in a process that hosts a
batch-native env's engine (the serial backend, or the calling process's share in synchronous multiprocessing).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import sys

MMAP_THRESHOLD = 32 << 20
"""Allocations below this come from the heap (glibc's largest dynamic threshold on 64-bit systems)."""
TRIM_THRESHOLD = 2 * MMAP_THRESHOLD
"""Free memory at the top of the heap above this is given back to the kernel (glibc keeps it at twice the mmap
threshold when it adjusts the threshold itself)."""
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's malloc.h
_applied = False
log = logging.getLogger(__name__)


def retain_freed_memory() -> bool:
    """Fix glibc's mmap and trim thresholds in this process (once); whether they are set (False off glibc)."""
    global _applied
    if _applied:
        return True
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (musl has no mallopt)
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    _applied = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    log.debug("glibc malloc thresholds fixed (mmap %d, trim %d): %s", MMAP_THRESHOLD, TRIM_THRESHOLD, _applied)
    return _applied
