"""EnvPool's API on shoal: ``from shoal import envpool`` in place of ``import envpool``.

``envpool.make("Breakout-v5", env_type="gymnasium", num_envs=8, episodic_life=True, reward_clip=True)`` takes
EnvPool's task ids, keyword names and defaults and returns a pool with its methods (``reset(env_id)``,
``step(action, env_id)``, ``async_reset``/``send``/``recv``), its outputs and its info keys (``env_id``,
``players``, ``elapsed_step``, and each task's own). As in EnvPool, ``observation_space``/``action_space`` are one
env's spaces, rewards are float32, and the ids of an asynchronous batch come in ``info["env_id"]``.

Two kinds of task:

- **Atari** (``"Pong-v5"``, ...) on shoal's multi-ROM engine (:mod:`shoal.envpool.atari`): observations
  ``(stack, h, w)``, channels first for RGB too; infos ``lives``, ``reward`` (unclipped), ``terminated`` (EnvPool's
  real game over, int32). ``episodic_life=True`` means what it means in EnvPool: a lost life ends the episode, and
  the next step plays the same game on (:class:`~shoal.AtariVectorEnv`'s ``life_loss_reset="continue"``). shoal's
  extension: ``task_id`` may be a list of task ids, one per env, to mix games in one pool (their action counts must
  agree, or pass ``full_action_space=True``). The README's conventions table lists where the emulation differs from
  EnvPool's (no-op counts, frames read at a life loss, how episodes are truncated).
- **EnvPool's tasks that Gymnasium has too** (``"CartPole-v1"``, ``"HalfCheetah-v5"``, ...;
  :mod:`shoal.envpool.gymnasium_tasks`): Gymnasium's env of that id, its spaces and infos, with EnvPool's keywords;
  the env's own keywords (``ctrl_cost_weight=...``) go to it. Under ``env_type="dm"`` the ``State`` holds the env's
  numeric infos after ``obs``, under Gymnasium's names.
"""

from __future__ import annotations

from typing import Any, Literal, Sequence

import gymnasium

from shoal.envpool import atari as _atari, gymnasium_tasks as _gymnasium
from shoal.envpool.atari import DEFAULTS
from shoal.envpool.formats import Players, State
from shoal.envpool.pool import Book, EnvPool, GymnasiumEnvPool, Spec, pool_class
from shoal.errors import ConfigError
from shoal.vector.base import VectorEnv

__all__ = ["DEFAULTS", "EnvPool", "GymnasiumEnvPool", "Players", "Spec", "State", "list_all_envs", "make", "make_dm",
           "make_gym", "make_gymnasium", "make_spec"]

EnvType = Literal["gymnasium", "gym", "dm"]

SHOAL_KEYWORDS = ("backend", "num_workers", "context", "daemon", "inline", "address", "render_mode")
"""shoal's own keywords, passed on to the vector env (``render_mode`` to the env)."""


def list_all_envs() -> list[str]:
    """The task ids :func:`make` takes: EnvPool's name of every ROM ale-py ships (``"Pong-v5"``, ...), and EnvPool's
    tasks that Gymnasium has too (:data:`~shoal.envpool.gymnasium_tasks.TASKS`)."""
    return _atari.atari_ids() + sorted(_gymnasium.TASKS)


