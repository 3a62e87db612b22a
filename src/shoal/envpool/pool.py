"""An EnvPool-style pool over one shoal vector env: EnvPool's methods, its env ids and its seeding.

What a task adds (Atari's lives and game overs, a task's own spaces and infos) is its :class:`Book`; how results
are handed out is the ``env_type``'s format (:mod:`shoal.envpool.formats`).
"""

from __future__ import annotations

import functools
import warnings
from collections import namedtuple
from typing import Any, NamedTuple, Protocol, cast

import gymnasium
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode

from shoal.envpool.formats import FORMATS, Batch, old_gym_api
from shoal.errors import ActionError, ConfigError, ResetArgumentError, ShoalError
from shoal.vector.base import VectorEnv
from shoal.vector.checks import integer


COMMON_DEFAULTS: dict[str, Any] = {
    "num_envs": 1,
    "batch_size": 0,
    "num_threads": 0,
    "max_num_players": 1,
    "thread_affinity_offset": -1,
    "seed": 42,
    "env_seed": [],
    "gym_reset_return_info": None,
}
"""EnvPool's keywords of every task and their defaults (``envpool/core/env_spec.h``)."""


class Book(Protocol):
    """A task's bookkeeping: EnvPool's form of each batch shoal returns."""

    @property
    def observation_space(self) -> spaces.Space:
        """One env's observation space, as EnvPool shows it."""
        ...

    @property
    def action_space(self) -> spaces.Space:
        ...

    def batch(self, obs: Any, reward: Any, terminated: Any, truncated: Any, info: dict[str, Any], ids: np.ndarray,
              reset: np.ndarray | None) -> Batch:
        """The batch of envs ``ids`` (``reward`` None: a reset's); ``reset``: the envs whose results are a reset's
        (None: none of a step's, all of a reset's)."""
        ...

    def render(self, envs: VectorEnv, ids: list[int]) -> np.ndarray:
        """The frames of envs ``ids``, stacked."""
        ...

    def dm_fields(self, specs: Any) -> dict[str, Any]:
        """The infos that EnvPool's dm ``State`` holds after the observation, with their ``dm_env.specs``."""
        ...


class Spec(NamedTuple):
    """A pool's spec, as EnvPool's ``pool.spec`` and ``envpool.make_spec`` give it: its configuration and one env's
    spaces in the pool's API."""

    config: Any
    """EnvPool's settings as a named tuple (``spec.config.max_episode_steps``, ``spec.config._asdict()``)."""
    observation_space: Any
    action_space: Any
    gymnasium_observation_space: spaces.Space
    gymnasium_action_space: spaces.Space
    reward_threshold: float | None
    """Gymnasium's registration's for a task Gymnasium has too; None for Atari (as EnvPool's)."""


