"""Exact autoreset tables with a counting env (obs = reward = step count, episodes of 3 steps)."""

from __future__ import annotations

import random
from contextlib import closing
from functools import partial

import gymnasium as gym
import numpy as np
import pytest
from fakes.envs import CountingEnv, KeepsItsOutputs
from gymnasium.vector import AutoresetMode
from helpers import assert_same

import shoal
from shoal.errors import ResetNeededError

ACTIONS = np.zeros(3, np.int64)


def _run(mode, backend, steps=6):
    with shoal.make([lambda: CountingEnv(3)] * 3, autoreset_mode=mode, **backend) as envs:
        obs, _ = envs.reset(seed=0)
        rows = [(int(obs[0]), None, None, None)]
        for _ in range(steps):
            obs, rew, term, trunc, info = envs.step(ACTIONS)
            final = info["final_obs"][0] if "final_obs" in info and info["_final_obs"][0] else None
            rows.append((int(obs[0]), float(rew[0]), bool(term[0]), None if final is None else int(final)))
        return rows


def test_next_step_table(backend):
    assert _run("next_step", backend) == [
        (0, None, None, None),
        (1, 1.0, False, None),
        (2, 2.0, False, None),
        (3, 3.0, True, None),
        (0, 0.0, False, None),  # the reset step: reset obs, reward 0, action ignored
        (1, 1.0, False, None),
        (2, 2.0, False, None),
    ]


def test_same_step_table(backend):
    assert _run("same_step", backend) == [
        (0, None, None, None),
        (1, 1.0, False, None),
        (2, 2.0, False, None),
        (0, 3.0, True, 3),  # reset obs at once, the last obs in info["final_obs"]
        (1, 1.0, False, None),
        (2, 2.0, False, None),
        (0, 3.0, True, 3),
    ]


@pytest.mark.parametrize("kind", ["array", "dict"])
def test_same_step_finals_are_what_the_ending_step_returned_from_an_env_that_reuses_its_outputs(backend, kind):
    """The env changes the observation and info it returned in the reset that follows: ``final_obs`` and
    ``final_info`` still hold what the step that ended the episode returned (the values as they were then), and the
    rows and infos returned are the reset's. Gymnasium's ``SyncVectorEnv`` gives the same ``final_info``; its
    ``final_obs`` is the env's own object, so it shows the reset's values."""
    fns = [partial(KeepsItsOutputs, kind)] * 3
    with shoal.make(fns, autoreset_mode="same_step", **backend) as envs:
        gym_envs = gym.vector.SyncVectorEnv(fns, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
        envs.reset(seed=0)
        gym_envs.reset(seed=0)
        for _ in range(3):
            obs, _, term, _, info = envs.step(ACTIONS)
            _, _, _, _, gym_info = gym_envs.step(ACTIONS)
        gym_envs.close()
    assert term.all() and info["_final_obs"].all() and info["_final_info"].all()
    rows = obs if kind == "array" else obs["x"]
    np.testing.assert_array_equal(rows, np.full((3, 2), -1))  # the reset's
    assert list(info["phase"]) == ["reset"] * 3 and list(info["t"]) == [-1] * 3
    for row in range(3):
        final = info["final_obs"][row] if kind == "array" else info["final_obs"][row]["x"]
        np.testing.assert_array_equal(final, [3, 3])
    final_info = info["final_info"]
    assert list(final_info["phase"]) == ["step"] * 3 and list(final_info["t"]) == [3] * 3
    np.testing.assert_array_equal(final_info["inner"]["t"], [3] * 3)
    np.testing.assert_array_equal(final_info["trace"], np.full((3, 2), 3))
    for key in ("phase", "t", "trace"):
        np.testing.assert_array_equal(final_info[key], gym_info["final_info"][key])
    np.testing.assert_array_equal(final_info["inner"]["t"], gym_info["final_info"]["inner"]["t"])


def test_disabled_table_and_partial_reset(backend):
    fns = [lambda: CountingEnv(3), lambda: CountingEnv(5), lambda: CountingEnv(5)]
    with shoal.make(fns, autoreset_mode="disabled", **backend) as envs:
        envs.reset(seed=0)
        for _ in range(3):
            obs, rew, term, *_ = envs.step(ACTIONS)
        assert obs.tolist() == [3, 3, 3] and term.tolist() == [True, False, False]
        with pytest.raises(ResetNeededError, match=r"envs \[0\] ended their episode"):
            envs.step(ACTIONS)
        obs, info = envs.reset(options={"reset_mask": np.array([True, False, False])})
        assert obs.tolist() == [0, 3, 3]
        obs, rew, term, *_ = envs.step(ACTIONS)
        assert obs.tolist() == [1, 4, 4] and rew.tolist() == [1.0, 4.0, 4.0]


def test_next_step_partial_reset_cancels_pending_autoreset(backend):
    with shoal.make([lambda: CountingEnv(2)] + [lambda: CountingEnv(9)] * 2, **backend) as envs:
        envs.reset()
        envs.step(ACTIONS)
        _, _, term, _, _ = envs.step(ACTIONS)
        assert term.tolist() == [True, False, False]
        obs, _ = envs.reset(options={"reset_mask": np.array([True, False, False])})
        assert obs.tolist() == [0, 2, 2]
        obs, rew, *_ = envs.step(ACTIONS)
        assert obs.tolist() == [1, 3, 3] and rew.tolist() == [1.0, 3.0, 3.0]  # stepped, not a second reset


class _Handle:
    """A value that cannot be copied (as an object holding a lock or a C handle)."""

    def __init__(self, t):
        self.t = t

    def __deepcopy__(self, memo):
        raise TypeError("cannot copy a handle")


class _Handles(gym.Space):
    def __init__(self):
        super().__init__(None, None)

    def contains(self, x):
        return isinstance(x, _Handle)

    def __eq__(self, other):
        return isinstance(other, _Handles)


class _HandleEnv(gym.Env):
    observation_space, action_space = _Handles(), gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return _Handle(0), {}

    def step(self, action):
        self.t += 1
        return _Handle(self.t), 0.0, self.t == 2, False, {}


def test_same_step_final_observations_that_cannot_be_copied_are_the_envs_own():
    """An observation that cannot be copied goes into ``final_obs`` as the env returned it (Gymnasium's way; with
    ``copy=False``, as in Gymnasium, whose ``copy=True`` deep-copies every batch)."""
    with shoal.make([_HandleEnv] * 2, backend="serial", autoreset_mode="same_step", copy=False) as envs:
        envs.reset(seed=0)
        envs.step(ACTIONS[:2])
        obs, _, term, _, info = envs.step(ACTIONS[:2])
    assert term.all() and [o.t for o in obs] == [0, 0] and [o.t for o in info["final_obs"]] == [2, 2]


class _SharedStream(gym.Env):
    """Draws every observation from one random stream that all its instances share (as envs using Python's or
    numpy's global generator do) and ends its episode on a draw below 0.3: what each env sees depends on the order
    in which the envs step and reset."""

    observation_space = gym.spaces.Box(0.0, 1.0, (1,), np.float64)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, stream: random.Random) -> None:
        self.stream = stream

    def reset(self, *, seed=None, options=None):
        return np.array([self.stream.random()]), {"phase": "reset"}

    def step(self, action):
        x = self.stream.random()
        return np.array([x]), x, x < 0.3, False, {"phase": "step"}


