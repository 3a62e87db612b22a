"""Test envs, in one place. Importable by spawned workers (tests/ is on sys.path, which spawn passes on)."""

from __future__ import annotations

import copy
import os
import signal
import time

import gymnasium as gym
import numpy as np
from gymnasium import spaces

SPACES = {
    "box_f32": spaces.Box(-1.0, 1.0, (3,), np.float32),
    "box_f64_2d": spaces.Box(-5.0, 5.0, (2, 3), np.float64),
    "box_u8_img": spaces.Box(0, 255, (6, 5, 3), np.uint8),
    "box_i16": spaces.Box(-100, 100, (4,), np.int16),
    "discrete": spaces.Discrete(7, start=-2),
    "multidiscrete": spaces.MultiDiscrete([3, 5, 2]),
    "multibinary": spaces.MultiBinary(6),
    "dict": spaces.Dict({"pos": spaces.Box(-1, 1, (2,), np.float32), "id": spaces.Discrete(4)}),
    "tuple": spaces.Tuple((spaces.Discrete(3), spaces.Box(0, 1, (2, 2), np.float32))),
    "nested": spaces.Dict(
        {
            "a": spaces.Tuple((spaces.MultiBinary(3), spaces.Dict({"b": spaces.Box(0, 9, (2,), np.int32)}))),
            "c": spaces.MultiDiscrete([[2, 3], [4, 5]]),
        }
    ),
}


def _flat_sum(space: spaces.Space, value) -> float:
    return float(sum(np.sum(np.asarray(v, dtype=np.float64)) for v in _leaves(space, value)))


def _leaves(space, value):
    if isinstance(space, spaces.Dict):
        return [leaf for k, sub in space.spaces.items() for leaf in _leaves(sub, value[k])]
    if isinstance(space, spaces.Tuple):
        return [leaf for sub, v in zip(space.spaces, value) for leaf in _leaves(sub, v)]
    return [value]


class SpaceEnv(gym.Env):
    """Random observations from ``obs`` (seeded by reset), reward from the action, random episode ends, infos."""

    metadata = {"render_modes": []}

    def __init__(self, obs: str = "box_f32", act: str = "discrete", max_steps: int = 12) -> None:
        self.observation_space = copy.deepcopy(SPACES[obs])  # own RNG: envs must not share sampling state
        self.action_space = copy.deepcopy(SPACES[act])
        self.max_steps = max_steps
        self.t = 0
        self.tag = "initial"

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.observation_space.seed(int(self.np_random.integers(2**31)))
        self.t = 0
        info = {"reset_t": self.t, "seeded": seed is not None}
        if options and "note" in options:
            info["note"] = options["note"]
        return self.observation_space.sample(), info

    def step(self, action):
        assert self.action_space.contains(action), (action, self.action_space)
        self.t += 1
        reward = _flat_sum(self.action_space, action) + self.t * 0.5
        terminated = bool(self.np_random.random() < 0.12)
        truncated = self.t >= self.max_steps
        info = {}
        if self.t % 3 == 0:
            info = {"t": self.t, "vec": np.full(2, self.t, np.float32), "nested": {"half": self.t / 2}}
        return self.observation_space.sample(), reward, terminated, truncated, info

    def scaled(self, factor):
        return self.t * factor


class CountingEnv(gym.Env):
    """obs = reward = the step count; the episode terminates after ``length`` steps."""

    def __init__(self, length: int = 3) -> None:
        self.observation_space = spaces.Box(0, 1000, (), np.int64)
        self.action_space = spaces.Discrete(2)
        self.length = length
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.array(self.t), {}

    def step(self, action):
        self.t += 1
        return np.array(self.t), float(self.t), self.t >= self.length, False, {}


class SlowEnv(gym.Env):
    """Steps take ``delay`` seconds times (1 + env-specific jitter), so workers finish in varying orders."""

    def __init__(self, delay: float = 0.002, jitter: int = 0) -> None:
        self.observation_space = spaces.Box(-1e9, 1e9, (2,), np.float64)
        self.action_space = spaces.Discrete(5)
        self.delay, self.jitter, self.t = delay, jitter, 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.array([0.0, float(self.np_random.integers(100))]), {}

    def step(self, action):
        self.t += 1
        time.sleep(self.delay * (1 + (self.t + self.jitter) % 3))
        return np.array([float(self.t), float(action)]), float(action), self.t % 7 == 0, False, {}


class FaultyEnv(gym.Env):
    """Raises ValueError, or kills its own process, at step ``at``."""

    def __init__(self, at: int = 3, how: str = "raise") -> None:
        self.observation_space = spaces.Box(-1, 1, (2,), np.float32)
        self.action_space = spaces.Discrete(2)
        self.at, self.how, self.t = at, how, 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(2, np.float32), {}

    def step(self, action):
        self.t += 1
        if self.t == self.at:
            if self.how == "raise":
                raise ValueError("the env broke on purpose")
            if self.how == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
        return np.zeros(2, np.float32), 0.0, False, False, {}
