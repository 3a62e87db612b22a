"""The vector env of PettingZoo envs: agents as rows, behind the same Gymnasium ``VectorEnv`` API."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Hashable, Sequence

import numpy as np
from gymnasium import Space

from shoal.errors import ActionError, ConfigError, ResetArgumentError
from shoal.multiagent.engine import EXTRAS, PettingZooEngineFactory, as_parallel
from shoal.multiagent.rows import AgentRows
from shoal.vector.base import VectorEnv
from shoal.vector.checks import check_reset_mask, check_seeds, first_split_row

if TYPE_CHECKING:
    from shoal.batch import BatchEngineFactory


class MultiAgentVectorEnv(VectorEnv):
    """``num_envs`` PettingZoo envs as one batch of ``num_envs * len(possible_agents)`` rows, one per agent.

    Build one with :func:`shoal.make` given a callable returning a PettingZoo ``ParallelEnv`` (or an ``AECEnv``,
    converted). Row ``e * A + k`` is agent ``possible_agents[k]`` of env ``e``; ``num_envs`` (Gymnasium's batch size)
    counts rows, :attr:`num_multiagent_envs` the PettingZoo envs. Every step's infos hold ``agent_mask`` (the row's
    agent is live), ``env_index`` and ``agent_index`` per row; the agents' own infos are in their rows, with
    Gymnasium's ``_key`` masks. See :mod:`shoal.multiagent` for the padding and episode rules.

    Example:
        >>> import shoal
        >>> from mpe2 import simple_spread_v3
        >>> envs = shoal.make(simple_spread_v3.parallel_env, 4, backend="serial")
        >>> obs, info = envs.reset(seed=0)
        >>> obs.shape, envs.possible_agents
        ((12, 18), ['agent_0', 'agent_1', 'agent_2'])
        >>> envs.close()
    """

    def __init__(self, factory: PettingZooEngineFactory | BatchEngineFactory, count: int, **options: Any) -> None:
        rows = factory.rows
        self.agent_rows = rows
        self.possible_agents = list(rows.agents)
        self.agents_per_env = rows.count
        self.num_multiagent_envs = count
        """How many PettingZoo envs (``num_envs`` counts their rows)."""
        self.row_env = np.repeat(np.arange(count), rows.count)
        """The env of each row."""
        self.row_agent = [rows.agents[k] for k in range(rows.count)] * count
        """The agent of each row."""
        limits = rows.discrete_limits()
        self._limits = None if limits is None else np.tile(limits, count)
        super().__init__(
            factory,
            num_envs=count * rows.count,
            single_observation_space=rows.observation_space,
            single_action_space=rows.action_space,
            extras=EXTRAS,
            rows_per_env=rows.count,
            **options,
        )
        space = rows.batch_action_space(self.batch_size // rows.count)  # (every batch: whole envs, rows in order)
        if space is not None:
            self.action_space = space

    def unflatten_agent(self, agent: Hashable, observations: np.ndarray) -> Any:
        """Observations of ``agent``'s rows back in its own space (see :meth:`AgentRows.unflatten`)."""
        return self.agent_rows.unflatten(agent, observations)

    def _seeds(self, seed: Any) -> list[int | None]:
        """One seed per env (an int ``s`` gives env ``e`` the seed ``s + e``), the same for each of its rows. A list
        has one seed per env, or one per row (what row-minded code such as SB3's ``seed()`` passes): then each env
        takes its first row's."""
        a = self.agents_per_env
        if a > 1 and isinstance(seed, (list, tuple, np.ndarray)) and len(seed) == self.num_envs:
            seed = list(check_seeds(seed, self.num_envs))[::a]
        per_env = check_seeds(seed, self.num_multiagent_envs)
        return [s for s in per_env for _ in range(self.agents_per_env)]

    def _reset_mask(self, mask: Any) -> np.ndarray:
        """A mask of envs (``num_multiagent_envs`` bools) or of rows that selects whole envs."""
        n, a = self.num_multiagent_envs, self.agents_per_env
        if a > 1 and isinstance(mask, np.ndarray) and mask.shape == (n,):
            return np.repeat(check_reset_mask(mask, n), a)
        mask = check_reset_mask(mask, self.num_envs)
        e = first_split_row(mask.reshape(n, a)) if a > 1 else None
        if e is not None:
            raise ResetArgumentError(
                f"`options['reset_mask']` selects some rows of env {e} (rows {e * a}-{e * a + a - 1}) but not all: a "
                f"reset resets a whole env; select all its rows, or pass one bool per env (shape ({n},))"
            )
        return mask

    def _send_sequences(self, ids: np.ndarray, values: np.ndarray, offsets: np.ndarray, gamma: float) -> None:
        raise ActionError(
            "action sequences are not supported on a multi-agent vector env (each env's agents step together): "
            "send one action per row"
        )

    def _check_env_actions(self, ids: np.ndarray, values: np.ndarray, offsets: np.ndarray | None) -> None:
        if self._limits is None:
            return
        bad = np.flatnonzero(np.asarray(values) >= self._limits[ids])
        if len(bad):
            row = int(ids[bad[0]])
            raise ActionError(
                f"actions: row {row} (env {row // self.agents_per_env}, agent {self.row_agent[row]!r}) got action "
                f"{values[bad[0]]}, outside that agent's {self.agent_rows.action_spaces[row % self.agents_per_env]}"
            )


def build(
    env_fns: Sequence[Callable[[], Any]],
    probe: Any,
    *,
    observation_mode: str | tuple[Space, Space] = "same",
    **options: Any,
) -> MultiAgentVectorEnv:
    """The vector env of ``shoal.make`` over PettingZoo env constructors; ``probe`` is an env made from
    ``env_fns[0]`` (its agents and spaces are everyone's)."""
    if observation_mode != "same":
        raise ConfigError(
            "observation_mode applies to single-agent Gymnasium envs; a PettingZoo env's rows share one space"
        )
    env = as_parallel(probe, "env 0")
    rows = AgentRows.of(env, "env 0")
    metadata = dict(getattr(env, "metadata", None) or {})
    return MultiAgentVectorEnv(
        PettingZooEngineFactory(list(env_fns), rows),
        len(env_fns),
        metadata=metadata,
        render_mode=getattr(env, "render_mode", None),
        **options,
    )
