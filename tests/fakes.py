"""Test envs, in one place. Importable by spawned workers (tests/ is on sys.path, which spawn passes on)."""

from __future__ import annotations

import copy
import gc
import os
import signal
import string
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


# -- batch-native envs ---------------------------------------------------------------------------------------------

from shoal.batch import BatchEnv, Streams  # noqa: E402

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


# -- multi-agent (PettingZoo) envs ----------------------------------------------------------------------------------

from pettingzoo import ParallelEnv  # noqa: E402
from pettingzoo.utils import BaseWrapper  # noqa: E402

JOIN_LEAVE_OBS = spaces.Box(-(10**6), 10**6, (3,), np.int64)
JOIN_LEAVE_SCRIPT = {  # step -> (agents leaving at that step: (agent, "term" | "trunc"), agents joining after it)
    2: ([("b", "term")], []),
    3: ([], ["c"]),
    5: ([("a", "term")], []),
    6: ([("c", "trunc")], []),
}


class JoinLeave(ParallelEnv):
    """A scripted variable population. Agents ``a`` and ``b`` start; ``b`` terminates at step 2; ``c`` joins after
    step 2 (its first observation, reward 0, comes with step 3); ``a`` terminates at step 5; ``c`` truncates at step
    6, which ends the episode. An agent's observation is ``[base + t, agent number, its last action]`` (``base``: the
    reset seed, or the last base + 1000 without one); its reward ``10 * t + action``; its info ``{"t": t}``
    (``{"hello": number}`` at reset). ``fail_at``: the step that raises ``ValueError``."""

    metadata = {"name": "join_leave_v0"}
    possible_agents = ["a", "b", "c"]
    render_mode = None

    def __init__(self, fail_at=None):
        self.fail_at = fail_at
        self.base = 0
        self.agents = []

    def observation_space(self, agent):
        return JOIN_LEAVE_OBS

    def action_space(self, agent):
        return spaces.Discrete(4)

    def _obs(self, agent, action=0):
        return np.array([self.base + self.t, "abc".index(agent), action], np.int64)

    def reset(self, seed=None, options=None):
        self.base = seed if seed is not None else self.base + 1000
        self.t = 0
        self.agents = ["a", "b"]
        return {a: self._obs(a) for a in self.agents}, {a: {"hello": "abc".index(a)} for a in self.agents}

    def step(self, actions):
        self.t += 1
        if self.t == self.fail_at:
            raise ValueError(f"scripted failure at step {self.t}")
        leaving, joining = JOIN_LEAVE_SCRIPT.get(self.t, ([], []))
        obs = {a: self._obs(a, int(actions[a])) for a in self.agents}
        rewards = {a: float(10 * self.t + int(actions[a])) for a in self.agents}
        terms = {a: False for a in self.agents}
        truncs = {a: False for a in self.agents}
        infos = {a: {"t": self.t} for a in self.agents}
        for agent, how in leaving:
            (terms if how == "term" else truncs)[agent] = True
        self.agents = [a for a in self.agents if not (terms[a] or truncs[a])] + joining
        for agent in joining:  # a joining agent's first observation comes with this step, reward 0
            obs[agent], rewards[agent], infos[agent] = self._obs(agent), 0.0, {"t": self.t}
            terms[agent] = truncs[agent] = False
        return obs, rewards, terms, truncs, infos


class DictJoinLeave(JoinLeave):
    """:class:`JoinLeave` with Dict observations: ``{"obs": its observation, "pair": (agent number, action % 2)}``
    (Python ints for the Discrete leaves)."""

    def observation_space(self, agent):
        return spaces.Dict({"obs": JOIN_LEAVE_OBS, "pair": spaces.Tuple((spaces.Discrete(3), spaces.Discrete(2)))})

    def _obs(self, agent, action=0):
        return {"obs": super()._obs(agent, action), "pair": ("abc".index(agent), action % 2)}


class MoveRaises(BaseWrapper):
    """An AEC env whose ``agent``'s step raises ``ValueError`` on action ``action``."""

    def __init__(self, env, agent, action):
        super().__init__(env)
        self.bad = (agent, action)

    def step(self, action):
        if (self.agent_selection, action) == self.bad:
            raise ValueError(f"illegal move {action}")
        super().step(action)


