"""The benchmark workloads besides CartPole: a CPU-heavy image env and a cheap Dict-observation env."""

from __future__ import annotations

import time

import gymnasium as gym
import numpy as np
from gymnasium import spaces


class BurnEnv(gym.Env):
    """Burns ``burn_us`` of CPU per step and returns an 84x84x4 uint8 frame stack."""

    def __init__(self, burn_us: float = 200.0) -> None:
        self.observation_space = spaces.Box(0, 255, (84, 84, 4), np.uint8)
        self.action_space = spaces.Discrete(4)
        self.burn = burn_us / 1e6
        self.frame = np.zeros((84, 84, 4), np.uint8)
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self.frame, {}

    def step(self, action):
        end = time.perf_counter() + self.burn
        while time.perf_counter() < end:
            pass
        self.t += 1
        self.frame[..., self.t % 4] = self.t % 256
        return self.frame, 1.0, False, self.t >= 500, {}


class DictObsEnv(gym.Env):
    """A cheap env with a Dict observation of four leaves of three dtypes."""

    def __init__(self) -> None:
        self.observation_space = spaces.Dict(
            {
                "position": spaces.Box(-1, 1, (3,), np.float32),
                "velocity": spaces.Box(-1, 1, (2,), np.float32),
                "grid": spaces.Box(0, 255, (11, 11), np.uint8),
                "flag": spaces.Discrete(2),
            }
        )
        self.action_space = spaces.Discrete(4)
        self.t = 0
        self.obs = {
            "position": np.zeros(3, np.float32),
            "velocity": np.zeros(2, np.float32),
            "grid": np.zeros((11, 11), np.uint8),
            "flag": 0,
        }

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self.obs, {}

    def step(self, action):
        self.t += 1
        self.obs["position"][0] = self.t
        return self.obs, 0.1, False, self.t >= 200, {}


def cartpole():
    return gym.make("CartPole-v1")


WORKLOADS = {"cartpole": cartpole, "burn200us": BurnEnv, "dict": DictObsEnv}


# -- a cheap many-agent env and its single-agent twin (benchmarks/bench_multiagent.py) ----------------------------

from pettingzoo import ParallelEnv  # noqa: E402

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
