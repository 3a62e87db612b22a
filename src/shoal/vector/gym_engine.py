"""The engine for any Gymnasium env: a list of envs stepped one after another, results written in place."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
from gymnasium import Env, spaces
from gymnasium.vector import AutoresetMode
from gymnasium.spaces.utils import is_space_dtype_shape_equiv

from shoal.errors import ConfigError
from shoal.vector.buffers import Buffers
from shoal.vector.engine import Engine, blame, env_error


@dataclass(frozen=True)
class GymEngineFactory:
    """Builds the engine for a group of envs; pickled (with cloudpickle) into each worker."""

    env_fns: Sequence[Callable[[], Env]]
    single_observation_space: spaces.Space
    single_action_space: spaces.Space
    observation_mode: str = "same"

    def __call__(self, env_ids: range, buffers: Buffers, autoreset_mode: AutoresetMode) -> GymEngine:
        return GymEngine(self, env_ids, buffers, autoreset_mode)


class GymEngine(Engine):
    """Hosts the envs ``factory.env_fns[i]`` for ``i`` in ``env_ids``."""

    def __init__(
        self, factory: GymEngineFactory, env_ids: range, buffers: Buffers, autoreset_mode: AutoresetMode
    ) -> None:
        super().__init__(env_ids, buffers, autoreset_mode)
        self.envs: list[Env] = []
        for i in env_ids:
            with blame(i):
                self.envs.append(factory.env_fns[i]())
            self._check_spaces(i, self.envs[-1], factory)
        self._obs = buffers.spec.obs
        self._action = buffers.spec.action
        self._write_obs = self._obs.row_writer(buffers.obs)

    def _check_spaces(self, env_id: int, env: Env, factory: GymEngineFactory) -> None:
        obs_ok = (
            env.observation_space == factory.single_observation_space
            if factory.observation_mode == "same"
            else is_space_dtype_shape_equiv(env.observation_space, factory.single_observation_space)
        )
        if not obs_ok:
            raise ConfigError(
                f"env {env_id} has observation_space {env.observation_space}, expected "
                f"{factory.single_observation_space} (that of env 0). If the spaces differ only in their bounds, "
                f"pass observation_mode='different'."
            )
        if env.action_space != factory.single_action_space:
            raise ConfigError(
                f"env {env_id} has action_space {env.action_space}, expected {factory.single_action_space} "
                f"(that of env 0); every env of one vector env takes the same actions"
            )

    def _env(self, env_id: int) -> Env:
        return self.envs[env_id - self.env_ids.start]

    def _store(self, env_id: int, obs: Any) -> None:
        """Write a reset observation, checking that it fits (steps then write without checks)."""
        if not self._obs.structured and np.shape(obs) != self._obs.item_shape:
            raise ConfigError(
                f"env {env_id} returned an observation of shape {np.shape(obs)} but its observation_space "
                f"{self._obs.space} has shape {self._obs.item_shape}"
            )
        try:
            self._obs.write(self.buffers.obs, int(self.buffers.target_rows(env_id)), obs)
        except (ValueError, TypeError, KeyError, IndexError) as exc:
            raise ConfigError(
                f"env {env_id} returned an observation that does not fit its observation_space "
                f"{self._obs.space}: {exc}; got {obs!r:.200}"
            ) from exc

    def _reset_envs(self, ids: np.ndarray, seeds: Sequence[int | None], options: dict | None) -> list[dict]:
        infos = []
        for env_id, seed in zip(ids.tolist(), seeds):
            try:  # not blame(): a context manager costs more than the reset of a cheap env
                obs, info = self._env(env_id).reset(seed=seed, options=options)
            except Exception as exc:
                raise env_error(env_id, exc) from exc
            self._store(env_id, obs)
            infos.append(info)
        return infos

    def _step_envs(self, ids: np.ndarray, actions: np.ndarray) -> list[dict]:
        # The hot loop: a few Python operations per env beyond env.step itself (observation shapes were checked
        # when the envs were reset; try costs nothing until an env raises).
        b = self.buffers
        envs, first = self.envs, self.env_ids.start
        write_obs, rewards, terms, truncs = self._write_obs, b.rewards, b.terminations, b.truncations
        if self._action.structured:
            actions = [self._action.item(actions, row) for row in range(len(ids))]
        infos = []
        for env_id, row, action in zip(ids.tolist(), b.target_rows(ids).tolist(), actions):
            try:
                obs, reward, terminated, truncated, info = envs[env_id - first].step(action)
            except Exception as exc:
                raise env_error(env_id, exc) from exc
            write_obs(row, obs)
            rewards[env_id] = reward
            terms[env_id] = terminated
            truncs[env_id] = truncated
            infos.append(info)
        return infos

    def call(self, ids: np.ndarray, name: str, args: tuple, kwargs: dict) -> list[Any]:
        results = []
        for env_id in ids.tolist():
            with blame(env_id):
                attr = self._env(env_id).get_wrapper_attr(name)
                results.append(attr(*args, **kwargs) if callable(attr) else attr)
        return results

    def get_attr(self, ids: np.ndarray, name: str) -> list[Any]:
        results = []
        for env_id in ids.tolist():
            with blame(env_id):
                results.append(self._env(env_id).get_wrapper_attr(name))
        return results

    def set_attr(self, ids: np.ndarray, name: str, values: list[Any]) -> None:
        for env_id, value in zip(ids.tolist(), values):
            with blame(env_id):
                self._env(env_id).set_wrapper_attr(name, value)

    def close(self) -> None:
        for env_id, env in zip(self.env_ids, self.envs):
            with blame(env_id):
                env.close()
        self.envs = []
