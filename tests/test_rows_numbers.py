"""Numbers as numpy casts them (shoal.vector._rows): a float past float32's range is reported as numpy's cast reports
it under numpy's error state (and names the env), and rewards and flags of every numeric type are stored as floats and
bools."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

import shoal
from shoal.errors import EnvError
from shoal.vector._rows import RowWriter


def test_a_float_past_float32s_range_warns_as_numpy_does_and_names_the_env():
    writer = RowWriter([((), (), np.zeros((2, 2), np.float32))], np.zeros(2), np.zeros(2, bool), np.zeros(2, bool),
                       np.zeros(2, bool))
    big = np.array([1e300, 0.0])
    with pytest.warns(RuntimeWarning, match="overflow encountered in cast"):
        writer.put_obs(0, big)
    with pytest.warns(RuntimeWarning, match="overflow encountered in cast"):
        writer.put_agents(0, 0, ("a", "b"), {"b": big}, None, None, None, {})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(RuntimeWarning, match="overflow encountered in cast"):
            writer.put(1, 1, big, 0.0, False, False)

    class Far(gym.Env):
        observation_space = spaces.Box(-np.inf, np.inf, (2,), np.float32)
        action_space = spaces.Discrete(2)

        def reset(self, *, seed=None, options=None):
            return np.zeros(2), {}

        def step(self, action):
            return np.array([1e300, 1.0]) if action else np.zeros(2), 0.0, False, False, {}

    with shoal.make(Far, 2, backend="serial") as envs:
        envs.reset(seed=0)
        with pytest.warns(RuntimeWarning, match="overflow encountered in cast"):
            obs = envs.step(np.array([0, 1]))[0]
        assert obs.tolist() == [[0, 0], [np.inf, 1]]
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with pytest.raises(EnvError, match="env 1 raised RuntimeWarning: overflow encountered in cast"):
                envs.step(np.array([0, 1]))
        with np.errstate(over="raise"):  # (the calling process's state: the serial backend steps its envs there)
            with pytest.raises(EnvError, match="env 1 raised FloatingPointError: overflow encountered in cast"):
                envs.step(np.array([0, 1]))


def outcome(write):
    """What ``write()`` raised (its type and message, or None) and the warnings it gave."""
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        try:
            write()
            raised = None
        except Exception as exc:
            raised = (type(exc), str(exc))
    return raised, [(w.category, str(w.message)) for w in warned]


@pytest.mark.parametrize("over", ["ignore", "warn", "raise"])
def test_a_float_past_float32s_range_is_reported_under_numpys_error_state(over):
    """Under np.errstate(over=...) (or np.seterr) the writer reports a cast past float32's range as numpy's own cast
    does: nothing, a RuntimeWarning, or a FloatingPointError. (It warned under every state before, and did not raise
    under "raise".)"""
    leaf = np.zeros((2, 2), np.float32)
    scalar = np.zeros(2, np.float32)
    writer = RowWriter([((), (), leaf)], np.zeros(2), np.zeros(2, bool), np.zeros(2, bool), np.zeros(2, bool))
    put_scalar = RowWriter([((), (), scalar)], np.zeros(2), np.zeros(2, bool), np.zeros(2, bool)).put
    big = np.array([1e300, 0.0])
    with np.errstate(over=over):
        numpy_array = outcome(lambda: np.zeros((2, 2), np.float32).__setitem__(1, big))
        numpy_scalar = outcome(lambda: np.zeros(2, np.float32).__setitem__(1, -1e39))
        assert outcome(lambda: writer.put_obs(0, big)) == numpy_array
        assert outcome(lambda: writer.put(1, 1, big, 0.0, False, False)) == numpy_array
        assert outcome(lambda: put_scalar(1, 1, -1e39, 0.0, False, False)) == numpy_scalar
    expected = {"ignore": (None, []), "warn": (None, [(RuntimeWarning, "overflow encountered in cast")]),
                "raise": ((FloatingPointError, "overflow encountered in cast"), [])}[over]
    assert numpy_array == numpy_scalar == expected  # (numpy's own reports, as this test takes them)
    assert leaf.tolist() == [[np.inf, 0.0], [np.inf, 0.0]] and scalar[1] == -np.inf  # (written whatever the state)


def test_rewards_and_flags_are_stored_as_floats_and_bools():
    batch = np.zeros((2, 1), np.float32)
    rewards, terms, truncs = np.zeros(2), np.zeros(2, np.bool_), np.zeros(2, np.bool_)
    put = RowWriter([((), (), batch)], rewards, terms, truncs).put
    obs = np.ones(1, np.float32)
    numpy_ones = [np.int64(-7), np.uint64(2**64 - 1), np.int8(-3), np.float16(0.3), np.bool_(True)]
    zero_d = [np.array(0.1), np.array(0.3, np.float32), np.array(2**64 - 1, np.uint64), np.array(-3, np.int8),
              np.array(0.3, np.float16), np.array(True), np.array(1.5, ">f8")]
    for reward in [1.5, -3, True, False, np.float64(0.125), np.float32(0.3), *numpy_ones, *zero_d]:
        assert put(0, 1, obs, reward, False, False) == 1, reward
        stored = np.zeros(1)
        stored[0] = reward  # as numpy casts it
        assert rewards[1] == stored[0] and rewards[0] == 0.0
    assert put(0, 1, obs, 0.0, True, False) == 2 and terms[1] and not truncs[1]
    assert put(0, 1, obs, 0.0, np.bool_(False), np.bool_(True)) == 2 and not terms[1] and truncs[1]
    assert put(0, 1, obs, 0.0, False, False) == 1 and not terms[1] and not truncs[1]
    assert put(0, 1, obs, 0.0, 0, 1) == 2 and not terms[1] and truncs[1]  # ints 0 and 1, as the full checks take them
    assert put(0, 1, obs, 0.0, np.uint8(1), np.int64(0)) == 2 and terms[1] and not truncs[1]  # numpy's too
    assert put(0, 1, obs, 0.0, np.array(False), np.array(True)) == 2 and not terms[1] and truncs[1]  # 0-d bool arrays