class EnvPool:
    """An EnvPool-style pool (made by :func:`shoal.envpool.make`), stepping one shoal vector env (:attr:`envs`).

    ``send(action, env_id)`` takes the ids of the batch the last ``recv`` returned (in any order); shoal's
    asynchronous batches are whole groups of envs (one worker's), so ``batch_size`` is a multiple of the envs per
    worker. ``xla()`` gives EnvPool's functions for ``jax.jit`` (:mod:`shoal.envpool.xla`). As EnvPool's pools are,
    a pool is an instance of its API's class (a Gymnasium ``VectorEnv``, which Gymnasium's vector wrappers take; a
    ``gym.Env``; a ``dm_env.Environment``): see :func:`pool_class`.
    """

    render_mode: str | None = None
    is_vector_env = True  # (what older vector-aware wrappers look for; code written for EnvPool sets it too)

    def __init__(self, envs: VectorEnv, env_type: str, settings: dict[str, Any], book: Book,
                 reward_threshold: float | None = None) -> None:
        self.envs = envs
        self.env_type = env_type
        num_envs = envs.num_envs
        self.config: dict[str, Any] = {**settings, "num_envs": num_envs, "batch_size": envs.batch_size}
        self.reward_threshold = reward_threshold
        seed, env_seed = _seeds(settings["seed"], settings["env_seed"], num_envs)
        self.config.update(seed=seed, env_seed=env_seed)
        self._seed = _first_seeds(seed, env_seed, num_envs)
        self._book = book
        self._format = FORMATS[env_type](self, book.observation_space, book.action_space, settings)
        self.config["gym_reset_return_info"] = self._format.return_info  # (as EnvPool fills it in)
        # EnvPool's spaces are one env's; plain attributes, which code written for EnvPool sets (cleanrl does)
        self.observation_space = self.single_observation_space = self._format.observation_space
        self.action_space = self.single_action_space = self._format.action_space
        self.num_envs = num_envs
        self.all_env_ids = np.arange(num_envs, dtype=np.int32)
        self.is_async = envs.batch_size != num_envs
        self._reset_pending = False
        self._reset_once = False
        self._fresh = np.zeros(num_envs, np.bool_)  # reset by a full reset, their first results not yet handed out
        self._fresh_left = False  # any of them (one check a step)
        self._last_batch: Batch | None = None  # the last batch handed out, whose form the xla functions take

    @property
    def spec(self) -> Spec:
        """EnvPool's spec of this pool (:class:`Spec`)."""
        config = namedtuple("Config", self.config)(**self.config)  # type: ignore[misc]
        return Spec(config, self.observation_space, self.action_space, self._book.observation_space,
                    self._book.action_space, self.reward_threshold)

    @property
    def atari(self) -> VectorEnv:
        """The vector env (of an Atari pool: its :class:`~shoal.AtariVectorEnv`); the name of earlier versions."""
        return self.envs

    # -- EnvPool's methods ---------------------------------------------------------------------------------------

    def reset(self, env_id: np.ndarray | None = None, **kwargs: Any) -> Any:
        """Reset envs ``env_id`` (all if None) and return their first observations (and infos)."""
        if kwargs.get("seed") is not None:
            warnings.warn("EnvPool seeds are fixed when the pool is made: reset(seed=...) is ignored; pass seed to "
                          "make", stacklevel=2)
        masked = _masked_ids(kwargs.get("options"), self.num_envs)
        if masked is not None:
            if env_id is not None:
                raise ConfigError("pass either env_id or options['reset_mask'], not both")
            env_id = masked
        ids = self.all_env_ids if env_id is None else checked_ids(env_id, self.num_envs)
        if self.is_async and len(ids) != self.num_envs:
            raise ShoalError("in asynchronous mode reset() resets every env; use async_reset() and recv()")
        if len(ids) == self.num_envs and np.array_equal(np.sort(ids), self.all_env_ids):
            self._fresh[:] = self._fresh_left = True  # (asynchronous mode: the others come with later batches)
            obs, info = self.envs.reset(seed=self._first_seed())
            batch = self._batch(obs, None, None, None, info)
        else:
            mask = np.zeros(self.num_envs, np.bool_)
            mask[ids] = True
            obs, info = self.envs.reset(seed=self._first_seed(), options={"reset_mask": mask})
            batch = self._batch(obs, None, None, None, info, reset=ids)
        if not self.is_async:
            batch = select(batch, ids)
        return self._format.reset(batch)

    def async_reset(self) -> None:
        """Start a reset of every env; :meth:`recv` returns the first batch to finish, as a step."""
        self.envs.reset_async(seed=self._first_seed())
        self._reset_pending = True
        self._fresh[:] = self._fresh_left = True

    def send(self, action: Any, env_id: np.ndarray | None = None) -> None:
        """Send the actions of the batch the caller holds; ``env_id`` says whose each action is."""
        if self._reset_pending:
            raise ShoalError("call recv() for the batch of async_reset() before send()")
        action = np.asarray(action)
        if env_id is not None:
            ids = checked_ids(env_id, self.num_envs)
            held = self._held_ids()
            if len(ids) != len(held) or not np.array_equal(np.sort(ids), np.sort(held)):
                raise ShoalError(
                    f"send(action, env_id={ids.tolist()}): shoal steps the batch the last recv() returned "
                    f"(env_id {held.tolist()}); send actions for exactly those envs"
                )
            if action.shape[:1] != ids.shape:  # (reordered, extra actions would be dropped)
                raise ActionError(f"send(action, env_id={ids.tolist()}): one action per env of env_id, got an array "
                                  f"of shape {action.shape}")
            if not np.array_equal(ids, held):
                order = np.argsort(ids)[np.argsort(np.argsort(held))]
                action = action[order]
        self.envs.send(action)

    def recv(self, reset: bool = False, return_info: bool = True) -> Any:
        """The next batch, as a step's outputs (after :meth:`async_reset`: the reset envs, reward 0)."""
        if self._reset_pending:
            self._reset_pending = False
            obs, info = self.envs.reset_wait()
            return self._format.step(self._batch(obs, None, None, None, info))
        obs, reward, terminated, truncated, info = self.envs.recv()
        return self._format.step(self._batch(obs, reward, terminated, truncated, info))

    def step(self, action: Any, env_id: np.ndarray | None = None) -> Any:
        """:meth:`send` then :meth:`recv`."""
        self.send(action, env_id)
        return self.recv()

    def seed(self, seed: Any = None) -> None:
        warnings.warn("EnvPool's seed() is abandoned: pass seed to make(..., seed=seed)", stacklevel=2)

    def render(self, env_ids: Any = None) -> np.ndarray:
        """The frames of envs ``env_ids`` (env 0 if None), stacked; needs ``render_mode="rgb_array"``."""
        if self.render_mode != "rgb_array":  # (EnvPool's words; its "human" window is not provided)
            raise ConfigError(
                f"render_mode must be set to 'rgb_array' when creating this env (got {self.render_mode!r})")
        ids = [0] if env_ids is None else checked_ids(env_ids, self.num_envs).tolist()
        return self._book.render(self.envs, ids)

    def xla(self) -> Any:
        """EnvPool's ``handle, recv, send, step`` for ``jax.jit`` (:mod:`shoal.envpool.xla`; needs JAX)."""
        from shoal.envpool.xla import xla_functions

        return xla_functions(self)

    def close(self, **kwargs: Any) -> None:
        envs = getattr(self, "envs", None)  # (Gymnasium 1.1's VectorEnv.__del__ closes a pool its __init__ refused)
        if envs is not None:
            envs.close()
        self.closed = True

    def __len__(self) -> int:
        return self.num_envs

    def __enter__(self) -> EnvPool:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"EnvPool({self.env_type!r}, " + ", ".join(f"{k}={v!r}" for k, v in self.config.items()) + ")"

    __str__ = __repr__  # (as EnvPool's; gymnasium.Env's would name spec.id, which EnvPool's spec has not)

    # -- conversion ------------------------------------------------------------------------------------------------

    def _first_seed(self) -> Any:
        """The seed of the first reset; later resets go on with each env's generator (EnvPool seeds at make)."""
        if self._reset_once:
            return None
        self._reset_once = True
        return self._seed

    def _held_ids(self) -> np.ndarray:
        return np.asarray(self.envs._held_ids if self.is_async else self.all_env_ids)

    def _batch(self, obs: Any, reward: Any, terminated: Any, truncated: Any, info: dict,
               reset: np.ndarray | None = None) -> Batch:
        """The task's form of a batch shoal returned (``reward`` None: a reset's; ``reset``: the envs a partial
        reset started), each env of a full reset marked as reset where its first results come (in asynchronous
        mode, the batch of the reset or a later one)."""
        ids = np.asarray(info["env_id"], np.int32) if self.is_async else self.all_env_ids
        if reset is None and self._fresh_left:
            reset = ids[self._fresh[ids]]
            self._fresh[ids] = False
            self._fresh_left = bool(self._fresh.any())
        self._last_batch = batch = self._book.batch(obs, reward, terminated, truncated, info, ids, reset)
        return batch