def rps_raising():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # PettingZoo deprecates importing an env module
        from pettingzoo.classic import rps_v2

    return MoveRaises(rps_v2.env(), "player_1", 2)


class LiesAboutObs(ParallelEnv):
    """Agent ``y``'s results are bad at step ``bad_at`` (0: at reset), of kind ``what``: ``shape`` (an observation of
    shape (3,)), ``none`` (None as its observation), ``complex``, ``info`` (its info 5), ``unknown`` (an observation
    of an agent ``z`` too), ``reward`` (a str), ``flag`` (terminated 2), ``missing`` (no reward entry), ``list``
    (rewards as a list), ``four`` (four results, no truncations); or ``far``, a
    float64 past float32's range (not bad: numpy stores inf and warns)."""

    metadata = {"name": "lies_v0"}
    possible_agents = ["x", "y"]

    def __init__(self, bad_at=1, what="shape"):
        self.bad_at, self.what = bad_at, what

    def observation_space(self, agent):
        return spaces.Box(0, 1, (2,), np.float32)

    def action_space(self, agent):
        return spaces.Discrete(2)

    def _results(self):
        obs = {a: np.zeros(2, np.float32) for a in self.agents}
        rewards, terms, truncs = ({a: value for a in self.agents} for value in (0.0, False, False))
        infos = {a: {} for a in self.agents}
        if self.t == self.bad_at:
            bad = {"shape": np.zeros(3, np.float32), "none": None, "complex": np.zeros(2, np.complex64),
                   "far": np.array([1e300, 0.5])}
            if self.what in bad:
                obs["y"] = bad[self.what]
            elif self.what == "info":
                infos["y"] = 5
            elif self.what == "unknown":
                obs["z"] = np.zeros(2, np.float32)
            elif self.what == "reward":
                rewards["y"] = "1.0"
            elif self.what == "flag":
                terms["y"] = 2
            elif self.what == "missing":
                del rewards["y"]
            elif self.what == "list":
                return obs, [0.0] * len(self.agents), terms, truncs, infos
            elif self.what == "four":
                return obs, rewards, terms, infos
        return obs, rewards, terms, truncs, infos

    def reset(self, seed=None, options=None):
        self.t = 0
        self.agents = list(self.possible_agents)
        obs, *_, infos = self._results()
        return obs, infos

    def step(self, actions):
        self.t += 1
        return self._results()


VARIED_OBS = [
    lambda x: np.full(3, x, np.float32),
    lambda x: np.full(3, x + 1 / 3),  # float64 for float32 (rounded as numpy casts)
    lambda x: [x, x + 0.5, -x],  # a list (the slow path)
    lambda x: np.full(6, x, np.float32)[::2],  # strided (the slow path)
    lambda x: np.full(3, int(x), np.int64),  # ints (the slow path)
    lambda x: np.full(3, x, ">f4"),  # big-endian (the slow path)
]
VARIED_REWARDS = [1.5, -2, True, np.float64(0.125), np.float32(0.3), np.int64(7), np.bool_(True), np.float16(0.5)]
VARIED_FLAGS = [False, np.bool_(False), 0, np.int64(0)]  # none of them ends an episode


