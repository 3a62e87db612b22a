"""EnvPool's tasks that Gymnasium has too (classic control, toy text, Box2D, MuJoCo): the Gymnasium env of the same
id on any shoal backend, with EnvPool's keywords, seeding, outputs and info keys.

The env is Gymnasium's (its dynamics, spaces and keyword arguments); the pool is EnvPool's: rewards are float32,
``info`` holds ``env_id``, ``players`` and ``elapsed_step`` around the env's own numeric infos (one value per env,
without Gymnasium's ``_key`` masks), and env ``i`` of ``seed=42`` (EnvPool's default) starts from seed ``42 + i``.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Mapping
from typing import Any

import gymnasium
import numpy as np
from gymnasium.envs.registration import load_env_creator

import shoal
from shoal.envpool.formats import Batch
from shoal.envpool.pool import COMMON_DEFAULTS
from shoal.errors import ConfigError
from shoal.vector.checks import check_positive_int
from shoal.vector.base import VectorEnv

TASKS = (
    "CartPole-v0", "CartPole-v1", "Pendulum-v1", "MountainCar-v0", "MountainCarContinuous-v0", "Acrobot-v1",
    "FrozenLake-v1", "FrozenLake8x8-v1", "CliffWalking-v1", "CliffWalkingSlippery-v1", "Blackjack-v1",
    "CarRacing-v3", "BipedalWalker-v3", "BipedalWalkerHardcore-v3", "LunarLander-v3", "LunarLanderContinuous-v3",
    "Ant-v4", "Ant-v5", "HalfCheetah-v4", "HalfCheetah-v5", "Hopper-v4", "Hopper-v5", "Humanoid-v4", "Humanoid-v5",
    "HumanoidStandup-v4", "HumanoidStandup-v5", "InvertedDoublePendulum-v4", "InvertedDoublePendulum-v5",
    "InvertedPendulum-v4", "InvertedPendulum-v5", "Pusher-v5", "Reacher-v4", "Reacher-v5", "Swimmer-v4", "Swimmer-v5",
    "Walker2d-v4", "Walker2d-v5",
)
"""EnvPool's ids of the tasks whose Gymnasium env of the same id makes here (EnvPool 1.2's classic control, toy
text, Box2D and MuJoCo families; its v2/v3 MuJoCo tasks need mujoco-py in Gymnasium). Its other families (MiniGrid,
Procgen, DeepMind Control, ...) are left out: their Gymnasium counterparts, where there are some, differ from
EnvPool's in spaces or infos (MiniGrid's mission is text, EnvPool's 96 bytes beside a mission id)."""

DEFAULTS: dict[str, Any] = COMMON_DEFAULTS
"""EnvPool's keywords of these tasks: every task's; ``max_episode_steps`` is the task's (Gymnasium's registration
of the same id, as EnvPool's)."""


def make_task(task_id: str, kwargs: dict[str, Any], shoal_options: dict[str, Any], dm: bool = False) -> tuple[
        VectorEnv, dict[str, Any], GymnasiumBook]:
    """The vector env, EnvPool's settings and the bookkeeping of a pool of ``task_id``; ``kwargs``: EnvPool's
    keywords, and the env's own (``ctrl_cost_weight``, ...), which go to Gymnasium's env. ``dm``: the pool hands
    out ``dm_env`` TimeSteps, whose specs name the env's infos before the first batch (an env is made here, reset
    and stepped once, to learn them)."""
    spec = gymnasium.spec(task_id)
    env_kwargs = {k: v for k, v in kwargs.items() if k not in DEFAULTS and k != "max_episode_steps"}
    _check_env_keywords(task_id, spec, env_kwargs)
    limit = kwargs.get("max_episode_steps", spec.max_episode_steps)
    settings = {**DEFAULTS, **{k: v for k, v in kwargs.items() if k in DEFAULTS}, "max_episode_steps": limit}
    if "max_episode_steps" in kwargs:  # (else the registration's, which gymnasium.make applies)
        check_positive_int("max_episode_steps", limit)
        env_kwargs["max_episode_steps"] = limit
    if settings["max_num_players"] != 1:
        raise ConfigError(f"{task_id} has one player; max_num_players={settings['max_num_players']!r}")
    if settings["thread_affinity_offset"] != -1:
        raise ConfigError(f"thread_affinity_offset pins the workers of Atari pools; {task_id}'s are not pinned: "
                          f"leave it at -1, got {settings['thread_affinity_offset']!r}")
    num_envs, batch_size, threads = settings["num_envs"], settings["batch_size"], settings["num_threads"]
    check_positive_int("num_envs", num_envs)
    options = dict(shoal_options)
    if threads and options.get("num_workers", threads) != threads:
        raise ConfigError(f"num_threads={threads} and num_workers={options['num_workers']} disagree; pass one")
    if threads and options.get("backend", "multiprocessing") == "multiprocessing":
        options["num_workers"] = min(threads, num_envs)
    try:
        envs = shoal.make(task_id, num_envs, batch_size=batch_size or None, autoreset_mode="next_step", **options,
                          **env_kwargs)
    except TypeError as exc:  # (an env whose constructor passes **kwargs on, which the signature could not tell)
        if "unexpected keyword argument" not in str(exc):
            raise
        named = re.search(r"unexpected keyword argument '(\w+)'", str(exc))
        unknown = [named.group(1)] if named else sorted(env_kwargs)
        raise ConfigError(_unknown_keywords(task_id, spec, unknown)) from exc
    try:
        return envs, settings, GymnasiumBook(envs, _info_keys(task_id, env_kwargs) if dm else {})
    except BaseException:
        envs.close()
        raise


