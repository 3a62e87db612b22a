"""Gymnasium envs whose outputs the tests compare: every space, loose spaces, rewards and flags of other types, large
and scalar infos."""

from __future__ import annotations

import copy
import string

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


class AsReturned(gym.Env):
    """Episodes of ``length`` steps whose observations are of a type the space holds without being its own:
    ``kind`` "int" (a Python int in a Discrete space), "f32" (a float32 array in a float64 Box), or "own" (the
    Box's own dtype). ``tag`` (0-9) sets envs of the same length apart: it is in every observation."""

    def __init__(self, kind: str, length: int, tag: int = 0) -> None:
        self.kind, self.length, self.tag = kind, length, tag
        self.observation_space = (spaces.Discrete(10_000) if kind == "int"
                                  else spaces.Box(-1e3, 1e3, (2,), np.float64))
        self.action_space = spaces.Discrete(2)
        self.t = self.episode = 0

    def _obs(self):
        if self.kind == "int":
            return 1000 * self.tag + 10 * self.episode + self.t
        return np.array([self.episode + 100 * self.tag, self.t], np.float32 if self.kind == "f32" else np.float64)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t, self.episode = 0, self.episode + 1
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        return self._obs(), float(action), self.t >= self.length, False, {}


class Stacked(gym.Env):
    """Frame stacks as an Atari env returns them: ``(4, 16, 16)`` uint8, each step the stack shifted by a frame and a
    new random one on top (its first pixel the action); a reset stacks four new frames. Episodes end at a length
    drawn at each reset (3 to 11 steps)."""

    observation_space = spaces.Box(0, 255, (4, 16, 16), np.uint8)
    action_space = spaces.Discrete(3)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t, self.length = 0, int(self.np_random.integers(3, 12))
        self.stack = self.np_random.integers(0, 256, (4, 16, 16), dtype=np.uint8)
        return self.stack.copy(), {}

    def step(self, action):
        self.t += 1
        frame = self.np_random.integers(0, 256, (1, 16, 16), dtype=np.uint8)
        frame[0, 0, 0] = action
        self.stack = np.concatenate([self.stack[1:], frame])
        return self.stack.copy(), float(action), self.t >= self.length, False, {}


class KeepsItsOutputs(gym.Env):
    """Returns the observation and the info dict it keeps, changed in place by every step and reset (as an env
    that reuses its buffers does): at step ``t`` the observation's values are ``t`` and the info is
    ``{"phase": "step", "t": t, "inner": {"t": t}, "trace": array([t, t])}``; a reset writes -1 and ``"reset"``.
    Episodes end at step ``length``. ``kind`` "array" (a Box) or "dict" (a Dict of a Box)."""

    def __init__(self, kind: str = "array", length: int = 3) -> None:
        box = spaces.Box(-10, 10, (2,), np.float32)
        self.observation_space = box if kind == "array" else spaces.Dict({"x": box})
        self.action_space = spaces.Discrete(2)
        self.kind, self.length, self.t = kind, length, 0
        self.values = np.zeros(2, np.float32)
        self.obs = self.values if kind == "array" else {"x": self.values}
        self.info: dict = {"inner": {}, "trace": np.zeros(2, np.int64)}

    def _set(self, phase: str, t: int):
        self.values[:] = t
        self.info["phase"], self.info["t"], self.info["inner"]["t"] = phase, t, t
        self.info["trace"][:] = t
        return self.obs, self.info

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._set("reset", -1)

    def step(self, action):
        self.t += 1
        obs, info = self._set("step", self.t)
        return obs, 1.0, self.t >= self.length, False, info


class BoolReward(gym.Env):
    """Rewards that are bools (Python's on even steps, numpy's on odd ones): whether the action was 1."""

    observation_space = spaces.Box(0, 100, (1,), np.float32)
    action_space = spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(1, np.float32), {}

    def step(self, action):
        self.t += 1
        hit = int(action) == 1
        return np.full(1, self.t, np.float32), hit if self.t % 2 == 0 else np.bool_(hit), False, self.t >= 5, {}


class IntFlags(BoolReward):
    """Ends its episodes with int flags, as some older envs do: ``terminated`` a Python int 0 or 1 (every 5th step,
    with action 1), ``truncated`` a numpy int64 0 or 1 (every 7th step of an episode); the reward 1.0."""

    def step(self, action):
        self.t += 1
        terminated = int(self.t % 5 == 0 and action == 1)
        return np.full(1, self.t, np.float32), 1.0, terminated, np.int64(self.t % 7 == 0), {}