class Mixed(ParallelEnv):
    """Agents of different observation spaces, which shoal flattens into rows of one length: ``box`` a Box (2,),
    ``grid`` a Box (2, 3), ``nest`` a Dict of a Box (1,) and a Box (2, 2) (and with ``one_hot``, ``pick`` a
    Discrete(3), which flattens one-hot). Values are float32 arrays, and at some steps float64 arrays or lists, nested
    for more dims (the C writer takes those too), or big-endian arrays (the slow path); ``grid`` terminates at step 3
    and the episode is truncated at step 6."""

    metadata = {"name": "mixed_v0"}
    SPACES = {
        "box": spaces.Box(-9, 9, (2,), np.float32),
        "grid": spaces.Box(-9, 9, (2, 3), np.float32),
        "nest": spaces.Dict({"a": spaces.Box(-9, 9, (1,), np.float32), "b": spaces.Box(-9, 9, (2, 2), np.float32)}),
        "pick": spaces.Discrete(3),
    }

    def __init__(self, one_hot=False):
        self.possible_agents = list(self.SPACES) if one_hot else ["box", "grid", "nest"]
        self.agents = []

    def observation_space(self, agent):
        return self.SPACES[agent]

    def action_space(self, agent):
        return spaces.Discrete(2)

    def _value(self, agent, x):
        kind = (self.t + len(agent)) % 4  # 0: big-endian, 1: float64, 2: a list, 3: float32
        as_kind = [lambda a: a.astype(">f4"), lambda a: a.astype(np.float64), lambda a: a.tolist(), lambda a: a][kind]
        if agent == "nest":
            b = np.arange(4, dtype=np.float32).reshape(2, 2) + x
            return {"a": as_kind(np.full(1, x, np.float32)), "b": as_kind(b)}
        if agent == "pick":
            return int(x) % 3
        return as_kind(np.arange(int(np.prod(self.SPACES[agent].shape)), dtype=np.float32).reshape(
            self.SPACES[agent].shape) + x)

    def _obs(self, actions=None):
        return {a: self._value(a, self.base + self.t + (int(actions[a]) if actions else 0)) for a in self.agents}

    def reset(self, seed=None, options=None):
        self.base = 0 if seed is None else seed % 5
        self.t = 0
        self.agents = list(self.possible_agents)
        return self._obs(), {a: {} for a in self.agents}

    def step(self, actions):
        self.t += 1
        obs = self._obs(actions)
        rewards = {a: float(self.t) for a in self.agents}
        terms = {a: a == "grid" and self.t == 3 for a in self.agents}
        truncs = {a: self.t == 6 for a in self.agents}
        self.agents = [a for a in self.agents if not (terms[a] or truncs[a])]
        return obs, rewards, terms, truncs, {a: {} for a in obs}


class _Keys(dict):
    """A dict subclass of its own (the C writer leaves it to the full checks)."""


class VariedAgents(ParallelEnv):
    """Three agents whose results come in every type an env may return, changing from step to step and agent to
    agent: observations as float32 and float64 arrays, lists, strided, int and big-endian arrays; rewards of every
    real type; flags as Python and numpy bools and ints 0 and 1; results' dicts as dicts, defaultdicts and a dict
    subclass; an agent's info missing at times. Agent ``q`` leaves at step 4 (terminated, as a numpy bool) and the
    episode ends at step 9 (truncated, as an int 1)."""

    metadata = {"name": "varied_agents_v0"}
    possible_agents = ["p", "q", "r"]

    def observation_space(self, agent):
        return spaces.Box(-np.inf, np.inf, (3,), np.float32)

    def action_space(self, agent):
        return spaces.Discrete(2)

    def reset(self, seed=None, options=None):
        self.base = 0 if seed is None else seed
        self.t = 0
        self.agents = list(self.possible_agents)
        return {a: VARIED_OBS[0](self.base + k) for k, a in enumerate(self.agents)}, {a: {} for a in self.agents}

    def step(self, actions):
        import collections

        self.t += 1
        t, n = self.t, self.base + self.t
        obs, terms, truncs, infos = {}, {}, {}, {}
        rewards: dict = collections.defaultdict(float) if n % 2 else {}
        for k, agent in enumerate(self.agents):
            obs[agent] = VARIED_OBS[(n + k) % len(VARIED_OBS)](n + k + int(actions[agent]))
            rewards[agent] = VARIED_REWARDS[(n + 2 * k) % len(VARIED_REWARDS)]
            terms[agent] = VARIED_FLAGS[(n + k) % len(VARIED_FLAGS)]
            truncs[agent] = VARIED_FLAGS[(n + k + 1) % len(VARIED_FLAGS)]
            if (n + k) % 3:
                infos[agent] = {"t": t}
        if t == 4 and "q" in terms:
            terms["q"] = np.bool_(True)
        if t == 9:
            truncs = dict.fromkeys(truncs, 1)
        self.agents = [a for a in self.agents if not (terms[a] or truncs[a])]
        return (_Keys(obs) if n % 5 == 0 else obs), rewards, terms, truncs, infos


