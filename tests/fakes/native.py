"""Native PufferLib envs (``pufferlib.PufferEnv``: they step all their agents in one call, in buffers PufferLib gives
them). Only the PufferLib tests (tests/pufferlib_reference.py and test_pufferlib*.py) import this module: it
needs pufferlib-core."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pufferlib


class Walkers(pufferlib.PufferEnv):
    """A native PufferEnv: three agents on a line, stepped together, each reset by the env itself when it leaves
    [-3, 3] (terminal) or after a number of steps set by the creator's seed (truncated); its masks and teacher
    actions written by the env, infos (a list) when an agent's episode ends, and at a reset for odd creator seeds.
    ``box``: Box actions (the first of two values moves), else Discrete(4). Its reset writes every buffer, as
    PufferLib's Ocean envs do."""

    def __init__(self, buf=None, seed=0, box=False):
        self.single_observation_space = gym.spaces.Box(-9, 9, (3,), np.float32)
        self.single_action_space = gym.spaces.Box(-1, 1, (2,), np.float32) if box else gym.spaces.Discrete(4)
        self.num_agents, self.made_seed, self.box, self.drift = 3, seed, box, 0
        super().__init__(buf)

    def notify(self):  # (PufferLib's hook: here, every agent drifts one step right from now on, and starts there)
        self.drift = 1

    def reset(self, seed=None):
        self.rng = np.random.default_rng([self.made_seed, 99 if seed is None else seed])
        self.pos, self.t = self.rng.integers(-2, 3, 3) + self.drift, np.zeros(3, np.int64)
        self.rewards[:], self.terminals[:], self.truncations[:], self.masks[:], self.teacher_actions[:] = 0, 0, 0, 1, 1
        self._observe()
        info = {"reset": self.made_seed}  # (as a list or, as PufferLib's backends also take it, one dict)
        return self.observations, ([info] if self.made_seed % 4 == 3 else info) if self.made_seed % 2 else []

    def step(self, actions):
        self.actions[:] = actions  # (as Ocean's envs do, whose C code reads that buffer)
        actions = self.actions
        self.pos += (np.rint(2 * actions[:, 0]).astype(np.int64) if self.box else actions - 1) + self.drift
        self.t += 1
        self.rewards[:] = self.pos * 0.5
        self.terminals[:] = np.abs(self.pos) > 3
        self.truncations[:] = self.t >= 6 + self.made_seed % 5
        self.masks[:] = self.t % 4 != 1
        self.teacher_actions[:] = (self.pos < 0)[:, None] if self.box else 2 * (self.pos < 0)
        ended = self.terminals | self.truncations
        infos = [{"ended": int(ended.sum()), "seed": self.made_seed}] if ended.any() else []
        self.pos[ended], self.t[ended] = self.rng.integers(-2, 3, int(ended.sum())), 0
        self._observe()
        return self.observations, self.rewards, self.terminals, self.truncations, infos

    def _observe(self):
        self.observations[:] = np.stack([self.pos, self.t, np.full(3, self.made_seed)], axis=1)

    def close(self):
        pass


class NativeCounter(pufferlib.PufferEnv):
    """A native PufferEnv: two agents that count steps, reset by the env itself."""

    def __init__(self, buf=None, seed=0):
        self.single_observation_space = gym.spaces.Box(0, 100, (1,), np.float32)
        self.single_action_space = gym.spaces.Discrete(2)
        self.num_agents = 2
        super().__init__(buf)

    def reset(self, seed=None):
        self.observations[:] = 0
        return self.observations, []

    def step(self, actions):
        self.observations[:] += 1
        return self.observations, self.rewards, self.terminals, self.truncations, []

    def close(self):
        pass
