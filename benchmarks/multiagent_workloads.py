"""The multi-agent benchmark's cheap many-agent env and its single-agent twin (benchmarks/bench_multiagent.py)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv

_MOVES = np.array([[0, 0], [0, 0.05], [0, -0.05], [-0.05, 0], [0.05, 0]], np.float32)
_CROWD_OBS = spaces.Box(-2, 2, (4,), np.float32)


class Crowd(ParallelEnv):
    """``n`` agents walking to their goals on a plane (numpy over all agents at once): observation ``[x, y, goal x,
    goal y]``, actions stay/up/down/left/right, reward minus the distance to the goal, 100 steps per episode."""

    metadata = {"name": "crowd_v0"}
    render_mode = None

    def __init__(self, n: int = 16) -> None:
        self.possible_agents = [f"walker_{k}" for k in range(n)]
        self.agents: list[str] = []
        self.rng = np.random.default_rng()

    def observation_space(self, agent):
        return _CROWD_OBS

    def action_space(self, agent):
        return spaces.Discrete(5)

    def _obs(self):
        state = np.concatenate([self.pos, self.goal], axis=1)
        return dict(zip(self.agents, state))

    def reset(self, seed=None, options=None):
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        n = len(self.possible_agents)
        self.pos = self.rng.uniform(-1, 1, (n, 2)).astype(np.float32)
        self.goal = self.rng.uniform(-1, 1, (n, 2)).astype(np.float32)
        self.t = 0
        self.agents = list(self.possible_agents)
        return self._obs(), {a: {} for a in self.agents}

    def step(self, actions):
        self.t += 1
        moves = np.fromiter((actions[a] for a in self.agents), np.int64, len(self.agents))
        np.clip(self.pos + _MOVES[moves], -1, 1, out=self.pos)
        dist = np.sqrt(((self.pos - self.goal) ** 2).sum(axis=1))
        over = self.t >= 100
        obs = self._obs()
        rewards = dict(zip(self.agents, (-dist).tolist()))
        terms = dict.fromkeys(self.agents, False)
        truncs = dict.fromkeys(self.agents, over)
        infos = {a: {} for a in self.agents}
        if over:
            self.agents = []
        return obs, rewards, terms, truncs, infos


class CrowdSingle(gym.Env):
    """One agent of :class:`Crowd`, as a Gymnasium env (the same numpy work for one walker)."""

    observation_space = _CROWD_OBS
    action_space = spaces.Discrete(5)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.pos = self.np_random.uniform(-1, 1, (1, 2)).astype(np.float32)
        self.goal = self.np_random.uniform(-1, 1, (1, 2)).astype(np.float32)
        self.t = 0
        return np.concatenate([self.pos, self.goal], axis=1)[0], {}

    def step(self, action):
        self.t += 1
        np.clip(self.pos + _MOVES[action], -1, 1, out=self.pos)
        dist = float(np.sqrt(((self.pos - self.goal) ** 2).sum()))
        return np.concatenate([self.pos, self.goal], axis=1)[0], -dist, False, self.t >= 100, {}


def spread():
    """MPE's simple_spread (3 agents; the ``mpe2`` package)."""
    from mpe2 import simple_spread_v3

    return simple_spread_v3.parallel_env()
