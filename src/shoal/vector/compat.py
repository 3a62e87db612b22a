"""Drop-in replacements for ``gymnasium.vector.SyncVectorEnv`` and ``AsyncVectorEnv``, with their signatures.

Change the import and keep the program: ``from shoal.vector import AsyncVectorEnv``. Arguments shoal cannot honour
raise :class:`~shoal.errors.ConfigError` instead of silently behaving differently. The classes only translate
arguments: everything else is the one :class:`~shoal.vector.base.VectorEnv`.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence, cast

from gymnasium import Env, Space, spaces
from gymnasium.vector import AutoresetMode

from shoal.errors import ConfigError
from shoal.vector.base import VectorEnv
from shoal.vector.gym_engine import GymEngine
from shoal.vector.cpus import usable_cores
from shoal.vector.serial import SerialTransport


def _adopt(target: VectorEnv, env_fns: list[Callable[[], Env]], caller: str, **kwargs: Any) -> None:
    """Build with :func:`shoal.make.build` and take over the result's state (it returns a plain VectorEnv)."""
    from shoal.make import build  # shoal.make imports this package

    built = build(env_fns, caller, **kwargs)
    built._finalizer.detach()  # the adopted backend now belongs to target, which takes over its finalizer
    target.__dict__.update(built.__dict__)
    target._own_backend()
    built.__dict__["closed"] = True


class SyncVectorEnv(VectorEnv):
    """``gymnasium.vector.SyncVectorEnv`` with shoal's serial backend (shared buffers, same results).

    ``envs`` is the list of sub-environments, as in Gymnasium (they live in this process).
    """

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
            list(env_fns),
            "SyncVectorEnv",
            backend="serial",
            copy=copy,
            observation_mode=observation_mode,
            autoreset_mode=autoreset_mode,
        )
        self.env_fns, self.observation_mode = env_fns, observation_mode  # Gymnasium's attributes, as given

    @property
    def envs(self) -> list[Env]:
        """The sub-environments, in order."""
        transport = self._transport
        assert isinstance(transport, SerialTransport)  # backend="serial", each group a GymEngine
        return [env for engine in transport.engines for env in cast(GymEngine, engine).envs]


class AsyncVectorEnv(VectorEnv):
    """``gymnasium.vector.AsyncVectorEnv``, but several envs per worker process (one worker per core).

    Observations always travel through shared memory except the leaves that have no fixed size, which come with
    each answer (Gymnasium's ``shared_memory=False`` way); as in Gymnasium, ``shared_memory=True`` (the default)
    refuses Graph, Sequence and custom spaces, which ``shared_memory=False`` accepts.
    """

    warn_close_pending = True

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
        fns = list(env_fns)
        _adopt(
            self,
            fns,
            "AsyncVectorEnv",
            backend="multiprocessing",
            num_workers=min(len(fns), usable_cores()),
            inline=False,  # every env in a worker: step_async/reset_async return at once, as Gymnasium's do
            copy=copy,
            context=context,
            daemon=daemon,
            observation_mode=observation_mode,
            autoreset_mode=autoreset_mode,
        )
        # Gymnasium's attributes, as given (``worker`` is None: another is refused above)
        self.env_fns, self.shared_memory, self.context, self.daemon = env_fns, shared_memory, context, daemon
        self.worker, self.observation_mode = worker, observation_mode
        if shared_memory:
            try:
                _refuse_as_gymnasium(self.single_observation_space)
            except BaseException:
                self.close()
                raise


def _refuse_as_gymnasium(space: Space) -> None:
    """Gymnasium's ``shared_memory=True`` refusals: Graph and Sequence (no fixed size), custom spaces."""
    if isinstance(space, spaces.Dict):
        for sub in space.spaces.values():
            _refuse_as_gymnasium(sub)
    elif isinstance(space, spaces.Tuple):
        for sub in space.spaces:
            _refuse_as_gymnasium(sub)
    elif isinstance(space, (spaces.Graph, spaces.Sequence)):
        raise TypeError(
            f"As {space} has a dynamic shape so its not possible to make a static shared memory. For "
            f"AsyncVectorEnv, disable `shared_memory` (shoal.make takes any space)."
        )
    elif not isinstance(space, (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary,
                                spaces.Text, spaces.OneOf)):
        raise ConfigError(
            f"Space of type `{type(space)}` cannot live in shared memory; as in Gymnasium, pass "
            f"shared_memory=False to AsyncVectorEnv (shoal.make takes any space)"
        )
