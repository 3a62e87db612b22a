"""The three APIs of an EnvPool pool (``env_type``): what a reset and a step return, and the spaces it shows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, NamedTuple

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


class Gymnasium:
    """``(obs, info)`` resets and ``(obs, reward, terminated, truncated, info)`` steps."""

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
        version = tuple(int(p) for p in gym.__version__.split(".")[:2] if p.isdigit())
        self.new_api = version >= (0, 26)
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
    """``dm_env.TimeStep`` batches of an Atari pool: step_type FIRST at a reset, LAST when the episode ends; the
    observation is EnvPool's ``State`` (obs and infos); discount 0 at the end (and at a lost life with
    zero_discount_on_life_loss)."""

    def __init__(self, pool: EnvPool, obs_space: spaces.Box, action_space: spaces.Discrete,
                 settings: dict[str, Any]) -> None:
        try:
            import dm_env
            from dm_env import specs
        except ImportError as exc:
            raise ConfigError('env_type="dm" needs dm_env: pip install dm-env') from exc
        self.TimeStep = dm_env.TimeStep
        self.zero_on_life_loss = bool(settings["zero_discount_on_life_loss"])
        self.observation_space = obs_space
        self.action_space = action_space
        i32 = np.iinfo(np.int32)
        scalar = lambda name: specs.BoundedArray((), np.int32, i32.min, i32.max, name)  # noqa: E731
        self.obs_spec = State(
            scalar("env_id"), Players(scalar("env_id")),
            specs.BoundedArray(obs_space.shape, np.uint8, 0, 255, "obs"), scalar("lives"),
            specs.Array((), np.float32, "reward"), specs.DiscreteArray(2, np.int32, "terminated"),
        )
        self.act_spec = specs.DiscreteArray(int(action_space.n), np.int32, "action")
        pool.observation_spec = lambda: self.obs_spec  # type: ignore[attr-defined]
        pool.action_spec = lambda: self.act_spec  # type: ignore[attr-defined]

    def reset(self, batch: Batch) -> Any:
        return self.step(batch)

    def step(self, batch: Batch) -> Any:
        done = batch.terminated | batch.truncated
        lost_life = batch.lost_life if self.zero_on_life_loss and batch.lost_life is not None else False
        ending = done | lost_life
        step_type = np.where(batch.first, 0, np.where(done, 2, 1)).astype(np.int32)
        i = batch.info
        state = State(i["env_id"], Players(i["env_id"]), batch.obs, i["lives"], i["reward"], i["terminated"])
        return self.TimeStep(step_type, batch.reward, (~ending).astype(np.float32), state)


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
