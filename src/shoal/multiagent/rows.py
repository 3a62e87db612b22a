"""How a multi-agent env's agents become rows of one batch: their order, one common record, the padding.

Env ``e`` owns rows ``e * A`` to ``e * A + A - 1``, ``A`` being ``len(possible_agents)``; row ``e * A + k`` is agent
``possible_agents[k]``, whether or not that agent is in the episode. Every row has the same observation and action
space, the *row spaces*:

* agents whose spaces are all equal: that space (any space shoal stores: Box, Dict, Tuple, ...);
* Box observations of one shape and dtype whose bounds differ: one Box with the widest bounds;
* any other mix of observation spaces that Gymnasium can flatten: each agent's observation flattened
  (``gymnasium.spaces.flatten``: a Discrete is one-hot) and padded with zeros to one Box of the longest length, in
  the widest dtype (seed 004's emulation); :meth:`AgentRows.unflatten` gives an agent's observations back in its own
  space;
* action spaces that differ: Discrete spaces of one ``start`` become the largest Discrete (an action an agent does not
  have is an :class:`~shoal.errors.ActionError` naming the env and agent); Box spaces become one flat Box of the
  longest length (an agent reads the first entries it needs); anything else is refused with what to change.

A row whose agent is absent this step (not yet joined, finished, or removed) is padding: observation zeros, reward 0,
``terminated`` True, ``truncated`` False, ``info["agent_mask"]`` False; its action is ignored.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Hashable

import numpy as np
from gymnasium import spaces

from shoal.errors import ConfigError
from shoal.spaces import is_flattenable


@dataclass(frozen=True)
class AgentRows:
    """The agents of one multi-agent env as rows: build with :meth:`of`; picklable (it goes to every worker)."""

    agents: tuple[Hashable, ...]
    """``possible_agents``, in the env's order: agent ``agents[k]`` is row ``k`` of every env."""
    observation_spaces: tuple[spaces.Space, ...]
    action_spaces: tuple[spaces.Space, ...]
    observation_space: spaces.Space
    """The space of one row's observation."""
    action_space: spaces.Space
    """The space of one row's action."""
    flat_observations: bool
    """Rows hold flattened, zero-padded observations (the agents' observation spaces differ in shape or kind)."""

    @classmethod
    def of(cls, env: Any, name: str) -> AgentRows:
        """The rows of PettingZoo (Parallel) env ``env``, called ``name`` in errors."""
        agents = tuple(getattr(env, "possible_agents", ()) or ())
        if not agents:
            raise ConfigError(f"{name} has no possible_agents; shoal gives each possible agent a row")
        if len(set(agents)) != len(agents):
            raise ConfigError(f"{name}.possible_agents lists an agent twice: {list(agents)}")
        obs_spaces = tuple(env.observation_space(a) for a in agents)
        act_spaces = tuple(env.action_space(a) for a in agents)
        obs_space, flat = _common_observation(agents, obs_spaces, name)
        return cls(agents, obs_spaces, act_spaces, obs_space, _common_action(agents, act_spaces, name), flat)

    @property
    def count(self) -> int:
        """Rows per env."""
        return len(self.agents)

    @property
    def _flat_row(self) -> spaces.Box:
        """The row space when observations are flattened (then always one flat Box)."""
        box = self.observation_space
        assert isinstance(box, spaces.Box) and box.shape is not None
        return box

    def observation(self, k: int, value: Any) -> Any:
        """Agent ``k``'s observation as its row stores it (checked against the agent's own space beforehand)."""
        if not self.flat_observations:
            return value
        flat = np.asarray(spaces.flatten(self.observation_spaces[k], value))  # (an array already: a flattenable space)
        row_space = self._flat_row
        row = np.zeros(row_space.shape, row_space.dtype)
        row[: len(flat)] = flat
        return row

    def flat_leaves(self, k: int, batch: np.ndarray) -> list[tuple] | None:
        """Where agent ``k``'s observation goes in ``batch``, rows of flattened observations, for the C writer
        (``shoal.vector._rows.RowWriter``): ``(path, sizes, view)`` for each leaf of its space, ``view`` the rows'
        entries its flattened value fills, shaped as the leaf, and ``(None, (), view)`` for the zeros after them.
        None where flattening is more than a copy into the rows' dtype (a Discrete or MultiDiscrete is one-hot)."""
        leaves: list[tuple] = []
        offset = 0
        for path, sizes, space in _copied_leaves(self.observation_spaces[k], (), ()):
            if space is None or np.dtype(space.dtype) != batch.dtype:
                return None
            n = int(np.prod(space.shape))
            view = batch[:, offset : offset + n].reshape(len(batch), *space.shape)
            if view.flags.owndata:  # (a reshape that had to copy: never for these slices, but a copy is no view)
                return None
            leaves.append((path, sizes, view))
            offset += n
        if offset < batch.shape[1]:
            leaves.append((None, (), batch[:, offset:]))
        return leaves

    def action(self, k: int, row: Any) -> Any:
        """The action agent ``k`` gets from its row's action."""
        space = self.action_spaces[k]
        if space == self.action_space:
            return row
        if isinstance(space, spaces.Discrete):
            return np.int64(row)
        flat = np.asarray(row)[: spaces.flatdim(space)]
        return flat.reshape(space.shape).astype(space.dtype, copy=False)

    def discrete_limits(self) -> np.ndarray | None:
        """One past the largest action of each agent (heterogeneous Discrete actions), else None."""
        same = all(s == self.action_space for s in self.action_spaces)
        if same or not isinstance(self.action_space, spaces.Discrete):
            return None
        discrete = [s for s in self.action_spaces if isinstance(s, spaces.Discrete)]  # all (_common_action)
        return np.array([int(s.start + s.n) for s in discrete])

    def batch_action_space(self, envs: int) -> spaces.Space | None:
        """The action space of ``envs`` envs' rows where the agents' action spaces differ, each row's its own agent's
        actions, so that its ``sample()`` is valid for every row: a ``MultiDiscrete`` of the agents' ``n``, or a
        ``Box`` with each agent's bounds in its entries (the rest, which the agent ignores, keep the rows' bounds).
        None where the agents' action spaces are all alike (then it is the rows' space batched)."""
        if all(s == self.action_space for s in self.action_spaces):
            return None
        if isinstance(self.action_space, spaces.Discrete):
            n = np.tile([int(s.n) for s in self.action_spaces if isinstance(s, spaces.Discrete)], envs)  # (all)
            return spaces.MultiDiscrete(n, start=np.full(len(n), int(self.action_space.start)))
        row = self.action_space
        assert isinstance(row, spaces.Box)  # (all Box: _common_action)
        low, high = np.tile(row.low, (self.count, 1)), np.tile(row.high, (self.count, 1))
        for k, space in enumerate(self.action_spaces):
            assert isinstance(space, spaces.Box)
            size = spaces.flatdim(space)
            low[k, :size], high[k, :size] = space.low.ravel(), space.high.ravel()
        return spaces.Box(np.tile(low, (envs, 1)), np.tile(high, (envs, 1)), dtype=row.dtype)

    def unflatten(self, agent: Hashable, observations: np.ndarray) -> Any:
        """Observations of rows of ``agent`` (a batch ``(n, D)`` as the env returned them) in the agent's own space:
        an array ``(n, *shape)`` for a Box, else a list of ``n`` values. Without flattening, the batch itself."""
        if agent not in self.agents:
            raise ConfigError(f"unknown agent {agent!r}; the agents are {list(self.agents)}")
        space = self.observation_spaces[self.agents.index(agent)]
        batch = np.asarray(observations)
        if not self.flat_observations:
            return batch
        width = self._flat_row.shape[0]
        if batch.ndim != 2 or batch.shape[1] != width:
            raise ConfigError(f"expected a batch of flat observations of shape (n, {width}), got {batch.shape}")
        size = spaces.flatdim(space)
        if isinstance(space, spaces.Box):
            return batch[:, :size].reshape(len(batch), *space.shape).astype(space.dtype, copy=False)
        return [spaces.unflatten(space, row[:size].astype(spaces.flatten_space(space).dtype)) for row in batch]


