"""The engine that hosts a batch-native env: one :class:`~shoal.batch.env.BatchEnv` object for a group of envs,
each env one of its instances; the outputs' checks, and the spaces such an env may have."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Sequence

import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from shoal.batch.env import BatchEnv, Outputs
from shoal.errors import ConfigError, EnvOutputError
from shoal.vector.buffers import Buffers
from shoal.vector.checks import first_split_row
from shoal.vector.commands import NoSeeds
from shoal.vector.engine import Engine, blame, env_error, run_of
from shoal.vector.heap import retain_freed_memory


@dataclass(frozen=True)
class BatchEngineFactory:
    """Builds the engine of a group of envs: one instance of ``cls`` for them all. Pickled into each worker."""

    cls: type[BatchEnv]
    kwargs: dict[str, Any] = field(default_factory=dict)
    rows: Any = None  # a multi-agent env's AgentRows (shoal.multiagent.rows): MultiAgentVectorEnv reads them

    actions_in_place: ClassVar[bool] = True
    """Its engines hand the env its actions read-only, so a large synchronous step may give the engines in the
    calling process rows of the caller's own batch instead of writing them into the buffers first
    (:meth:`shoal.vector.batches.Batches.send`)."""

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
