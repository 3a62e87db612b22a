"""SuperSuit's ``concat_vec_envs_v1(..., base_class="stable_baselines3")`` on shoal: :class:`shoal.sb3.VecEnv`
with SuperSuit's rule that every agent is present, and the PettingZoo env's metadata."""

from __future__ import annotations

from typing import Any

import numpy as np

from shoal.sb3 import VecEnv
from shoal.supersuit import rows_infos
from shoal.vector.infos import InfoParts


class SB3VecEnv(VecEnv):
    """An SB3 ``VecEnv`` of a shoal vector env of PettingZoo envs (same-step autoreset), as SuperSuit's
    ``SB3VecEnvWrapper`` gives one: ``metadata`` is the PettingZoo env's (``envs.unwrapped.metadata["name"]``, as
    PettingZoo's tutorials read it), and the info of a row whose env was reset in the step holds the reset's info
    over the last step's (also in ``reset_infos``)."""

    def __init__(self, envs: Any, metadata: dict[str, Any]) -> None:
        super().__init__(envs)
        self.metadata = dict(metadata)

    def _per_env(
        self, parts: InfoParts, dones: np.ndarray | None
    ) -> tuple[list[dict[str, Any]], dict[int, tuple[Any, dict[str, Any]]]]:
        return rows_infos(parts, dones, self.venv_shoal)

    def step_wait(self) -> tuple[Any, np.ndarray, np.ndarray, list[dict]]:
        obs, reward, dones, infos = super().step_wait()
        for i in np.flatnonzero(dones).tolist():  # (each done row's env was reset: rows_infos checked it)
            infos[i].update(self.reset_infos[i])  # the reset's info over the last step's, as SuperSuit merges them
        return obs, reward, dones, infos