class Words(gym.Space):
    """A custom space (like MiniGrid's MissionSpace): sentences of a few words; no fixed size, not a Gymnasium type."""

    WORDS = ("go", "to", "the", "red", "blue", "ball", "key", "door")

    def __init__(self, seed=None):
        super().__init__(None, None, seed)

    def sample(self, mask=None, probability=None):
        count = int(self.np_random.integers(1, 5))
        return " ".join(self.WORDS[int(i)] for i in self.np_random.integers(0, len(self.WORDS), count))

    def contains(self, x):
        return isinstance(x, str) and all(w in self.WORDS for w in x.split())

    def __eq__(self, other):
        return isinstance(other, Words)


# Text's default characters in the order newer Gymnasium releases (1.4 here) draw from, sorted: Gymnasium 1.1's Text
# drew from the iteration order of a frozenset, which follows the process's string hashing, so a worker started by
# spawn or forkserver drew other strings from the same seed than the parent did (Gymnasium's behaviour, not shoal's)
ALPHANUMERIC = "".join(sorted(string.ascii_letters + string.digits))

LOOSE_SPACES = {
    "text": spaces.Text(8, charset=ALPHANUMERIC),
    "graph": spaces.Graph(node_space=spaces.Box(-1, 1, (3,), np.float32), edge_space=spaces.Discrete(4)),
    "sequence": spaces.Sequence(spaces.Box(0, 1, (2,), np.float32)),
    "sequence_stacked": spaces.Sequence(spaces.Discrete(5), stack=True),
    "oneof": spaces.OneOf((spaces.Discrete(3), spaces.Box(0, 1, (2,), np.float32))),
    "custom": Words(),
    "dict_text_box": spaces.Dict(
        {
            "mission": spaces.Text(10, charset=ALPHANUMERIC),
            "image": spaces.Box(0, 255, (3, 3), np.uint8),
            "dir": spaces.Discrete(4),
        }
    ),
    "tuple_graph": spaces.Tuple(
        (spaces.Graph(node_space=spaces.Discrete(3), edge_space=None), spaces.Box(-2, 2, (2,), np.float32))
    ),
}


class LooseSpaceEnv(gym.Env):
    """Like :class:`SpaceEnv` over :data:`LOOSE_SPACES` (spaces without a fixed size): seeded random observations,
    a reward that depends on the action's text, random episode ends."""

    def __init__(self, obs: str = "text", act: str = "text", max_steps: int = 9, end_p: float = 0.15) -> None:
        self.observation_space = copy.deepcopy(LOOSE_SPACES[obs] if obs in LOOSE_SPACES else SPACES[obs])
        self.action_space = copy.deepcopy(LOOSE_SPACES[act] if act in LOOSE_SPACES else SPACES[act])
        self.max_steps, self.end_p, self.t = max_steps, end_p, 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.observation_space.seed(int(self.np_random.integers(2**31)))
        self.t = 0
        return self.observation_space.sample(), {"start": True}

    def step(self, action):
        assert self.action_space.contains(action), (action, self.action_space)
        self.t += 1
        reward = float(len(repr(action)) % 7) + self.t * 0.25
        terminated = bool(self.np_random.random() < self.end_p)
        info = {"t": self.t} if self.t % 2 else {}
        return self.observation_space.sample(), reward, terminated, self.t >= self.max_steps, info

    def big(self, megabytes: float) -> np.ndarray:
        """A large call result (the pipe holds ~64 KB)."""
        return np.full(int(megabytes * 2**20), self.t % 251, np.uint8)


class BigInfoEnv(gym.Env):
    """Every step's info carries ``megabytes`` of data (far more than a pipe holds); reset echoes its options' blob."""

    def __init__(self, megabytes: float = 1.0) -> None:
        self.observation_space = spaces.Box(-1e9, 1e9, (2,), np.float64)
        self.action_space = spaces.Discrete(3)
        self.size, self.t = int(megabytes * 2**20) // 8, 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        blob = (options or {}).get("blob")
        return np.zeros(2), ({} if blob is None else {"echo": float(blob.sum())})

    def step(self, action):
        self.t += 1
        return np.array([float(self.t), float(action)]), 1.0, False, False, {"blob": np.full(self.size, float(self.t))}


