"""The three APIs of an EnvPool pool (``env_type``): what a reset and a step return, and the spaces it shows."""

from __future__ import annotations

from collections import namedtuple
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, NamedTuple, cast

import numpy as np
from gymnasium import spaces

from shoal.errors import ConfigError

if TYPE_CHECKING:
    from shoal.envpool.pool import EnvPool


@dataclass
class Batch:
    """One batch as shoal returns it, with EnvPool's bookkeeping, before it takes the API's form."""

    obs: Any
    reward: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    info: dict[str, Any]
    """EnvPool's info dict: ``env_id``, ``players``, the task's own keys, ``elapsed_step``."""
    env_id: np.ndarray
    first: np.ndarray
    """The step was a reset (dm's ``StepType.FIRST``)."""
    lost_life: np.ndarray | None = None
    """Atari: the step lost a life (dm's discount with ``zero_discount_on_life_loss``); None for other tasks."""


def old_gym_api(gym: Any) -> bool:
    """Whether the installed ``gym``'s API is the one before 0.26 (4-tuple steps, resets without infos)."""
    return tuple(int(p) for p in gym.__version__.split(".")[:2] if p.isdigit()) < (0, 26)


class Gymnasium:
    """``(obs, info)`` resets and ``(obs, reward, terminated, truncated, info)`` steps."""

    return_info = True
    """Resets return infos (EnvPool's ``gym_reset_return_info``)."""

    def __init__(self, pool: EnvPool, obs_space: spaces.Space, action_space: spaces.Space,
                 settings: dict[str, Any]) -> None:
        if settings["gym_reset_return_info"] is False:
            raise ConfigError("gym_reset_return_info=False: a Gymnasium reset always returns (obs, info)")
        self.observation_space: Any = obs_space
        self.action_space: Any = action_space

    def reset(self, batch: Batch) -> Any:
        return batch.obs, batch.info

    def step(self, batch: Batch) -> Any:
        return batch.obs, batch.reward, batch.terminated, batch.truncated, batch.info


class Gym(Gymnasium):
    """The installed ``gym``'s API, as EnvPool chose it: from gym 0.26 as Gymnasium's; before, ``obs`` resets
    (``(obs, info)`` with ``gym_reset_return_info=True``) and ``(obs, reward, done, info)`` steps with
    ``info["TimeLimit.truncated"]``; spaces are ``gym.spaces``."""

    def __init__(self, pool: EnvPool, obs_space: spaces.Space, action_space: spaces.Space,
                 settings: dict[str, Any]) -> None:
        try:
            import gym
        except ImportError as exc:
            raise ConfigError('env_type="gym" needs the gym package: pip install "gym==0.23.1"') from exc
        self.new_api = not old_gym_api(gym)
        self.return_info = bool(settings["gym_reset_return_info"]) or self.new_api
        self.observation_space = gym_space(gym, obs_space)
        self.action_space = gym_space(gym, action_space)

    def reset(self, batch: Batch) -> Any:
        return (batch.obs, batch.info) if self.return_info else batch.obs

    def step(self, batch: Batch) -> Any:
        if self.new_api:
            return super().step(batch)
        info = dict(batch.info)
        info["TimeLimit.truncated"] = batch.truncated
        return batch.obs, batch.reward, batch.terminated | batch.truncated, info


def gym_space(gym: Any, space: spaces.Space) -> Any:
    """``space`` as the installed gym's space of the same kind (Box, Discrete, MultiDiscrete, MultiBinary, and
    Tuple/Dict of them)."""
    g = gym.spaces
    if isinstance(space, spaces.Box):
        return g.Box(space.low, space.high, space.shape, space.dtype)
    if isinstance(space, spaces.Discrete):
        return g.Discrete(int(space.n))
    if isinstance(space, spaces.MultiDiscrete):
        return g.MultiDiscrete(space.nvec)
    if isinstance(space, spaces.MultiBinary):
        return g.MultiBinary(space.n)
    if isinstance(space, spaces.Tuple):
        return g.Tuple(tuple(gym_space(gym, s) for s in space.spaces))
    if isinstance(space, spaces.Dict):
        return g.Dict({k: gym_space(gym, s) for k, s in space.spaces.items()})
    raise ConfigError(f'env_type="gym" shows spaces as gym.spaces; gym has no counterpart of {space}: use '
                      f'env_type="gymnasium"')