class Chatter(ParallelEnv):
    """Two agents whose observation has a Text leaf (loose: not in the shared records) beside a Box; every episode
    ends at step ``length``. Agent ``k``'s observation at step ``t`` of episode ``n``: ``{"said": f"{n}:{t}:{k}",
    "t": [t]}``; its info ``{"t": t}`` (``keep_infos``: the dicts it keeps, which a reset sets to ``{"t": 0}``)."""

    metadata = {"name": "chatter_v0"}
    possible_agents = ["a", "b"]
    SPACE = spaces.Dict({"said": spaces.Text(12, charset="0123456789:"), "t": spaces.Box(0, 99, (1,), np.int64)})

    def __init__(self, length=3, keep_infos=False):
        self.length, self.episode, self.t, self.agents = length, -1, 0, []
        self.kept = {a: {} for a in self.possible_agents} if keep_infos else None

    def observation_space(self, agent):
        return self.SPACE

    def action_space(self, agent):
        return spaces.Discrete(2)

    def _obs(self):
        return {a: {"said": f"{self.episode}:{self.t}:{k}", "t": np.array([self.t])} for k, a in enumerate(self.agents)}

    def reset(self, seed=None, options=None):
        self.episode, self.t, self.agents = self.episode + 1, 0, list(self.possible_agents)
        if self.kept is not None:
            for info in self.kept.values():
                info["t"] = 0
            return self._obs(), self.kept
        return self._obs(), {a: {} for a in self.agents}

    def step(self, actions):
        self.t += 1
        over = self.t >= self.length
        obs = self._obs()
        infos = {a: {"t": self.t} for a in self.agents}
        if self.kept is not None:
            for a in self.agents:
                self.kept[a]["t"] = self.t
            infos = self.kept
        flags = {a: False for a in self.agents}
        return obs, {a: 1.0 for a in self.agents}, {a: over for a in self.agents}, flags, infos


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


class Relay(ParallelEnv):
    """Two agents, ``x`` and ``y``, with Box observations ``[episode, t, agent number, last action]`` and rewards
    ``t * (agent number + 1) + action``. Episode ``n`` (the reset seed, or one more than the last) ends at step
    ``2 + n % 3``, terminated where ``n`` is even and truncated where odd. Step infos are ``{"t": t, "agent": k}``,
    reset infos ``{"t": -1, "episode": n}`` (``t`` in both, so the order in which they are merged shows). With
    ``leave``, ``y`` terminates at step 1 of every episode (for SuperSuit's ``black_death_v3``); with ``vanish``, the
    episode ends with its agents list emptied but neither agent terminated nor truncated."""

    metadata = {"name": "relay_v0"}
    possible_agents = ["x", "y"]
    render_mode = None

    def __init__(self, leave: bool = False, vanish: bool = False) -> None:
        self.leave, self.vanish, self.episode, self.t, self.agents = leave, vanish, -1, 0, []
        self.closed = False

    def close(self):
        self.closed = True

    def observation_space(self, agent):
        return spaces.Box(-1, 1e6, (4,), np.float32)

    def action_space(self, agent):
        return spaces.Discrete(3)

    def _obs(self, k, action=0):
        return np.array([self.episode, self.t, k, action], np.float32)

    def reset(self, seed=None, options=None):
        self.episode = seed if seed is not None else self.episode + 1
        self.t, self.agents = 0, list(self.possible_agents)
        ks = {a: k for k, a in enumerate(self.possible_agents)}
        return {a: self._obs(k) for a, k in ks.items()}, {a: {"t": -1, "episode": self.episode} for a in ks}

    def step(self, actions):
        self.t += 1
        ks = {a: self.possible_agents.index(a) for a in self.agents}
        over = self.t >= 2 + self.episode % 3
        obs = {a: self._obs(k, int(actions[a])) for a, k in ks.items()}
        rewards = {a: float(self.t * (k + 1) + int(actions[a])) for a, k in ks.items()}
        terms = {a: over and self.episode % 2 == 0 and not self.vanish for a in ks}
        truncs = {a: over and self.episode % 2 == 1 and not self.vanish for a in ks}
        if self.leave and self.t == 1 and "y" in terms:
            terms["y"] = True
        infos = {a: {"t": self.t, "agent": k} for a, k in ks.items()}
        self.agents = [] if over and self.vanish else [a for a in self.agents if not (terms[a] or truncs[a])]
        return obs, rewards, terms, truncs, infos