class ScalarInfos(gym.Env):
    """Each step's info holds one value of each kind of numpy scalar (a longdouble, a string and a date too, and some
    inside a tuple and a list), all changing with the step: what crosses from a worker must come back with its type
    and value."""

    def __init__(self, offset: int = 0) -> None:
        self.observation_space = spaces.Box(-1e9, 1e9, (1,), np.float32)
        self.action_space = spaces.Discrete(2)
        self.offset, self.t = offset, 0

    def _info(self):
        t = self.t + self.offset
        return {
            "f64": np.float64(t / 3), "f32": np.float32(t / 7), "f16": np.float16(t / 11), "c64": np.complex64(t - 1j),
            "c128": np.complex128(t / 3 + 2j), "bool": np.bool_(t % 2), "i8": np.int8(-t), "i16": np.int16(300 * t),
            "i32": np.int32(-70000 * t), "i64": np.int64(2**40 * t), "u8": np.uint8(t % 256), "u16": np.uint16(t),
            "u32": np.uint32(2**31 + t), "u64": np.uint64(2**64 - 1 - t), "zero": np.float64(-0.0),
            "nested": (np.float16(t / 5), np.float32(t), [np.uint64(t)]), "long": np.longdouble(t) / 3,
            "str": np.str_(f"s{t}"), "date": np.datetime64(t, "D"),
        }

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(1, np.float32), self._info()

    def step(self, action):
        self.t += 1
        return np.full(1, self.t, np.float32), 0.5, False, self.t % 6 == 0, self._info()


class BigArraysEnv(gym.Env):
    """Observations and actions of ``megabytes`` each (uint8); an observation says its step and echoes the first and
    last byte of the action it got."""

    def __init__(self, megabytes: float = 4.0) -> None:
        size = int(megabytes * 2**20)
        self.observation_space = spaces.Box(0, 255, (size,), np.uint8)
        self.action_space = spaces.Box(0, 255, (size,), np.uint8)
        self.obs, self.t = np.zeros(size, np.uint8), 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        self.obs[:3] = 0
        return self.obs, {}

    def step(self, action):
        self.t += 1
        self.obs[:3] = self.t % 256, action[0], action[-1]
        return self.obs, 1.0, False, False, {}


class NumericInfos(gym.Env):
    """Each step's info holds numbers of every scalar type that makes a typed array in Gymnasium's vector infos,
    extremes among them (what a worker sends through its info table). With ``vary``, some steps differ: every fifth
    step one key's value is a float instead of an int, the info is empty where step + ``offset`` is 3 modulo 7, the
    reset info has keys of its own, and episodes are truncated after ``9 + offset % 4`` steps."""

    def __init__(self, offset: int = 0, vary: bool = True) -> None:
        self.observation_space = spaces.Box(-1e9, 1e9, (1,), np.float32)
        self.action_space = spaces.Discrete(2)
        self.offset, self.vary, self.t = offset, vary, 0

    def info_at(self, t: int) -> dict:
        k = t + self.offset
        if self.vary and k % 7 == 3:
            return {}
        return {
            "f64": np.float64(k / 3), "f32": np.float32(-k / 7), "f16": np.float16(k / 11),
            "float": float("nan") if k % 4 == 1 else -0.0 if k % 4 == 2 else k / 9,
            "int": (k / 2 if self.vary and t % 5 == 4 else -(2**63) + k), "bool": bool(k % 2),
            "i8": np.int8(-128 + k % 8), "i16": np.int16(300 * k), "i32": np.int32(-70000 * k),
            "i64": np.int64(2**63 - 1 - k), "u8": np.uint8(255 - k % 8), "u16": np.uint16(k),
            "u32": np.uint32(2**31 + k), "u64": np.uint64(2**64 - 1 - k),
            "inf": np.float32(-np.inf if k % 2 else np.inf),
        }

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(1, np.float32), ({"start": np.int64(self.offset)} if self.vary else self.info_at(0))

    def step(self, action):
        self.t += 1
        truncated = self.vary and self.t % (9 + self.offset % 4) == 0
        return np.full(1, self.t, np.float32), 0.5, False, truncated, self.info_at(self.t)
