"""Batch-native environments: one object simulates many instances of an env in numpy, and shoal hosts it.

A :class:`BatchEnv` steps every instance it is asked to in one call, writing observations, rewards, terminations
and truncations straight into the arrays shoal hands it (rows of the shared buffers when they are contiguous), with
no Python per instance. Everything the vector API means (autoreset in its three modes, partial resets, first-N-of-M
batches, action sequences with ``gamma``, ``envs.torch()``) is shoal's engine's, written once: an env only resets
and steps. Every backend hosts one: the serial backend one object for all envs, each multiprocessing worker or Ray
actor one object for its share.

A complete env (a coin to guess; ``shoal.make(Coin, 4096)`` steps 4096 of them)::

    import numpy as np
    from gymnasium import spaces
    from shoal.batch import BatchEnv, Streams

    class Coin(BatchEnv):
        single_observation_space = spaces.Box(0, 1, (1,), np.float32)
        single_action_space = spaces.Discrete(2)

        def __init__(self, num_envs):
            super().__init__(num_envs)
            self.rng = Streams(num_envs)             # one random stream per instance, drawn for many at once
            self.coin = np.zeros(num_envs, np.int64)

        def reset(self, ids, seeds, out):
            self.rng.seed(ids, seeds)
            self.coin[ids] = self.rng.integers(ids, 2)
            out.obs[:] = 0

        def step(self, ids, actions, out):
            out.rewards[:] = actions == self.coin[ids]
            out.terminations[:] = True
            out.obs[:] = 0

``ids`` index this object's instances (``0 .. num_envs - 1``; a read-only array, the same one again on later
calls for the same instances); row ``j`` of ``actions`` (read-only too: it may be the caller's own batch) and of
every array of ``out`` belongs to instance ``ids[j]``. Spaces must have a fixed size (Box, Discrete, MultiDiscrete,
MultiBinary and Dict/Tuple of them): a structured observation arrives in ``out.obs`` as Gymnasium's batched shape (a
dict of arrays for a Dict), and so do structured actions.

:func:`compare` checks a batch-native env against a single-instance Gymnasium env of the same game, step for step.
"""

from __future__ import annotations

import importlib
import secrets
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Sequence

import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from shoal.errors import ConfigError, EnvOutputError
from shoal.vector.buffers import Buffers
from shoal.vector.checks import first_split_row
from shoal.vector.engine import Engine, NoSeeds, blame, env_error, run_of
from shoal.vector.heap import retain_freed_memory

# -- the interface ------------------------------------------------------------------------------------------------


@dataclass
class Outputs:
    """Where an env writes the results of one call, one row per instance of the call's ``ids``.

    ``obs`` is an array (a dict/tuple of arrays for a structured space); the others are 1-D. Rewards, terminations and
    truncations are zeroed before each step; ``reset`` writes only ``obs``.
    """

    obs: Any
    rewards: np.ndarray
    terminations: np.ndarray
    truncations: np.ndarray


class BatchEnv(ABC):
    """Many instances of one environment, simulated together (shoal's batch-native kind of env).

    Subclasses set ``single_observation_space`` and ``single_action_space`` (class attributes, or in
    ``__init__``) and implement :meth:`reset` and :meth:`step`; see the module docstring for a complete example.
    """

    single_observation_space: spaces.Space  # (a class attribute, or set in __init__)
    single_action_space: spaces.Space
    metadata: ClassVar[dict[str, Any]] = {}
    possible_agents: ClassVar[tuple[str, ...]] = ()
    """A multi-agent env names its agents here. Each env is then ``A = len(possible_agents)`` consecutive
    instances, one per agent (instance ``i`` is agent ``possible_agents[i % A]`` of env ``i // A``), which share
    the spaces above, start and end their episodes together (checked), and get their env's seed; :func:`shoal.make`
    returns a :class:`~shoal.multiagent.MultiAgentVectorEnv` over them (agents as rows, every agent always live)."""

    def __init__(self, num_envs: int) -> None:
        self.num_envs = num_envs

    @abstractmethod
    def reset(self, ids: np.ndarray, seeds: Sequence[int | None], out: Outputs) -> None:
        """Start a new episode of instances ``ids``: seed those with a seed (``seeds[j]`` for ``ids[j]``; None: go
        on with the instance's random stream) and write their first observations into ``out.obs``."""

    @abstractmethod
    def step(self, ids: np.ndarray, actions: Any, out: Outputs) -> None:
        """Step instances ``ids`` once with ``actions`` and write ``out``'s observations, rewards, terminations
        and truncations. An instance whose episode ended is not stepped again before a :meth:`reset`."""

    def infos(self, ids: np.ndarray) -> dict[int, dict[str, Any]] | None:
        """Optional infos of the last call, ``{row j of ids: info}`` for the few rows that have one (an episode's
        score at its end, say); None (the default) when none has."""
        return None

    def close(self) -> None:
        """Release what the env holds."""