def make(task_id: str | Sequence[str], env_type: EnvType = "gymnasium", **kwargs: Any) -> EnvPool:
    """An EnvPool-style pool on shoal.

    Args:
        task_id: EnvPool's id (``"Breakout-v5"``, ``"HalfCheetah-v5"``), or one Atari id per env (shoal's
            multi-ROM extension).
        env_type: ``"gymnasium"``, ``"gym"`` (the API of the ``gym`` package installed: 4-tuple steps before 0.26)
            or ``"dm"`` (``dm_env.TimeStep``).
        **kwargs: EnvPool's keywords (Atari: see :data:`DEFAULTS`; other tasks:
            :data:`~shoal.envpool.gymnasium_tasks.DEFAULTS` and the env's own), and shoal's ``backend``,
            ``num_workers``, ...

    Example:
        >>> import numpy as np
        >>> from shoal import envpool
        >>> envs = envpool.make("Pong-v5", env_type="gymnasium", num_envs=2, backend="serial")
        >>> obs, info = envs.reset()
        >>> obs.shape, sorted(info)
        ((2, 4, 84, 84), ['elapsed_step', 'env_id', 'lives', 'players', 'reward', 'terminated'])
        >>> obs, reward, terminated, truncated, info = envs.step(np.zeros(2, np.int32))
        >>> envs.close()
    """
    if env_type not in ("gymnasium", "gym", "dm"):
        raise ConfigError(f"env_type must be 'gymnasium', 'gym' or 'dm', got {env_type!r}")
    shoal_options = {k: kwargs.pop(k) for k in SHOAL_KEYWORDS if k in kwargs}
    envs: VectorEnv
    book: Book
    threshold = None  # (a Gymnasium task's: its registration's reward_threshold)
    if isinstance(task_id, str) and task_id in _gymnasium.TASKS:
        envs, settings, book = _gymnasium.make_task(task_id, kwargs, shoal_options, dm=env_type == "dm")
        threshold = gymnasium.spec(task_id).reward_threshold
    else:
        listed = [t for t in ([] if isinstance(task_id, str) else task_id) if t in _gymnasium.TASKS]
        if listed:
            raise ConfigError(f"a list of task ids mixes Atari games in one pool; {listed[0]!r} is one of EnvPool's "
                              f"Gymnasium tasks: pass its id alone (shoal.envpool.make({listed[0]!r}, num_envs=...))")
        unknown = sorted(set(kwargs) - set(DEFAULTS) - {"task"})
        if unknown:
            raise ConfigError(
                f"unknown keyword(s) {unknown} for an EnvPool Atari task; EnvPool's are {sorted(DEFAULTS)} and "
                f"shoal adds {list(SHOAL_KEYWORDS)}"
            )
        settings = {**DEFAULTS, **{k: v for k, v in kwargs.items() if k in DEFAULTS}, "task": kwargs.get("task")}
        envs, book = _atari.make_atari(task_id, settings, shoal_options)
        settings["task"] = envs.games[0]
    try:
        pool = pool_class(env_type)(envs, env_type, settings, book, threshold)
    except BaseException:
        envs.close()
        raise
    pool.render_mode = shoal_options.get("render_mode")
    return pool


def make_spec(task_id: str | Sequence[str], **kwargs: Any) -> Spec:
    """EnvPool's ``make_spec``: the spec (configuration, spaces) of the pool that :func:`make` would make with these
    keywords (``env_type`` too: the spaces are in its API), learned from a pool of one env made in this process (a
    list of Atari tasks: one env each)."""
    num_envs = kwargs.get("num_envs", 1)
    probe = {k: v for k, v in kwargs.items() if k not in SHOAL_KEYWORDS or k == "render_mode"}  # (in this process)
    probe["backend"] = "serial"
    if isinstance(task_id, str):
        probe.update(num_envs=1, batch_size=0)
    with make(task_id, **probe) as pool:
        spec = pool.spec
    batch_size = kwargs.get("batch_size") or num_envs
    return spec._replace(config=spec.config._replace(num_envs=num_envs, batch_size=batch_size))


def make_gymnasium(task_id: str | Sequence[str], **kwargs: Any) -> EnvPool:
    """:func:`make` with ``env_type="gymnasium"``."""
    return make(task_id, "gymnasium", **kwargs)


def make_gym(task_id: str | Sequence[str], **kwargs: Any) -> EnvPool:
    """:func:`make` with ``env_type="gym"``."""
    return make(task_id, "gym", **kwargs)


def make_dm(task_id: str | Sequence[str], **kwargs: Any) -> EnvPool:
    """:func:`make` with ``env_type="dm"``."""
    return make(task_id, "dm", **kwargs)
