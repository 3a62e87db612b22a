"""Gymnasium envs whose results come as values of every type an env may return: what the engine's fast write
(shoal.vector._rows) stores as numpy's writes store it, and what it leaves to the full checks."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from gymnasium import spaces

FLOAT_OBS = [
    np.array([1.5, -0.0, np.nan, np.inf], np.float32),
    np.array([1 / 3, -1e-40, 0.1, -np.inf]),  # float64 into float32: rounded, a subnormal, as numpy casts them
    [0.25, 0.5, 0.75, 1.0],  # a list of Python floats
    [0.5, np.float32(0.1), 1, True],  # a list with a bool (the slow path)
    np.arange(8, dtype=np.float32)[::2],  # not contiguous: numpy's own copy
    (0.5, -1.0, 2, np.float32(0.1)),  # a tuple, read as numpy reads a list
    np.array([1, 2**60 + 2**36 + 1, -3, 2**24 + 1]),  # int64: rounded into float32 as numpy casts them
    np.arange(4, dtype=np.float32).astype(">f4"),  # big-endian (the slow path)
]
REWARDS = [1.5, -2, True, np.float64(0.125), np.float32(0.3), np.int64(7), np.bool_(True), 10**20, np.float16(0.5),
           np.array(0.25), np.array(3, np.int32)]  # (0-d arrays: np.where of scalars returns one)
FLAGS = [False, np.bool_(False), 0, np.int64(0), np.array(False)]  # none of them ends an episode


class Varied(gym.Env):
    """Each step's results of another kind: observations as float32 and float64 arrays, lists, strided and
    big-endian arrays; rewards of every real type; flags as Python and numpy bools and ints 0 and 1."""

    observation_space = spaces.Box(-np.inf, np.inf, (4,), np.float32)
    action_space = spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = int(self.np_random.integers(10))
        return FLOAT_OBS[0], {}

    def step(self, action):
        self.t += 1
        t = self.t
        ended = t % 7 == 0
        terminated = (True if t % 2 else np.bool_(True)) if ended else FLAGS[t % len(FLAGS)]
        truncated = (1 if t % 3 else np.bool_(True)) if t % 11 == 0 else FLAGS[(t // 2) % len(FLAGS)]
        obs = FLOAT_OBS[t % len(FLOAT_OBS)]
        return obs, REWARDS[t % len(REWARDS)], terminated, truncated, {}


DICT_SPACE = spaces.Dict(
    {
        "id": spaces.Discrete(5),
        "pos": spaces.Box(-1, 1, (2,), np.float32),
        "pair": spaces.Tuple((spaces.Discrete(3), spaces.Box(0, 255, (3, 2), np.uint8))),
        "level": spaces.Box(-10, 10, (), np.float64),
    }
)


class VariedDict(gym.Env):
    """A Dict observation (a Tuple inside) whose scalar leaves come as Python ints and floats, numpy scalars and 0-d
    arrays, its tuple as a tuple or a list, its arrays as float64 for float32 and its frame strided (a transpose) or
    as a list of its rows at times; ``exact``: only values the fast path takes (no int32 for the Discrete, no float32
    for the float64 leaf, no list for the tuple, no strided rows in the frame's list)."""

    observation_space = DICT_SPACE
    action_space = spaces.Discrete(2)

    def __init__(self, exact: bool = False) -> None:
        self.exact = exact

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = int(self.np_random.integers(10))
        return self._obs(), {}

    def _obs(self):
        t = self.t
        ids = [t % 5, np.int64(t % 5), np.array(t % 5), np.int32(t % 5)]
        level = [t * 0.5, np.float64(t * 0.5), np.float32(t * 0.5), t]
        pos = np.full(2, t / 10 % 1, np.float32 if t % 2 else np.float64)
        frame = ((np.arange(6).reshape(2, 3) + t) % 256).astype(np.uint8).T  # a strided field, at times
        frame = np.ascontiguousarray(frame) if t % 2 else frame
        if t % 5 == 1:  # a list of its rows (arrays of the leaf's dtype; strided ones take the slow path), at times
            frame = list(np.ascontiguousarray(frame) if self.exact else frame)
        pair = (t % 3, frame) if t % 3 or self.exact else [t % 3, frame]
        kinds = 2 if self.exact else 4
        return {"id": ids[t % 3 if self.exact else t % 4], "pos": pos, "pair": pair, "level": level[(t // 4) % kinds]}

    def step(self, action):
        self.t += 1
        return self._obs(), float(action), False, self.t % 9 == 0, {}


class Said(VariedDict):
    """A Dict observation with a loose leaf (Text) in a Dict of its own, beside fixed-size ones: what it says changes
    every step; ``exact``: its position is always a float32 array (else at times a list: the slow path)."""

    observation_space = spaces.Dict(
        {"pos": spaces.Box(-1, 1, (2,), np.float32), "note": spaces.Dict({"said": spaces.Text(8)}),
         "id": spaces.Discrete(3)}
    )

    def _obs(self):
        t = self.t
        pos = [t / 20 % 1, -0.5] if t % 3 == 0 and not self.exact else np.array([t / 20 % 1, -0.5], np.float32)
        return {"pos": pos, "note": {"said": f"t{t}"}, "id": t % 3}


class TextOnly(gym.Env):
    """An observation that is all one loose leaf (Text): nothing of it goes into the shared records."""

    observation_space = spaces.Text(8)
    action_space = spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = int(self.np_random.integers(10))
        return f"r{self.t}", {}

    def step(self, action):
        self.t += 1
        return f"s{self.t}a{action}", 1.0, self.t % 5 == 0, False, {}
