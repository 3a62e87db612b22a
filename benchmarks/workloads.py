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