class Streams:
    """One random stream per instance (splitmix64), drawn for many instances in one numpy call.

    An instance's draws depend only on its seed and how many draws it made, so a batch of instances and one
    instance alone (a single-instance env using a ``Streams(1)``) draw the same numbers for the same seeds.
    """

    _GOLDEN = np.uint64(0x9E3779B97F4A7C15)
    _M1 = np.uint64(0xBF58476D1CE4E5B9)
    _M2 = np.uint64(0x94D049BB133111EB)

    def __init__(self, num_envs: int) -> None:
        self.state = np.zeros(num_envs, np.uint64)
        self.seeded = np.zeros(num_envs, np.bool_)
        self._unseeded = num_envs  # how many are not seeded yet

    def seed(self, ids: np.ndarray, seeds: Sequence[int | None]) -> None:
        """Seed instance ``ids[j]`` with ``seeds[j]``; an instance never seeded gets a seed from the OS.

        Instance seed ``s`` starts the stream at ``SeedSequence(s).generate_state(1, np.uint64)[0]``, computed for
        the whole batch at once (:func:`seed_states`: ~0.07 us an instance, against ~5.5 us for numpy's
        ``SeedSequence`` one seed at a time, 1.4 s for 262144 instances)."""
        ids = np.asarray(ids)
        if seeds.count(None) == len(seeds) if isinstance(seeds, (list, NoSeeds)) else all(s is None for s in seeds):
            if not self._unseeded:  # the usual autoreset: nothing to seed
                return
            ids = ids[~self.seeded[ids]]  # checked without a Python loop
            seeds = NoSeeds(len(ids))
        given = np.fromiter((s is not None for s in seeds), np.bool_, len(ids))
        fresh = ~given & ~self.seeded[ids]  # never seeded and no seed: one from the OS (seeded ones go on)
        states = np.zeros(len(ids), np.uint64)
        states[given] = _states([s for s in seeds if s is not None])
        drawn = np.frombuffer(secrets.token_bytes(8 * int(np.count_nonzero(fresh))), np.uint64) >> np.uint64(1)
        states[fresh] = seed_states(drawn)  # 63 bits from the OS, as a seed
        start = given | fresh
        ids = ids[start]
        self.state[ids] = states[start]
        self._unseeded -= int(np.count_nonzero(~self.seeded[ids]))
        self.seeded[ids] = True

    def bits(self, ids: np.ndarray) -> np.ndarray:
        """The next 64 random bits of each instance of ``ids`` (uint64); each instance's stream advances once."""
        at = run_of(np.asarray(ids))  # a slice for consecutive ids (the usual batch): no gather and scatter
        # In place where it can be (a large batch's temporaries cost more); numpy wraps arrays' integer overflow
        # silently, as splitmix64 wants.
        if isinstance(at, slice):
            state = self.state[at]
            state += self._GOLDEN  # a view: the streams advance here
        else:
            state = self.state[at] + self._GOLDEN
            self.state[at] = state
        z = state >> np.uint64(30)
        z ^= state
        z *= self._M1
        z ^= z >> np.uint64(27)
        z *= self._M2
        z ^= z >> np.uint64(31)
        return z

    def uniform(self, ids: np.ndarray) -> np.ndarray:
        """A float64 in [0, 1) per instance."""
        bits = self.bits(ids)
        bits >>= np.uint64(11)
        values = bits.astype(np.float64)
        values *= 1.0 / 2**53
        return values

    def integers(self, ids: np.ndarray, high: int | np.ndarray) -> np.ndarray:
        """An int64 in [0, high) per instance (``high`` one bound, or one per instance)."""
        return np.minimum((self.uniform(ids) * high).astype(np.int64), np.asarray(high) - 1)