class DM:
    """``dm_env.TimeStep`` batches: step_type FIRST at a reset, LAST when the episode ends; the observation is
    EnvPool's ``State`` (env ids, obs, then the task's infos: :meth:`Book.dm_fields`); discount 0 at the end (and,
    in Atari pools, at a lost life with zero_discount_on_life_loss)."""

    def __init__(self, pool: EnvPool, obs_space: spaces.Space, action_space: spaces.Space,
                 settings: dict[str, Any]) -> None:
        try:
            import dm_env
            from dm_env import specs
        except ImportError as exc:
            raise ConfigError('env_type="dm" needs dm_env: pip install dm-env') from exc
        self.TimeStep = dm_env.TimeStep
        self.zero_on_life_loss = bool(settings.get("zero_discount_on_life_loss", False))
        self.observation_space = obs_space
        self.action_space = action_space
        fields = pool._book.dm_fields(specs)
        self.fields = tuple(fields)
        # (an Atari pool's is the State class below; another task's has that task's infos)
        self.State: Any = cast(Any, State if self.fields == State._fields[3:] else namedtuple(
            "State", ("env_id", "players", "obs", *self.fields)))
        i32 = np.iinfo(np.int32)
        env_id = specs.BoundedArray((), np.int32, i32.min, i32.max, "env_id")
        self.obs_spec = self.State(env_id, Players(env_id), _spec(specs, obs_space, "obs", obs_space.dtype),
                                   *fields.values())
        self.act_spec = _spec(specs, action_space, "action", np.int32)  # (the pool's observation_spec(), ...)

    return_info = True  # (as EnvPool says of its dm pools; a TimeStep holds no info)

    def reset(self, batch: Batch) -> Any:
        return self.step(batch)

    def step(self, batch: Batch) -> Any:
        done = batch.terminated | batch.truncated
        lost_life = batch.lost_life if self.zero_on_life_loss and batch.lost_life is not None else False
        ending = done | lost_life
        step_type = np.where(batch.first, 0, np.where(done, 2, 1)).astype(np.int32)
        i = batch.info
        state = self.State(i["env_id"], Players(i["env_id"]), batch.obs, *(i[k] for k in self.fields))
        return self.TimeStep(step_type, batch.reward, (~ending).astype(np.float32), state)


def _spec(specs: Any, space: spaces.Space, name: str, discrete_dtype: Any) -> Any:
    """dm_env's spec of one env's ``space`` (a Box or a Discrete; a Discrete's values of ``discrete_dtype``)."""
    if isinstance(space, spaces.Discrete) and space.start == 0:
        return specs.DiscreteArray(int(space.n), discrete_dtype, name)
    if isinstance(space, spaces.Box):
        low, high = space.low, space.high
        uniform = low.size and (low == low.flat[0]).all() and (high == high.flat[0]).all()
        return specs.BoundedArray(space.shape, space.dtype, low.flat[0] if uniform else low,
                                  high.flat[0] if uniform else high, name)
    raise ConfigError(f'env_type="dm" describes Box and Discrete spaces; {space} has no dm_env spec here: use '
                      f'env_type="gymnasium"')


class Players(NamedTuple):
    env_id: Any


class State(NamedTuple):
    """EnvPool's dm observation of an Atari task: the observation and the infos of each env."""

    env_id: Any
    players: Players
    obs: Any
    lives: Any
    reward: Any
    terminated: Any


FORMATS: dict[str, Callable[..., Any]] = {"gymnasium": Gymnasium, "gym": Gym, "dm": DM}
