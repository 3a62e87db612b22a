"""Drop-in replacements for ``gymnasium.vector.SyncVectorEnv`` and ``AsyncVectorEnv``, with their signatures.

Change the import and keep the program: ``from shoal.vector import AsyncVectorEnv``. Arguments shoal cannot honour
raise :class:`~shoal.errors.ConfigError` instead of silently behaving differently.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Sequence

from gymnasium import Env, Space
from gymnasium.vector import AutoresetMode

from shoal.errors import ConfigError
from shoal.vector.base import VectorEnv


def _observation_mode(observation_mode: Any) -> str:
    if isinstance(observation_mode, tuple):
        raise ConfigError(
            "observation_mode=(batched space, single space) is not supported: shoal lays observations out from the "
            "envs' own space; use observation_mode='same' or 'different'"
        )
    return observation_mode


def _adopt(target: VectorEnv, **kwargs: Any) -> None:
    """Build with :func:`shoal.make` and take over the result's state (make returns a plain VectorEnv)."""
    from shoal.make import make  # shoal.make imports this package

    built = make(**kwargs)
    target.__dict__.update(built.__dict__)
    built.__dict__["closed"] = True  # the adopted backend now belongs to target


class SyncVectorEnv(VectorEnv):
    """``gymnasium.vector.SyncVectorEnv`` with shoal's serial backend (shared buffers, same results)."""

    def __init__(
        self,
        env_fns: Sequence[Callable[[], Env]],
        copy: bool = True,
        observation_mode: str | tuple[Space, Space] = "same",
        autoreset_mode: str | AutoresetMode = AutoresetMode.NEXT_STEP,
    ) -> None:
        self.closed = True
        _adopt(
            self,
            env=list(env_fns),
            backend="serial",
            copy=copy,
            observation_mode=_observation_mode(observation_mode),
            autoreset_mode=autoreset_mode,
        )


class AsyncVectorEnv(VectorEnv):
    """``gymnasium.vector.AsyncVectorEnv``, but several envs per worker process (one worker per core).

    ``shared_memory=False`` is accepted and ignored: shoal always moves observations through shared memory, which
    gives the same results; spaces that cannot live there (Text, Graph, custom) raise ConfigError either way.
    """

    def __init__(
        self,
        env_fns: Sequence[Callable[[], Env]],
        shared_memory: bool = True,
        copy: bool = True,
        context: str | None = None,
        daemon: bool = True,
        worker: Callable[..., None] | None = None,
        observation_mode: str | tuple[Space, Space] = "same",
        autoreset_mode: str | AutoresetMode = AutoresetMode.NEXT_STEP,
    ) -> None:
        self.closed = True
        if worker is not None:
            raise ConfigError(
                "AsyncVectorEnv(worker=...) cannot be honoured: shoal's workers host several envs and share one "
                "engine; put custom per-env logic in a gymnasium.Wrapper instead"
            )
        env_fns = list(env_fns)
        _adopt(
            self,
            env=env_fns,
            backend="multiprocessing",
            num_workers=min(len(env_fns), os.cpu_count() or 1),
            copy=copy,
            context=context,
            daemon=daemon,
            observation_mode=_observation_mode(observation_mode),
            autoreset_mode=autoreset_mode,
        )