_INIT_A, _MULT_A, _INIT_B, _MULT_B = 0x43B0D7E5, 0x931E8875, 0x8B51F9DD, 0x58F38DED  # numpy's SeedSequence
_MIX_L, _MIX_R, _SHIFT = 0xCA01F9DD, 0x4973F715, 16


def _states(seeds: list[int]) -> np.ndarray:
    """The stream states of ``seeds`` (non-negative ints): :func:`seed_states`, or numpy's ``SeedSequence`` one at a
    time where a seed has more than 64 bits."""
    if not seeds or max(seeds) < 2**64:
        return seed_states(np.array(seeds, np.uint64))
    return np.array([np.random.SeedSequence(s).generate_state(1, np.uint64)[0] for s in seeds], np.uint64)


def seed_states(seeds: np.ndarray) -> np.ndarray:
    """``np.random.SeedSequence(s).generate_state(1, np.uint64)[0]`` for every seed ``s`` of ``seeds`` (uint64:
    0 <= s < 2**64), in a few numpy calls over the whole array.

    numpy's algorithm (``numpy.random.bit_generator``, after O'Neill's ``seed_seq``) written for arrays of seeds: the
    seed's 32-bit words (one, or two from 2**32 on) hashed into a pool of four words, every pool word mixed with
    every other, and two 32-bit words drawn from the pool, low word first. Tested equal to numpy's."""
    u32 = np.uint32
    seeds = np.asarray(seeds, np.uint64)
    low = (seeds & np.uint64(0xFFFFFFFF)).astype(u32)
    high = (seeds >> np.uint64(32)).astype(u32)  # 0 where the entropy is one word: the pool's padding hashes 0 too
    hash_a = u32(_INIT_A)

    def hashmix(value: np.ndarray) -> np.ndarray:
        nonlocal hash_a
        value = value ^ hash_a
        hash_a = u32(hash_a * u32(_MULT_A))
        value *= hash_a
        value ^= value >> u32(_SHIFT)
        return value

    with np.errstate(over="ignore"):  # uint32 arithmetic wraps, as the algorithm wants
        pool = [hashmix(word) for word in (low, high, np.zeros_like(low), np.zeros_like(low))]
        for src in range(4):
            for dst in range(4):
                if src != dst:
                    mixed = u32(_MIX_L) * pool[dst] - u32(_MIX_R) * hashmix(pool[src])
                    mixed ^= mixed >> u32(_SHIFT)
                    pool[dst] = mixed
        hash_b = u32(_INIT_B)
        words = []
        for word in pool[:2]:
            word = word ^ hash_b
            hash_b = u32(hash_b * u32(_MULT_B))
            word *= hash_b
            word ^= word >> u32(_SHIFT)
            words.append(word.astype(np.uint64))
    return words[0] | (words[1] << np.uint64(32))


# -- registration ---------------------------------------------------------------------------------------------------

registry: dict[str, str] = {}
"""Batch-native env ids and their classes (``"module:Class"``): what :func:`shoal.make` looks up an id in."""


def register(env_id: str, entry_point: str) -> None:
    """Let ``shoal.make(env_id, n)`` build the batch-native env ``entry_point`` (``"package.module:Class"``)."""
    registry[env_id] = entry_point


def load(entry_point: str) -> type[BatchEnv]:
    module, _, name = entry_point.partition(":")
    return getattr(importlib.import_module(module), name)


def batch_class_of(env: Any) -> tuple[type[BatchEnv], dict[str, Any]] | None:
    """The batch-native class (and keyword arguments) ``env`` names, if it names one: a registered id, a
    :class:`BatchEnv` subclass, or a ``functools.partial`` of one."""
    if isinstance(env, str):
        if env not in registry:
            return None
        return load(registry[env]), {}
    func = getattr(env, "func", None)
    if func is not None and isinstance(func, type) and issubclass(func, BatchEnv):
        if getattr(env, "args", ()):
            raise ConfigError("give a batch-native env's arguments by keyword: functools.partial(MyEnv, size=5)")
        return func, dict(env.keywords)
    if isinstance(env, type) and issubclass(env, BatchEnv):
        return env, {}
    return None


