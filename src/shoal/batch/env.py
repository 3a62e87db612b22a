"""The batch-native interface: :class:`BatchEnv`, the :class:`Outputs` it writes into, and the registry of ids
that :func:`shoal.make` looks up."""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar, Sequence

import numpy as np
from gymnasium import spaces

from shoal.errors import ConfigError


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
