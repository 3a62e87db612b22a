"""Batch-native envs (shoal.batch.BatchEnv) and the Gymnasium env one of them equals."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from shoal.batch import BatchEnv, Streams

WALK_OBS = spaces.Box(-10, 10, (2,), np.float32)


class Walk(BatchEnv):
    """A walk on a line from a random start in [-2, 2]: actions 0/1/2 move -1/0/+1; terminates at |x| >= 3 (reward
    +1 on the right, -1 on the left), truncates after ``limit`` steps; an info at each episode's end."""

    single_observation_space = WALK_OBS
    single_action_space = spaces.Discrete(3)

    def __init__(self, num_envs, limit=6):
        super().__init__(num_envs)
        self.limit = limit
        self.rng = Streams(num_envs)
        self.x = np.zeros(num_envs, np.int64)
        self.t = np.zeros(num_envs, np.int64)
        self._ended = None

    def reset(self, ids, seeds, out):
        self.rng.seed(ids, seeds)
        self.x[ids] = self.rng.integers(ids, 5) - 2
        self.t[ids] = 0
        out.obs[:] = np.stack([self.x[ids], self.t[ids]], axis=1)
        self._ended = None

    def step(self, ids, actions, out):
        x = self.x[ids] + np.asarray(actions) - 1
        t = self.t[ids] + 1
        self.x[ids], self.t[ids] = x, t
        out.terminations[:] = np.abs(x) >= 3
        out.truncations[:] = ~out.terminations & (t >= self.limit)
        out.rewards[:] = np.sign(x) * out.terminations
        out.obs[:] = np.stack([x, t], axis=1)
        self._ended = np.flatnonzero(out.terminations | out.truncations), x

    def infos(self, ids):
        if self._ended is None or not len(self._ended[0]):
            return None
        rows, x = self._ended
        return {int(j): {"final_x": int(x[j])} for j in rows}


class WalkSingle(gym.Env):
    """Walk, one instance at a time, written apart."""

    observation_space = WALK_OBS
    action_space = spaces.Discrete(3)

    def __init__(self, limit=6):
        self.limit = limit
        self.rng = Streams(1)

    def reset(self, *, seed=None, options=None):
        self.rng.seed(np.zeros(1, np.int64), [seed])
        self.x, self.t = int(self.rng.integers(np.zeros(1, np.int64), 5)[0]) - 2, 0
        return np.array([self.x, self.t], np.float32), {}

    def step(self, action):
        self.x += int(action) - 1
        self.t += 1
        term = abs(self.x) >= 3
        trunc = not term and self.t >= self.limit
        info = {"final_x": self.x} if term or trunc else {}
        return np.array([self.x, self.t], np.float32), float(np.sign(self.x)) * term, term, trunc, info


class BadBatch(BatchEnv):
    """Writes an observation outside its space (``kind="obs"``), a NaN reward (``"reward"``) or raises (``"raise"``)
    for instance 1 at its first step, or shifts the ``ids`` it was given in place (``"ids"``)."""

    single_observation_space = spaces.Box(0, 1, (2,), np.float32)
    single_action_space = spaces.Discrete(2)

    def __init__(self, num_envs, kind="obs"):
        super().__init__(num_envs)
        self.kind = kind

    def reset(self, ids, seeds, out):
        out.obs[:] = 0.5

    def step(self, ids, actions, out):
        out.obs[:] = 0.5
        if self.kind == "ids":
            ids += 1
        bad = np.flatnonzero(ids == 1)
        if self.kind == "obs":
            out.obs[bad] = 7.0
        elif self.kind == "reward":
            out.rewards[bad] = np.nan
        elif len(bad):
            raise ValueError("instance 1 broke")