# -- the engine ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BatchEngineFactory:
    """Builds the engine of a group of envs: one instance of ``cls`` for them all. Pickled into each worker."""

    cls: type[BatchEnv]
    kwargs: dict[str, Any] = field(default_factory=dict)
    rows: Any = None  # a multi-agent env's AgentRows (shoal.multiagent.rows): MultiAgentVectorEnv reads them

    actions_in_place: ClassVar[bool] = True
    """Its engines hand the env its actions read-only, so a large synchronous step may give the engines in the
    calling process rows of the caller's own batch instead of writing them into the buffers first
    (:meth:`shoal.vector.base.VectorEnv.send`)."""

    def __call__(self, env_ids: range, buffers: Buffers, autoreset_mode: AutoresetMode) -> BatchEngine:
        return BatchEngine(self, env_ids, buffers, autoreset_mode)


class BatchEngine(Engine):
    """Hosts envs ``env_ids`` as the instances of one :class:`BatchEnv`."""

    def __init__(
        self, factory: BatchEngineFactory, env_ids: range, buffers: Buffers, autoreset_mode: AutoresetMode
    ) -> None:
        super().__init__(env_ids, buffers, autoreset_mode)
        retain_freed_memory()  # numpy's temporaries over thousands of instances: see shoal.vector.heap
        with blame(env_ids.start):
            self.env = factory.cls(num_envs=len(env_ids), **factory.kwargs)
        self._obs = buffers.spec.obs
        self._action = buffers.spec.action
        self._name = factory.cls.__name__
        self._local_of: np.ndarray | None = None  # see _local
        self._local_ids = np.arange(0)
        self._checked = {"reset": False, "step": False}  # seed 004's "shape checks on the first batch"
        self._agents = len(factory.cls.possible_agents) or 1
        if self._agents > 1:  # the infos of agents as rows; every agent of a batch-native env is always live
            mine = slice(env_ids.start, env_ids.stop)
            buffers.extras["env_index"][mine] = np.arange(env_ids.start, env_ids.stop) // self._agents
            buffers.extras["agent_index"][mine] = np.arange(env_ids.start, env_ids.stop) % self._agents
            buffers.extras["agent_mask"][mine] = True

    def _rows(self, ids: np.ndarray) -> tuple[slice | None, slice | None]:
        """Slices of the env rows and obs rows of ``ids`` when both are runs (the arrays are then views)."""
        env_rows = self._run(ids)
        if not isinstance(env_rows, slice):
            return None, None
        if not self.buffers.slots_on[0]:  # observations in slot 0: their rows are the envs'
            return env_rows, env_rows
        obs_rows = run_of(np.asarray(self.buffers.target_rows(ids)))
        return env_rows, obs_rows if isinstance(obs_rows, slice) else None

    def _local(self, ids: np.ndarray) -> np.ndarray:
        """The env's own instance numbers of ``ids``, read-only; kept for the array last asked about (a group's ids
        come back every step)."""
        if ids is not self._local_of:
            local = ids - self.env_ids.start
            local.flags.writeable = False  # the env gets this array again next step: it must not change it
            self._local_of, self._local_ids = ids, local
        return self._local_ids

    def _call(self, ids: np.ndarray, what: str, run: Callable[[np.ndarray, Outputs], None]) -> list[dict]:
        b = self.buffers
        env_rows, obs_rows = self._rows(ids)
        obs = b.obs[obs_rows] if obs_rows is not None else self._obs.empty(len(ids))
        if env_rows is not None:
            out = Outputs(self._obs.read(obs), b.rewards[env_rows], b.terminations[env_rows], b.truncations[env_rows])
        else:
            out = Outputs(self._obs.read(obs), np.zeros(len(ids)), np.zeros(len(ids), np.bool_),
                          np.zeros(len(ids), np.bool_))
        if what == "step":
            out.rewards[:] = 0
            out.terminations[:] = False
            out.truncations[:] = False
        local = self._local(ids)
        try:  # not blame(): a context manager costs more than a small batch's step
            run(local, out)
        except Exception as exc:
            span = f"env {int(ids[0])}" if len(ids) == 1 else f"envs {int(ids[0])}..{int(ids[-1])}"
            raise env_error(int(ids[0]), exc, f"batch-native env {self._name} ({span})", f" in {what}()") from exc
        if obs_rows is None:
            b.obs[b.target_rows(ids)] = obs
        if env_rows is None and what == "step":
            b.rewards[ids], b.terminations[ids], b.truncations[ids] = out.rewards, out.terminations, out.truncations
        if not self._checked[what]:
            self._check(ids, what, out)
            self._checked[what] = True
        if self._agents > 1 and what == "step":
            self._check_together(ids, out)
        infos = self.env.infos(local)
        if not infos:
            return []  # no infos: nothing per env
        listed: list[dict] = [{}] * len(ids)
        for row, info in infos.items():
            listed[row] = info
        return listed

    def _check(self, ids: np.ndarray, what: str, out: Outputs) -> None:
        """The observations of the first reset and step lie in the observation space, rewards are finite."""
        space = batch_space(self.env.single_observation_space, len(ids))
        values = out.obs
        if not space.contains(values):
            bad = int(ids[0])
            if isinstance(values, np.ndarray) and isinstance(space, spaces.Box):
                rows = ~np.all((values >= space.low) & (values <= space.high), axis=tuple(range(1, values.ndim)))
                bad = int(ids[np.flatnonzero(rows)[0]]) if rows.any() else bad
            raise EnvOutputError(
                f"batch-native env {self._name} wrote observations outside {self.env.single_observation_space} in "
                f"{what}() (env {bad} is one)", env_id=bad,
            )
        if what == "step" and not np.all(np.isfinite(out.rewards)):
            bad = int(ids[np.flatnonzero(~np.isfinite(out.rewards))[0]])
            raise EnvOutputError(f"batch-native env {self._name} wrote a non-finite reward for env {bad}", env_id=bad)

    def _check_together(self, ids: np.ndarray, out: Outputs) -> None:
        """The agents of each env (``A`` consecutive rows of ``ids``, which are whole envs) ended together."""
        ended = (out.terminations | out.truncations).reshape(-1, self._agents)
        first = first_split_row(ended)
        if first is not None:
            rows = ids.reshape(-1, self._agents)[first]
            env = int(rows[0]) // self._agents
            raise EnvOutputError(
                f"batch-native env {self._name}: the agents of env {env} (rows {int(rows[0])}..{int(rows[-1])}) ended "
                f"their episode apart ({ended[first].tolist()}); a multi-agent batch-native env's agents end "
                f"together", env_id=env,
            )

    def _reset_envs(self, ids: np.ndarray, seeds: Sequence[int | None], options: dict | None) -> list[dict]:
        if options:
            raise ConfigError(f"batch-native env {self._name} takes no reset options, got {sorted(options)}")
        seeds = seeds if type(seeds) in (list, NoSeeds) else list(seeds)
        return self._call(ids, "reset", lambda local, out: self.env.reset(local, seeds, out))

    def _step_envs(self, ids: np.ndarray, actions: np.ndarray) -> list[dict]:
        if self._action.structured:
            batch = self._action.read(actions)
        else:  # read-only: it may be rows of the caller's own batch (BatchEngineFactory.actions_in_place)
            batch = actions.view()
            batch.flags.writeable = False
        return self._call(ids, "step", lambda local, out: self.env.step(local, batch, out))

    def call(self, ids: np.ndarray, name: str, args: tuple, kwargs: dict) -> list[Any]:
        if callable(name):
            return [name(self.env, *args, **kwargs)] * len(ids)
        value = getattr(self.env, name)
        return [value(*args, **kwargs) if callable(value) else value] * len(ids)

    def get_attr(self, ids: np.ndarray, name: str) -> list[Any]:
        return [getattr(self.env, name)] * len(ids)

    def set_attr(self, ids: np.ndarray, name: str, values: list[Any]) -> None:
        setattr(self.env, name, values[-1])

    def close(self) -> None:
        self.env.close()


