"""Copies of results out of the shared buffers, placed where the CPU copies them at full speed.

On AMD Zen 3 and later CPUs, glibc's memcpy for these sizes (``rep movsb``; glibc 2.36 here, other releases not
checked) runs 5-16x slower when the destination lies 0-63 bytes after the source, modulo a 4 KiB page. Measured
here (AMD EPYC; benchmarks/memcpy_cliff.py): a 64 KiB copy 3 -> 35 us, 256 KiB 11 -> 168 us, 448 KiB 17 -> 282 us.
A result copied out of the buffers lands wherever malloc puts it, and a step's allocations repeat, so a bad place
repeats too: Stochastic x 65536 on two processes copied its truncations 16 bytes after their source every other
step. :func:`copy_out` asks where a new array lies (:func:`~shoal.vector._memory.page_delta`, ~0.1 us) and, in
that window, takes another before copying. On other CPUs and libcs the check costs the same (~0.5 us a copy) and
refuses one place in 64.
"""

from __future__ import annotations

import numpy as np

from shoal.vector._memory import page_delta

CHECKED_FROM = 16 << 10
"""Copies of at least this many bytes are placed (a smaller copy loses at most a few microseconds)."""
NEAR = 64
"""A destination this few bytes after its source, modulo a page, is refused."""
_TRIES = 8


def copy_out(src: np.ndarray) -> np.ndarray:
    """A copy of ``src`` (C order, owning its data, as ``src.copy()``); when ``src`` is one contiguous block (the
    buffers' rows are), at a page offset from it outside the slow window."""
    if src.nbytes < CHECKED_FROM or not src.flags.c_contiguous:
        return src.copy()
    dst = _placed(src)
    dst[...] = src
    return dst


def _placed(src: np.ndarray) -> np.ndarray:
    """A new array shaped as ``src`` (contiguous), at a page offset from it outside the slow window."""
    dst = np.empty(src.shape, src.dtype)
    if page_delta(dst, src) < NEAR:
        refused = [dst]  # held while the next is allocated, so that malloc gives another place
        while page_delta(dst, src) < NEAR and len(refused) < _TRIES:
            dst = np.empty(src.shape, src.dtype)
            refused.append(dst)
    return dst


SPLIT_FROM = 256 << 10
"""Results of at least this many bytes are copied out in two parts (:class:`SplitCopies`); below it, the second
call per array costs about what the overlap gains, or more (measured with the split forced, in turns against the
default: CartPole x 8 on 2 processes 3-13% slower, Breakout x 2, 56 KiB of frames, within 2%)."""


class SplitCopies:
    """Copies of ``srcs`` (whole buffers, contiguous) made in parts (``parts``: consecutive slices of rows that
    cover them in order): part ``i`` by :meth:`copy` as soon as its rows are final, the parts left by
    :meth:`finish`. A synchronous multiprocessing step copies each group's rows as its answer comes (the calling
    process's own first, while the workers step theirs), so only the rows of the last groups to answer are copied
    after the wait.

    It pays where some workers still step while others' rows are copied: Bandit x 65536 on 2 processes (the
    calling process's rows copied first) 338-381 -> 415-429 M steps/s in two A/B runs, at 262144 and for Stochastic
    and Memory within +-10% (README, "A large synchronous step"); Breakout x 64 on 16 workers copies 1.8 MB of
    observations a batch, ~0.27 ms of a ~3.5 ms batch when copied after the wait (a lent 16-core machine). Arrays
    under :data:`CHECKED_FROM` bytes (rewards and flags, at those sizes) are copied whole by :meth:`finish`."""

    def __init__(self, srcs: tuple[np.ndarray, ...], parts: list[slice]) -> None:
        self.parts = parts
        self.dsts = tuple(_placed(src) for src in srcs)
        self._large = [(dst, src) for dst, src in zip(self.dsts, srcs) if src.nbytes >= CHECKED_FROM]
        self._small = [(dst, src) for dst, src in zip(self.dsts, srcs) if src.nbytes < CHECKED_FROM]
        self._left = [True] * len(parts)

    def copy(self, part: int) -> None:
        """Copy the rows of part ``part`` (again: nothing)."""
        if self._left[part]:
            self._copy_rows(part)

    def finish(self) -> tuple[np.ndarray, ...]:
        """The copies, whole: the parts left copied now (where answers are reported as they come, none is)."""
        for part, left in enumerate(self._left):
            if left:
                self._copy_rows(part)
        for dst, src in self._small:
            dst[...] = src
        return self.dsts

    def _copy_rows(self, part: int) -> None:
        self._left[part] = False
        rows = self.parts[part]
        for dst, src in self._large:
            dst[rows] = src[rows]
