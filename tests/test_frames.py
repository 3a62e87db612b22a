"""The frame kernel against OpenCV's INTER_AREA resize, which Gymnasium's AtariPreprocessing calls."""

import cv2
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from shoal.atari import _frames
from shoal.atari.frames import FrameStack, kernel_resizes, screen_reader

VECTOR = [True, False] if _frames.vectorized() else [False]  # the AVX-512 paths, where the CPU has them, and scalar


@pytest.fixture
def vector(request):
    """Run the kernel's AVX-512 paths (param True) or its scalar ones (False); restored afterwards."""
    before = _frames.vectorized()
    _frames.use_vector(request.param)
    yield request.param
    _frames.use_vector(before)


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


@pytest.mark.parametrize("vector", VECTOR, indirect=True, ids=lambda v: "avx512" if v else "scalar")
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    height=st.integers(8, 210),
    width=st.integers(8, 160),
    grayscale=st.booleans(),
    maxpool=st.booleans(),
    levels=st.sampled_from([2, 5, 256]),
    seed=st.integers(0, 2**32 - 1),
)
def test_push_equals_opencv(vector, height, width, grayscale, maxpool, levels, seed):
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


@pytest.mark.parametrize("vector", VECTOR, indirect=True, ids=lambda v: "avx512" if v else "scalar")
@pytest.mark.parametrize("size", [(84, 84), (105, 80), (210, 160)])  # kernel, OpenCV (integer scales), copy/kernel
def test_push_with_screens_of_several_heights_equals_opencv(vector, size):
    heights = [210, 250, 220, 210, 250]
    obs = np.zeros((10, 2, *size), np.uint8)
    frames = FrameStack(obs, True, True, num_envs=5, screen_heights=heights)
    assert frames.screens is None and [v[0].shape for v in frames.views] == [(h, 160) for h in heights]
    expected = obs.copy()
    rng = np.random.default_rng(1)
    envs = np.array([4, 0, 1, 2], np.int64)
    for step in range(3):
        shown = []
        for last, before in frames.views:
            last[...] = rng.integers(0, 256, last.shape, dtype=np.uint8)
            before[...] = rng.integers(0, 256, before.shape, dtype=np.uint8)
            shown.append((last.copy(), before.copy()))
        rows, previous = envs + 5 * (step % 2), envs + 5 * ((step + 1) % 2)
        frames.push(envs, rows, previous, fill=step == 0)
        for env, row, before in zip(envs, rows, previous):
            expected[row] = expected[before]
            reference_push(expected[row], shown[env], step == 0, size, True)
    np.testing.assert_array_equal(obs, expected)


def test_the_kernel_takes_the_usual_sizes_and_opencv_the_rest():
    assert kernel_resizes(84, 84) and kernel_resizes(210, 160) and kernel_resizes(64, 48)
    assert not kernel_resizes(105, 80)  # both scales integers: OpenCV's resizeAreaFast
    assert not kernel_resizes(250, 160)  # enlarging: OpenCV interpolates linearly
    assert kernel_resizes(210, 160, screen_height=250) and not kernel_resizes(125, 80, screen_height=250)


def test_kernel_rejects_rows_outside_the_buffers():
    obs = np.zeros((2, 4, 84, 84), np.uint8)
    frames = FrameStack(obs, True, True, num_envs=2)
    inside, outside = np.array([1], np.int64), np.array([2], np.int64)
    for screens, rows, previous in [(inside, outside, inside), (inside, inside, outside), (outside, inside, inside)]:
        with pytest.raises(IndexError, match="outside obs"):
            frames.push(screens, rows, previous)


@pytest.mark.parametrize("vector", VECTOR, indirect=True, ids=lambda v: "avx512" if v else "scalar")
@pytest.mark.parametrize("size", [33_600, 64, 1, 100])  # a screen, one vector, shorter, a vector and a tail
def test_lookup_equals_indexing_and_says_whether_every_index_was_known(vector, size):
    rng = np.random.default_rng(size)
    table = np.zeros((2, 256), np.uint8)
    table[0] = rng.integers(0, 256, 256)
    table[1, rng.choice(256, 200, replace=False)] = 0xFF
    known = np.flatnonzero(table[1])
    raw = rng.choice(known, size).astype(np.uint8)
    out = np.empty(size, np.uint8)
    assert _frames.lookup(table, raw, out)
    np.testing.assert_array_equal(out, table[0][raw])
    unknown = np.flatnonzero(table[1] == 0)
    for at in (0, size - 1, size // 2):  # one unknown index anywhere (in the vector part or the tail) is found
        bad = raw.copy()
        bad[at] = unknown[at % len(unknown)]
        assert not _frames.lookup(table, bad, out)
        np.testing.assert_array_equal(out, table[0][bad])  # the known pixels are still converted


def test_learn_records_each_index_seen():
    table = np.zeros((2, 256), np.uint8)
    raw = np.array([4, 200, 4, 7], np.uint8)
    _frames.learn(table, raw, np.array([10, 20, 10, 30], np.uint8))
    assert table[0, [4, 200, 7]].tolist() == [10, 20, 30]
    assert np.flatnonzero(table[1]).tolist() == [4, 7, 200]


@pytest.mark.parametrize("vector", VECTOR, indirect=True, ids=lambda v: "avx512" if v else "scalar")
@pytest.mark.parametrize("game", ["pong", "space_invaders"])
def test_screen_reader_reads_what_ale_converts(vector, game):
    import ale_py
    from ale_py import roms

    ale = ale_py.ALEInterface()
    ale.setLoggerMode(ale_py.LoggerMode.Error)
    ale.setInt("random_seed", 0)
    ale.loadROM(roms.get_rom_path(game))
    table = np.zeros((2, 256), np.uint8)
    read = screen_reader(ale, True, table, np.zeros((210, 160), np.uint8))
    ours, theirs = np.empty((210, 160), np.uint8), np.empty((210, 160), np.uint8)
    actions = ale.getMinimalActionSet()
    rng = np.random.default_rng(0)
    for _ in range(400):
        ale.act(actions[rng.integers(len(actions))])
        if ale.game_over():
            ale.reset_game()
        read(ours)
        ale.getScreenGrayscale(theirs)
        np.testing.assert_array_equal(ours, theirs)
    assert 2 <= np.count_nonzero(table[1]) < 128  # it learned the colours this game shows, from ALE
