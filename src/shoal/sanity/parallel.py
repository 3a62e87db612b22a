"""The multi-agent sanity env one instance at a time, as a PettingZoo ``ParallelEnv`` (needs ``shoal[multiagent]``):
what :class:`shoal.sanity.native.Multiagent`'s rows must equal, and a sanity env for PettingZoo tools."""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv


class MultiagentParallel(ParallelEnv):
    """Agents ``agent_0`` and ``agent_1``; each sees its one-hot index and scores 1 for playing its own index; every
    episode is one step."""

    metadata = {"name": "shoal_multiagent_v0", "render_modes": []}
    possible_agents = ["agent_0", "agent_1"]

    def __init__(self) -> None:
        self.agents: list[str] = []

    def observation_space(self, agent: str) -> spaces.Space:
        return spaces.Box(0, 1, (2,), np.float32)

    def action_space(self, agent: str) -> spaces.Space:
        return spaces.Discrete(2)

    def _observations(self) -> dict[str, np.ndarray]:
        return {a: np.eye(2, dtype=np.float32)[k] for k, a in enumerate(self.possible_agents)}

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        self.agents = list(self.possible_agents)
        return self._observations(), {a: {} for a in self.agents}

    def step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        rewards = {a: float(int(actions[a]) == k) for k, a in enumerate(self.possible_agents)}
        observations = self._observations()
        self.agents = []
        done = {a: True for a in self.possible_agents}
        return observations, rewards, done, {a: False for a in self.possible_agents}, {a: {} for a in done}
