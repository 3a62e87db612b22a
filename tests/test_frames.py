"""The frame kernel against OpenCV's INTER_AREA resize, which Gymnasium's AtariPreprocessing calls."""

import cv2
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from shoal.atari.frames import FrameStack, kernel_resizes


def reference_push(stack_rows, screens, fill, size, maxpool):
    """Max-pool, cv2.resize(INTER_AREA) and a shifted stack, one env at a time."""
    height, width = size
    last = np.maximum(screens[0], screens[1]) if maxpool else screens[0]
    frame = cv2.resize(last, (width, height), interpolation=cv2.INTER_AREA)
    if fill:
        stack_rows[:] = frame
    else:
        stack_rows[:-1] = stack_rows[1:].copy()
        stack_rows[-1] = frame


@settings(max_examples=40, deadline=None)
@given(
    height=st.integers(8, 210),
    width=st.integers(8, 160),
    grayscale=st.booleans(),
    maxpool=st.booleans(),
    levels=st.sampled_from([2, 5, 256]),
    seed=st.integers(0, 2**32 - 1),
)
def test_push_equals_opencv(height, width, grayscale, maxpool, levels, seed):
    # Three envs, two slots of obs rows: each step moves the stacks of envs 2 and 0 to the other slot.
    rng = np.random.default_rng(seed)
    shape = (6, 2, height, width) if grayscale else (6, 2, height, width, 3)
    obs = np.zeros(shape, np.uint8)
    frames = FrameStack(obs, grayscale, maxpool, num_envs=3)
    expected = obs.copy()
    envs = np.array([2, 0], np.int64)
    for step in range(4):
        frames.screens[:] = rng.integers(0, levels, frames.screens.shape, dtype=np.uint8) * (255 // (levels - 1))
        screens = frames.screens.copy()
        rows, previous = envs + 3 * (step % 2), envs + 3 * ((step + 1) % 2)
        frames.push(envs, rows, previous, fill=step == 0)
        for env, row, before in zip(envs, rows, previous):
            expected[row] = expected[before]
            reference_push(expected[row], screens[env], step == 0, (height, width), maxpool)
    np.testing.assert_array_equal(obs, expected)


def test_the_kernel_takes_the_usual_sizes_and_opencv_the_rest():
    assert kernel_resizes(84, 84) and kernel_resizes(210, 160) and kernel_resizes(64, 48)
    assert not kernel_resizes(105, 80)  # both scales integers: OpenCV's resizeAreaFast
    assert not kernel_resizes(250, 160)  # enlarging: OpenCV interpolates linearly


def test_kernel_rejects_rows_outside_the_buffers():
    obs = np.zeros((2, 4, 84, 84), np.uint8)
    frames = FrameStack(obs, True, True, num_envs=2)
    inside, outside = np.array([1], np.int64), np.array([2], np.int64)
    for screens, rows, previous in [(inside, outside, inside), (inside, inside, outside), (outside, inside, inside)]:
        with pytest.raises(IndexError, match="outside obs"):
            frames.push(screens, rows, previous)
