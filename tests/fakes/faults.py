"""Gymnasium envs that are slow, fail, or return bad data, and the hostings the tests that use them run on."""

from __future__ import annotations

import gc
import os
import signal
import time

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from fakes.envs import ALPHANUMERIC


class SlowEnv(gym.Env):
    """Steps take ``delay`` seconds times (1 + env-specific jitter), so workers finish in varying orders; with
    ``info``, a step's info holds the env's step count (so answers carry it: through a worker's info table; with
    ``info="pickled"`` a string beside it, pickled into the answer's mailbox; with ``info="large"`` a 4 KiB string,
    pickled onto the pipe)."""

    def __init__(
        self, delay: float = 0.002, jitter: int = 0, reset_delay: float = 0.0, info: bool | str = False
    ) -> None:
        self.observation_space = spaces.Box(-1e9, 1e9, (2,), np.float64)
        self.action_space = spaces.Discrete(5)
        self.delay, self.jitter, self.reset_delay, self.t, self.info = delay, jitter, reset_delay, 0, info

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        time.sleep(self.reset_delay)
        self.t = 0
        return np.array([0.0, float(self.np_random.integers(100))]), {}

    def nap(self, seconds: float) -> int:
        time.sleep(seconds)
        return self.t

    def big(self, seconds: float, size: int) -> np.ndarray:
        """Naps, then returns ``size`` bytes (an answer larger than a pipe holds)."""
        time.sleep(seconds)
        return np.zeros(size, np.uint8)

    def step(self, action):
        self.t += 1
        time.sleep(self.delay * (1 + (self.t + self.jitter) % 3))
        info = {} if not self.info else {"t": self.t}
        if self.info in ("pickled", "large"):
            info["via"] = "mailbox" if self.info == "pickled" else "pipe" * 1024
        return np.array([float(self.t), float(action)]), float(action), self.t % 7 == 0, False, info


def assert_current(envs, obs, actions):
    """``obs`` are what each of ``envs`` (SlowEnvs) holds now: its step count and, for an env that stepped rather than
    reset, this step's action (a stale answer from an interrupted step, or another thread's, has another)."""
    t = np.array(envs.get_attr("t"), np.float64)
    np.testing.assert_array_equal(obs[:, 0], t)
    stepped = t > 0
    np.testing.assert_array_equal(obs[stepped, 1], actions[stepped])


HOSTINGS = {  # how a test's envs are hosted: by the calling process, by workers, or both
    "serial": dict(backend="serial"),
    "inline": dict(backend="multiprocessing", num_workers=2, inline=True),
    "workers": dict(backend="multiprocessing", num_workers=2, inline=False),
    "ray": dict(backend="ray", num_workers=2),
}


def made_in_worker(parent: int, collect: bool = False, delay: float = 0.0) -> SlowEnv:
    """A SlowEnv; made in a process other than ``parent`` (a worker), first a garbage collection (``collect``: it
    finalizes whatever garbage the worker can reach) and a ``delay``. (shoal.make also makes one in the parent, to
    see its spaces.)"""
    if os.getpid() != parent:
        if collect:
            gc.collect()
        time.sleep(delay)
    return SlowEnv(0.0)


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


class BadDataEnv(gym.Env):
    """Returns ``kind`` of bad data from ``step`` number ``at`` (0: from ``reset``) of episode ``episode`` (episodes
    are truncated after ``length`` steps), good data otherwise."""

    def __init__(self, kind: str = "obs_shape", at: int = 2, episode: int = 0, length: int = 1000) -> None:
        self.kind, self.at, self.episode, self.length, self.t, self.resets = kind, at, episode, length, 0, 0
        self.observation_space = spaces.Box(
            0, 255, (2 if kind == "reset_obs_only" else 4,), np.uint8 if "uint8" in kind else np.float32
        )
        if kind.startswith("dict"):
            self.observation_space = spaces.Dict(
                {"pos": spaces.Box(-1, 1, (2,), np.float32), "id": spaces.Discrete(3)}
            )
        if kind.startswith("loose"):  # a loose leaf (Text) in a dict of its own
            self.observation_space = spaces.Dict(
                {
                    "pos": spaces.Box(-1, 1, (2,), np.float32),
                    "note": spaces.Dict({"said": spaces.Text(8, charset=ALPHANUMERIC)}),
                }
            )
        self.action_space = spaces.Discrete(2)

    def _good(self):
        return self.observation_space.sample()

    def _results(self):
        obs, reward, terminated, truncated, info = self._good(), 1.0, False, self.t >= self.length, {}
        if self.t != self.at or self.resets - 1 != self.episode:
            return obs, reward, terminated, truncated, info
        kind = self.kind
        if kind == "obs_shape":
            obs = np.zeros(1, np.float32)
        elif kind == "obs_scalar":
            obs = 0.5
        elif kind == "obs_none":
            obs = None
        elif kind == "obs_float_for_uint8":
            obs = np.full(4, 0.5)
        elif kind == "obs_300_for_uint8":
            obs = np.full(4, 300, np.uint16)  # numpy would store 44
        elif kind == "obs_complex":
            obs = np.zeros(4, np.complex64)
        elif kind == "obs_row_of_one":
            obs = np.zeros((1, 4), np.float32)
        elif kind == "reward_none":
            reward = None
        elif kind == "reward_array":
            reward = np.ones(2)
        elif kind == "reward_str":
            reward = "1.5"  # numpy would store it as 1.5
        elif kind == "terminated_none":
            terminated = None
        elif kind == "truncated_two":
            truncated = 2  # an int, but not 0 or 1
        elif kind == "info_list":
            info = []
        elif kind == "info_unpicklable":
            info = {"lock": __import__("threading").Lock()}
        elif kind == "dict_missing_key":
            obs = {"pos": obs["pos"]}
        elif kind == "dict_leaf_shape":
            obs = {"pos": np.zeros(3, np.float32), "id": 1}
        elif kind == "dict_leaf_scalar":
            obs = {"pos": np.float32(0.5), "id": 1}
        elif kind == "dict_extra_key":
            obs = {**obs, "extra": 1}
        elif kind == "loose_missing":
            obs = {"pos": obs["pos"], "note": {}}
        elif kind == "loose_extra_key":
            obs = {"pos": obs["pos"], "note": {"said": "hi", "extra": 1}}
        elif kind == "loose_not_a_dict":
            obs = {"pos": obs["pos"], "note": "hi"}
        return obs, reward, terminated, truncated, info

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.observation_space.seed(seed)
        self.t = 0
        self.resets += 1
        obs = self._results()[0]
        if self.kind == "reset_obs_only" and self.at == 0 and self.resets - 1 == self.episode:
            return obs  # gym < 0.26's reset: the observation alone (of two values here, so it would unpack)
        return obs, {}

    def step(self, action):
        self.t += 1
        result = self._results()
        if self.t == self.at and self.resets - 1 == self.episode and self.kind.startswith("step_"):
            return {"step_four": result[:3] + result[4:], "step_none": None}[self.kind]
        return result
