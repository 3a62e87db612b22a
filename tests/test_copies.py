"""copy_out: copies out of the shared buffers are exact, owned, and never land in the page window where this CPU's
memcpy slows down 5-15x (shoal/vector/copies.py)."""

from __future__ import annotations

import numpy as np
import pytest

from shoal.vector._memory import page_delta
from shoal.vector.copies import CHECKED_FROM, NEAR, SPLIT_FROM, SplitCopies, copy_out


def test_page_delta_is_the_distance_between_two_buffers_modulo_a_page():
    block = np.zeros(3 * 4096, np.uint8)
    assert page_delta(block[16:], block) == 16
    assert page_delta(block, block[16:]) == 4096 - 16
    assert page_delta(block[4096 + 40 :], block[8:]) == 32
    with pytest.raises(ValueError, match="contiguous"):
        page_delta(block[::2], block)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.bool_, np.uint8])
def test_copies_are_exact_owned_and_never_in_the_slow_window(dtype):
    # A source at each 16-byte offset of a page, as rows of the shared buffers lie: freed and allocated again, the
    # destination of a plain copy comes back to the same place, so for some offsets it lands in the window.
    rows = CHECKED_FROM // np.dtype(dtype).itemsize + 100
    block = np.random.default_rng(0).integers(0, 2, 2 * 4096 + rows * 8).astype(np.uint8)
    plain_hits = 0
    for offset in range(0, 4096, 16):
        src = block[offset : offset + rows * np.dtype(dtype).itemsize].view(dtype)
        plain_hits += page_delta(src.copy(), src) < NEAR
        out = copy_out(src)
        assert page_delta(out, src) >= NEAR, offset
        assert out.dtype == src.dtype and out.shape == src.shape and out.flags.owndata and out.flags.c_contiguous
        assert np.array_equal(out, src, equal_nan=dtype in (np.float32, np.float64))
        out[0] = out[1]  # its own memory: the source is untouched
        assert np.array_equal(src, block[offset : offset + rows * np.dtype(dtype).itemsize].view(dtype))
    assert plain_hits  # the test did meet the window


def test_small_and_multidimensional_copies():
    block = np.arange(4096 * 8, dtype=np.uint8)
    small = block[16:1016]
    assert np.array_equal(copy_out(small), small) and copy_out(small).flags.owndata
    frames = block[64 : 64 + 8 * 84 * 40].reshape(8, 84, 40)  # a batch of image rows, 26 KiB
    out = copy_out(frames)
    assert out.shape == (8, 84, 40) and np.array_equal(out, frames) and page_delta(out, frames) >= NEAR
    strided = block.reshape(64, 512)[:, ::2]  # not one block (no buffer rows are): copied as numpy copies it
    assert np.array_equal(copy_out(strided), strided) and copy_out(strided).flags.c_contiguous


@pytest.mark.parametrize("dtype", [np.float64, np.bool_])
def test_split_copies_copy_each_part_when_told_and_the_parts_left_when_finished(dtype):
    rows = SPLIT_FROM // np.dtype(dtype).itemsize
    cuts = [0, rows // 5, rows // 3, rows // 2, 3 * rows // 4, rows]
    parts = [slice(a, b) for a, b in zip(cuts[:-1], cuts[1:])]
    block = np.random.default_rng(1).integers(0, 2, 2 * 4096 + rows * 8).astype(np.uint8)
    for offset in range(0, 4096, 512):
        srcs = (block[offset : offset + rows * np.dtype(dtype).itemsize].view(dtype),
                block[offset : offset + 2 * rows].reshape(rows, 2),
                block[offset : offset + 64].view(dtype))  # small: copied whole when finished
        split = SplitCopies(srcs, parts)
        before = [np.array(src, copy=True) for src in srcs]
        split.copy(1)
        split.copy(3)
        for src in srcs:
            src[:] = 1 - src  # after the copies of parts 1 and 3: they hold the rows as they were, the rest follows
        split.copy(1)  # a part copied again is not copied again
        outs = split.finish()
        for out, src, was in zip(outs, srcs, before):
            assert out.shape == src.shape and out.dtype == src.dtype and out.flags.owndata
            assert page_delta(out, src) >= NEAR
        for out, src, was in zip(outs[:2], srcs[:2], before[:2]):
            for i, part in enumerate(parts):
                expected = was if i in (1, 3) else src
                np.testing.assert_array_equal(out[part], expected[part], err_msg=f"part {i}")
        np.testing.assert_array_equal(outs[2], srcs[2])