def _copied_leaves(space: spaces.Space, path: tuple, sizes: tuple) -> list[tuple]:
    """``(path, sizes, leaf space)`` for each leaf of ``space`` in the order ``gymnasium.spaces.flatten`` lays them
    out, the leaf space None where flattening it is not a copy of its values (Discrete, MultiDiscrete: one-hot)."""
    if isinstance(space, (spaces.Box, spaces.MultiBinary)):
        return [(path, sizes, space)]
    if isinstance(space, spaces.Dict):
        items: Any = space.spaces.items()
    elif isinstance(space, spaces.Tuple):
        items = enumerate(space.spaces)
    else:
        return [(path, sizes, None)]
    count = len(space.spaces)
    return [leaf for key, sub in items for leaf in _copied_leaves(sub, path + (key,), sizes + (count,))]


def _common_observation(
    agents: tuple, obs_spaces: tuple[spaces.Space, ...], name: str
) -> tuple[spaces.Space, bool]:
    first = obs_spaces[0]
    if all(s == first for s in obs_spaces):
        return first, False
    boxes = [s for s in obs_spaces if isinstance(s, spaces.Box)]
    if len(boxes) == len(obs_spaces) and all(s.shape == boxes[0].shape and s.dtype == boxes[0].dtype for s in boxes):
        low: np.ndarray = np.min([s.low for s in boxes], axis=0)  # (annotated: numpy 2.5's stubs infer bool arrays)
        high: np.ndarray = np.max([s.high for s in boxes], axis=0)
        return spaces.Box(low, high, boxes[0].shape, boxes[0].dtype), False
    flats: list[spaces.Box] = []
    for agent, space in zip(agents, obs_spaces):
        if not is_flattenable(space):
            raise ConfigError(
                f"{name}: the agents' observation spaces differ and agent {agent!r}'s ({space}) cannot be "
                f"flattened into a common row; give every agent the same observation space (e.g. SuperSuit's "
                f"pad_observations_v0) or a flattenable one (Box, Discrete, MultiDiscrete, MultiBinary, Dict/Tuple "
                f"of them)"
            )
        flat = spaces.flatten_space(space)
        assert isinstance(flat, spaces.Box)  # what a flattenable space flattens to
        flats.append(flat)
    size = max(f.shape[0] for f in flats)
    dtype = np.result_type(*[f.dtype for f in flats])
    low, high = np.zeros(size, dtype), np.zeros(size, dtype)
    for f in flats:  # the widest bounds over the agents that have each entry (the padding is 0)
        n = f.shape[0]
        low[:n] = np.minimum(low[:n], f.low)
        high[:n] = np.maximum(high[:n], f.high)
    return spaces.Box(low, high, (size,), dtype), True