@pytest.mark.parametrize("mode", [AutoresetMode.SAME_STEP, AutoresetMode.NEXT_STEP])
def test_serial_steps_and_resets_envs_in_gymnasiums_order(mode):
    """The calling process steps its envs in Gymnasium's order: each env that ends its episode resets right after
    its own step (same-step) or in its turn of the next (next-step), before the next env steps, so envs that share
    a random stream see the values they would see in Gymnasium's ``SyncVectorEnv``."""
    actions = np.zeros(4, np.int64)
    mine = shoal.make([partial(_SharedStream, random.Random(0))] * 4, autoreset_mode=mode, backend="serial")
    theirs = gym.vector.SyncVectorEnv([partial(_SharedStream, random.Random(0))] * 4, autoreset_mode=mode)
    with closing(mine), closing(theirs):
        assert_same(mine.reset(), theirs.reset())
        ended = 0
        for t in range(30):
            out = mine.step(actions)
            assert_same(out, theirs.step(actions), f"step {t}")
            ended += int(out[2].sum())
    assert ended >= 8  # episodes ended at different steps in different envs


def test_a_workers_reset_without_seeds_or_options_goes_through_shared_memory_and_matches(monkeypatch):
    """A worker's partial reset with neither seeds nor options is posted like a step, which envs in the buffers
    (``_worker.shared_kind``: no message); one with seeds or options goes pickled. Each resets the envs the mask names
    as the serial backend does."""
    from shoal.vector import _worker

    kinds = []
    shared_kind = _worker.shared_kind
    monkeypatch.setattr(_worker, "shared_kind", lambda *args: kinds.append(shared_kind(*args)) or kinds[-1])
    with (shoal.make("CartPole-v1", 4, num_workers=2, context="fork") as envs,
          shoal.make("CartPole-v1", 4, backend="serial") as ref):
        for e in (envs, ref):
            e.reset(seed=3)
        for mask, seed, options, kind in [
            ([False, False, True, True], None, {}, _worker.RESET),  # the worker's group: envs 2 and 3
            ([True, False, False, True], None, {}, _worker.RESET),  # (env 2's flag from before must be cleared)
            ([False, False, False, True], [None, None, None, 8], {}, 0),
            ([False, False, True, True], None, {"low": -0.01, "high": 0.01}, 0),
        ]:
            kinds.clear()
            options = {"reset_mask": np.array(mask), **options}
            got, _ = envs.reset(seed=seed, options=options)
            want, _ = ref.reset(seed=seed, options=options)
            assert_same(got, want)
            assert kinds == [kind], (mask, seed, options, kinds)