def _info_keys(task_id: str, env_kwargs: dict[str, Any]) -> dict[str, tuple[np.dtype, tuple[int, ...]]]:
    """The keys of the infos of ``task_id``'s env (a reset's, then a step's), each value's dtype and shape."""
    env = gymnasium.make(task_id, **env_kwargs)
    try:
        _, info = env.reset(seed=0)
        step_info = env.step(env.action_space.sample())[4]
    finally:
        env.close()
    keys = {}
    for key, value in {**info, **step_info}.items():
        array = np.asarray(value)
        if array.dtype.kind in "biuf":  # (numbers: what EnvPool's State holds)
            keys[key] = (array.dtype, array.shape)
    return keys


def _check_env_keywords(task_id: str, spec: Any, env_kwargs: dict[str, Any]) -> None:
    """Refuse, naming those it takes, keywords the task's Gymnasium env does not take (before any worker starts)."""
    if not env_kwargs:
        return
    parameters = _parameters(spec)
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return  # (the env's constructor says when it is built)
    unknown = sorted(set(env_kwargs) - set(parameters))
    if unknown:
        raise ConfigError(_unknown_keywords(task_id, spec, unknown))


def _parameters(spec: Any) -> Mapping[str, inspect.Parameter]:
    creator = load_env_creator(spec.entry_point) if isinstance(spec.entry_point, str) else spec.entry_point
    return inspect.signature(creator).parameters


def _unknown_keywords(task_id: str, spec: Any, unknown: list[str]) -> str:
    takes = sorted(k for k, p in _parameters(spec).items()
                   if k not in ("self", "render_mode") and p.kind is not inspect.Parameter.VAR_KEYWORD)
    return (f"unknown keyword(s) {unknown} for {task_id}: shoal.envpool runs Gymnasium's {task_id}, which takes "
            f"{takes} (and render_mode); EnvPool's own keywords are {sorted(DEFAULTS)} and max_episode_steps")


class GymnasiumBook:
    """EnvPool's bookkeeping of a Gymnasium task: ``elapsed_step`` (steps since the episode started), float32
    rewards, and the env's own infos in EnvPool's form."""

    def __init__(self, envs: VectorEnv, keys: dict[str, tuple[np.dtype, tuple[int, ...]]]) -> None:
        self.observation_space = envs.single_observation_space
        self.action_space = envs.single_action_space
        self._elapsed = np.zeros(envs.num_envs, np.int32)
        self._ended = np.zeros(envs.num_envs, np.bool_)  # the env's last step ended its episode
        self._keys = dict(keys)  # the env's info keys known so far (dm: all of them, from the start)

    def batch(self, obs: Any, reward: Any, terminated: Any, truncated: Any, info: dict[str, Any], ids: np.ndarray,
              reset: np.ndarray | None) -> Batch:
        n = len(ids)
        rows = slice(None) if n == len(self._elapsed) else ids  # (synchronous: every env, in order; views)
        if reward is None:  # a reset: a partial one leaves the others' bookkeeping as it is (their rows are dropped)
            first = np.isin(ids, reset) if reset is not None else np.ones(n, np.bool_)
            self._elapsed[ids[first]] = 0
            self._ended[ids[first]] = False
            reward = np.zeros(n, np.float32)
            terminated = truncated = np.zeros(n, np.bool_)
        else:  # envs just reset (asynchronous mode), or the autoreset step of an env whose episode had ended
            first = self._ended[rows].copy()
            if reset is not None:
                first |= np.isin(ids, reset)
            elapsed = self._elapsed[rows] + 1
            elapsed[first] = 0
            self._elapsed[rows] = elapsed
            self._ended[rows] = terminated | truncated
            reward = reward.astype(np.float32)
        own = self._own_infos(info, n) if info or self._keys else {}
        out_info = {"env_id": ids, "players": {"env_id": ids}, **own, "elapsed_step": self._elapsed[rows].copy()}
        return Batch(obs, reward, terminated, truncated, out_info, ids, first)

    def _own_infos(self, info: dict[str, Any], n: int) -> dict[str, Any]:
        """The env's infos without shoal's ``env_id`` and Gymnasium's masks (``_key`` beside ``key``). As in EnvPool,
        every batch has every key: one that no env of this batch returned is zeros, as the rows of envs that did not
        return it are in Gymnasium's vector form."""
        own = {k: v for k, v in info.items() if k != "env_id" and not (k.startswith("_") and k[1:] in info)}
        for key, value in own.items():
            if key not in self._keys and isinstance(value, np.ndarray):
                self._keys[key] = (value.dtype, value.shape[1:])
        missing = {k: np.zeros((n, *shape), dtype) for k, (dtype, shape) in self._keys.items() if k not in own}
        return {**own, **missing} if missing else own

    def render(self, envs: VectorEnv, ids: list[int]) -> np.ndarray:
        """The frames the envs render (``render_mode="rgb_array"``)."""
        return np.stack(envs.call_envs(ids, "render"))  # (those envs only)

    def dm_fields(self, specs: Any) -> dict[str, Any]:
        """The env's numeric infos (as Gymnasium's env names them)."""
        return {k: specs.Array(shape, dtype, k) for k, (dtype, shape) in self._keys.items()}