def _common_action(agents: tuple, act_spaces: tuple[spaces.Space, ...], name: str) -> spaces.Space:
    first = act_spaces[0]
    if all(s == first for s in act_spaces):
        return first
    discrete = [s for s in act_spaces if isinstance(s, spaces.Discrete)]
    if len(discrete) == len(act_spaces) and all(s.start == discrete[0].start for s in discrete):
        return spaces.Discrete(max(int(s.n) for s in discrete), start=int(discrete[0].start))
    boxes = [s for s in act_spaces if isinstance(s, spaces.Box)]
    if len(boxes) == len(act_spaces):
        size = max(spaces.flatdim(s) for s in boxes)
        dtype = np.result_type(*[s.dtype for s in boxes])
        low, high = np.full(size, np.inf, dtype), np.full(size, -np.inf, dtype)
        for s in boxes:
            n = spaces.flatdim(s)
            low[:n] = np.minimum(low[:n], s.low.ravel())
            high[:n] = np.maximum(high[:n], s.high.ravel())
        low[np.isinf(low) & (low > 0)] = 0  # entries no agent has (cannot happen past the longest agent's)
        high[np.isinf(high) & (high < 0)] = 0
        return spaces.Box(low, high, (size,), dtype)
    kinds = ", ".join(f"{a!r}: {s}" for a, s in zip(agents, act_spaces))
    raise ConfigError(
        f"{name}: the agents' action spaces differ ({kinds}); shoal gives rows one action space when the agents' "
        f"spaces are all Discrete (with one start) or all Box. Give every agent the same action space (e.g. "
        f"SuperSuit's pad_action_space_v0)"
    )