class GymnasiumEnvPool(EnvPool, gymnasium.vector.VectorEnv, gymnasium.Env):  # type: ignore[misc]  # (its methods)
    """A pool that hands out Gymnasium's API: a Gymnasium ``VectorEnv`` and ``Env``, as EnvPool 1.2's pools are."""

    metadata = {"render_modes": ["rgb_array"], "autoreset_mode": AutoresetMode.NEXT_STEP}


def _first_seeds(seed: Any, env_seed: list[int], num_envs: int) -> Any:
    """Each env's seed for the first reset: ``env_seed``'s, or ``seed + i``, modulo 2**32. EnvPool takes int32 seeds
    (negative ones too) and seeds its envs' unsigned 32-bit generators with them; shoal's envs take seeds >= 0. (A
    seed that is no integer goes on as it came, for the reset's check to name it.)"""
    if env_seed:
        return [s % 2**32 for s in env_seed]
    number = integer(seed)
    return seed if number is None else [(number + i) % 2**32 for i in range(num_envs)]


def _seeds(seed: Any, env_seed: Any, num_envs: int) -> tuple[Any, list[int]]:
    """EnvPool's ``seed`` and ``env_seed`` (one seed per env; else env ``i`` starts from ``seed + i``), as EnvPool 1.2.5
    keeps them: a list or array as ``seed`` is ``env_seed``, and ``seed`` is then 0."""
    if integer(seed) is None and isinstance(seed, (list, tuple, np.ndarray)):
        if len(env_seed):
            raise ConfigError("pass either seed as an int or a list of seeds, or env_seed, not both")
        seed, env_seed = 0, seed
    listed = isinstance(env_seed, (list, tuple, np.ndarray)) and np.ndim(env_seed) == 1
    if not listed or len(env_seed) not in (0, num_envs):
        raise ConfigError(f"env_seed (or a list as seed) needs one seed per env ({num_envs}), got {env_seed!r}")
    seeds = [integer(s) for s in env_seed]
    if None in seeds:
        raise ConfigError(f"env_seed: expected integers, got {env_seed!r}")
    return seed, cast(list[int], seeds)


