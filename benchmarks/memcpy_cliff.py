"""How long a copy takes by where its destination lies relative to its source within a page, and where shoal's
copies out of the shared buffers (shoal.vector.copies.copy_out) put theirs.

    python benchmarks/memcpy_cliff.py

On AMD Zen 3 and later with glibc's ``rep movsb`` memcpy, copies of a few KiB to ~450 KiB whose destination lies
0-63 bytes after the source (modulo 4 KiB) run 5-15x slower; elsewhere the columns are flat. The last column is a
plain ``src.copy()`` from a source at each 16-byte offset of a page (the destination comes back to the same place
each time, as a step's allocations do) against ``copy_out``: how many of the 256 land in that window.
"""

from __future__ import annotations

import mmap
import time

import numpy as np

from shoal.vector._memory import page_delta
from shoal.vector.copies import NEAR, copy_out

DELTAS = (0, 8, 16, 32, 64, 128, 2048)


def copy_us(dst: np.ndarray, src: np.ndarray, repeats: int = 50) -> float:
    np.copyto(dst, src)
    start = time.perf_counter()
    for _ in range(repeats):
        np.copyto(dst, src)
    return (time.perf_counter() - start) / repeats * 1e6


def main() -> None:
    shared = np.frombuffer(mmap.mmap(-1, 1 << 21), np.uint8)  # page-aligned, as the shared buffers are
    raw = np.empty((1 << 21) + 8192, np.uint8)
    page = (-raw.ctypes.data) % 4096
    header = " ".join(f"{'+' + str(d) + ' B':>8s}" for d in DELTAS)
    print(f"{'size':>8s} {header}   in the window: copy / copy_out")
    for kib in (16, 64, 256, 448, 1024):
        size = kib << 10
        src = shared[:size]
        times = [copy_us(raw[page + d : page + d + size], src) for d in DELTAS]
        plain = placed = 0
        for offset in range(0, 4096, 16):
            moved = shared[offset : offset + size]
            plain += page_delta(moved.copy(), moved) < NEAR
            placed += page_delta(copy_out(moved), moved) < NEAR
        print(f"{kib:5d} KiB " + " ".join(f"{t:6.1f}us" for t in times) + f"   {plain:3d} / {placed:d} of 256")


if __name__ == "__main__":
    main()