def check_spaces(cls: type[BatchEnv], env: BatchEnv) -> tuple[spaces.Space, spaces.Space]:
    """The env's spaces, refused with the reason when a leaf has no fixed size (it could not be written in place)."""
    from shoal.spaces import Layout

    obs, act = env.single_observation_space, env.single_action_space
    for what, space in (("observation", obs), ("action", act)):
        if not isinstance(space, spaces.Space):
            raise ConfigError(f"{cls.__name__}.single_{what}_space must be a gymnasium Space, got {space!r}")
        if Layout(space).loose:
            raise ConfigError(
                f"{cls.__name__}'s {what} space {space} has leaves without a fixed size: a batch-native env writes "
                f"its outputs in place, so its spaces must be Box/Discrete/MultiDiscrete/MultiBinary (and Dict/Tuple "
                f"of them)"
            )
    return obs, act


# -- checking a batch-native env against a single-instance one ----------------------------------------------------


def compare(batch_env: Any, single_env: Callable[[], Any], num_envs: int, *, steps: int, seed: int,
            actions: Callable[[int], Any] | None = None, autoreset_mode: str | AutoresetMode = "next_step") -> int:
    """Step a batch-native env (through ``shoal.make``, serial) and ``num_envs`` single-instance Gymnasium envs
    (``single_env()`` each, in Gymnasium's ``SyncVectorEnv``) side by side with the same seeds and actions, and
    raise ``AssertionError`` at the first step where observations, rewards, terminations, truncations or infos
    (with same-step's ``final_obs`` and ``final_info``) differ.

    ``actions(t)``: the batch of actions at step ``t`` (default: sampled from the action space, seeded).
    Returns how many episodes ended (so a caller can require that the comparison went through episode ends).
    """
    import gymnasium

    from shoal.make import make

    from shoal.vector.checks import parse_autoreset_mode

    mode = parse_autoreset_mode(autoreset_mode)
    ours = make(batch_env, num_envs, backend="serial", autoreset_mode=mode)
    theirs = gymnasium.vector.SyncVectorEnv([single_env] * num_envs, autoreset_mode=mode)
    try:
        if actions is None:
            ours.action_space.seed(seed)
            actions = lambda t: ours.action_space.sample()  # noqa: E731
        _same("reset", ours.reset(seed=seed)[0], theirs.reset(seed=seed)[0])
        ended = 0
        for t in range(steps):
            a = actions(t)
            mine, other = ours.step(a), theirs.step(a)
            for name, x, y in zip(("observations", "rewards", "terminations", "truncations"), mine, other):
                _same(f"step {t}: {name}", x, y)
            _same_infos(f"step {t}: info", mine[4], other[4])
            ended += int(np.count_nonzero(mine[2] | mine[3]))
        return ended
    finally:
        ours.close()
        theirs.close()