@functools.cache
def pool_class(env_type: str) -> type[EnvPool]:
    """The class of a pool of ``env_type``, that of the API it hands out: :class:`GymnasiumEnvPool` (``"gymnasium"``;
    ``"gym"`` where the installed gym's API is Gymnasium's, from gym 0.26); a ``gym.Env`` before gym 0.26 (as
    EnvPool's gym pools were then); a ``dm_env.Environment`` with EnvPool's ``observation_spec()`` and
    ``action_spec()`` for ``"dm"``. (gym and dm_env are imported only for their types; where one is missing, the
    plain :class:`EnvPool`, whose format refuses the pool and names the package.)"""
    if env_type == "gymnasium":
        return GymnasiumEnvPool
    if env_type == "gym":
        try:
            import gym
        except ImportError:
            return EnvPool
        return type("GymEnvPool", (EnvPool, gym.Env), {}) if old_gym_api(gym) else GymnasiumEnvPool
    try:
        import dm_env
    except ImportError:
        return EnvPool

    class DMEnvPool(EnvPool, dm_env.Environment):  # type: ignore[misc]  # (EnvPool's reset and step)
        def observation_spec(self) -> Any:
            return self._format.obs_spec

        def action_spec(self) -> Any:
            return self._format.act_spec

    return DMEnvPool


def _masked_ids(options: dict[str, Any] | None, num_envs: int) -> np.ndarray | None:
    """The envs Gymnasium's ``options={"reset_mask": mask}`` resets (None: no mask), checked as EnvPool checks it: a
    flag per env (bools, or integers as bools), one set at least, and no other option."""
    options = options or {}
    others = sorted(set(options) - {"reset_mask"})
    if others:
        raise ResetArgumentError(f"Unsupported Gymnasium reset options for EnvPool: {others}")
    mask = options.get("reset_mask")
    if mask is None:
        return None
    flags = np.asarray(mask)
    if flags.shape != (num_envs,) or flags.dtype.kind not in "biu" or not flags.any():
        raise ResetArgumentError(f"options['reset_mask'] must be a bool array of shape ({num_envs},) with a True, got "
                                 f"{mask!r}")
    return np.flatnonzero(flags).astype(np.int32)


def checked_ids(env_id: Any, num_envs: int) -> np.ndarray:
    """``env_id`` checked: indices of envs of the pool, as EnvPool's int32."""
    ids = np.asarray(env_id).reshape(-1)
    if ids.dtype.kind not in "iu" or (ids.size and (ids.min() < 0 or ids.max() >= num_envs)):
        raise ConfigError(f"env_id must be env indices in [0, {num_envs}), got {env_id!r}")
    return ids.astype(np.int32)


def select(batch: Batch, ids: np.ndarray) -> Batch:
    """The rows of envs ``ids`` of a batch of every env (in env order), as EnvPool's partial reset returns."""
    if len(ids) == len(batch.env_id) and np.array_equal(ids, batch.env_id):
        return batch
    lost_life = None if batch.lost_life is None else batch.lost_life[ids]
    return Batch(_rows(batch.obs, ids), batch.reward[ids], batch.terminated[ids], batch.truncated[ids],
                 _rows(batch.info, ids), ids, batch.first[ids], lost_life)


def _rows(value: Any, ids: np.ndarray) -> Any:
    """The rows ``ids`` of a batch's value: an array, or a dict or tuple of them (structured observations)."""
    if isinstance(value, dict):
        return {k: _rows(v, ids) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(_rows(v, ids) for v in value)
    return value[ids]