def _same_infos(where: str, mine: dict[str, Any], theirs: dict[str, Any]) -> None:
    """Vector infos agree: the same keys, and where a key's mask is set, the same values (element by element for
    object arrays such as ``final_obs``, whose other elements are None)."""
    if sorted(mine) != sorted(theirs):
        raise AssertionError(f"{where}: batch-native and single-instance envs differ in keys: {sorted(mine)} vs "
                             f"{sorted(theirs)}")
    for key, value in mine.items():
        if key.startswith("_"):
            _same(f"{where}[{key!r}]", value, theirs[key])
        elif isinstance(value, dict):
            _same_infos(f"{where}[{key!r}]", value, theirs[key])
        else:
            for row in np.flatnonzero(mine[f"_{key}"]).tolist():
                _same(f"{where}[{key!r}][{row}]", value[row], theirs[key][row])


def _same(where: str, mine: Any, theirs: Any) -> None:
    if isinstance(mine, dict):
        for key in mine:
            _same(f"{where}[{key!r}]", mine[key], theirs[key])
        return
    if isinstance(mine, tuple):
        for k, (a, b) in enumerate(zip(mine, theirs)):
            _same(f"{where}[{k}]", a, b)
        return
    a, b = np.asarray(mine), np.asarray(theirs)
    if a.shape != b.shape or not np.allclose(a.astype(np.float64), b.astype(np.float64), rtol=1e-6, atol=1e-6):
        rows: Any = np.flatnonzero((a != b).reshape(len(a), -1).any(axis=1)) if a.shape == b.shape else []
        raise AssertionError(f"{where}: batch-native and single-instance envs differ (envs {list(rows)}):\n{a}\n{b}")
