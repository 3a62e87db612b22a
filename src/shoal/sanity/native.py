"""The sanity envs as batch-native envs: every instance stepped in a few numpy calls (see :mod:`shoal.sanity` for
what each env is and why). :mod:`shoal.sanity.single` holds the same envs written one instance at a time, and the
tests step the two side by side."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from gymnasium import spaces

from shoal.batch import BatchEnv, Outputs, Streams
from shoal.sanity import rules


class Squared(BatchEnv):
    """A grid of side ``2 * distance + 1``; each leg of ``distance`` moves starts at the centre and is scored where
    it ends: 1 on a target not hit yet, else 1 minus the L-inf distance to the closest such target over
    ``distance``. ``num_targets`` legs."""

    def __init__(self, num_envs: int, distance: int = 2, num_targets: int = 4) -> None:
        super().__init__(num_envs)
        self.distance, self.num_targets = rules.check_squared(distance, num_targets)
        side = 2 * distance + 1
        self.single_observation_space = spaces.Box(-1, 1, (side, side), np.float32)
        self.single_action_space = spaces.Discrete(8)
        self.cells = rules.perimeter(distance)  # (P, 2) row, column of each perimeter cell
        self.rng = Streams(num_envs)
        self.targets = np.zeros((num_envs, side, side), np.bool_)
        self.pos = np.zeros((num_envs, 2), np.int64)
        self.tick = np.zeros(num_envs, np.int64)

    def reset(self, ids: np.ndarray, seeds: Sequence[int | None], out: Outputs) -> None:
        self.rng.seed(ids, seeds)
        keys = np.stack([self.rng.uniform(ids) for _ in range(len(self.cells))], axis=1)  # one draw per cell
        chosen = self.cells[np.argsort(keys, axis=1, kind="stable")[:, : self.num_targets]]  # (n, k, 2)
        self.targets[ids] = False
        rows = np.repeat(ids, self.num_targets)
        self.targets[rows, chosen[..., 0].ravel(), chosen[..., 1].ravel()] = True
        self.pos[ids] = self.distance
        self.tick[ids] = 0
        self._observe(ids, out)

    def step(self, ids: np.ndarray, actions: Any, out: Outputs) -> None:
        d = self.distance
        pos = self.pos[ids] + rules.MOVES[np.asarray(actions, np.int64)]
        tick = self.tick[ids] + 1
        leg_over = tick % d == 0
        hit = leg_over & self.targets[ids, pos[:, 0], pos[:, 1]]
        targets = self.targets[ids]  # (n, side, side)
        r, c = np.indices(targets.shape[1:])
        dist = np.maximum(np.abs(r[None] - pos[:, 0, None, None]), np.abs(c[None] - pos[:, 1, None, None]))
        closest = np.where(targets, dist, 4 * d).reshape(len(ids), -1).min(axis=1)
        out.rewards[:] = np.where(leg_over, np.where(hit, 1.0, 1.0 - closest / d), 0.0)
        self.targets[ids[hit], pos[hit, 0], pos[hit, 1]] = False
        pos[leg_over] = d  # the next leg starts at the centre
        self.pos[ids] = pos
        self.tick[ids] = tick
        out.terminations[:] = tick == d * self.num_targets
        self._observe(ids, out)

    def _observe(self, ids: np.ndarray, out: Outputs) -> None:
        grid = self.targets[ids].astype(np.float32)
        grid[np.arange(len(ids)), self.pos[ids, 0], self.pos[ids, 1]] = -1.0
        out.obs[:] = grid


class Password(BatchEnv):
    """Enter a fixed binary password one bit per step; reward 1 at the end if every bit is right."""

    single_action_space = spaces.Discrete(2)

    def __init__(self, num_envs: int, password: Sequence[int] = rules.PASSWORD) -> None:
        super().__init__(num_envs)
        self.password = rules.check_password(password)
        self.single_observation_space = spaces.Box(-1, 1, (len(self.password),), np.float32)
        self.guesses = np.full((num_envs, len(self.password)), -1.0, np.float32)
        self.tick = np.zeros(num_envs, np.int64)

    def reset(self, ids: np.ndarray, seeds: Sequence[int | None], out: Outputs) -> None:
        self.guesses[ids] = -1.0
        self.tick[ids] = 0
        out.obs[:] = self.guesses[ids]

    def step(self, ids: np.ndarray, actions: Any, out: Outputs) -> None:
        tick = self.tick[ids]
        self.guesses[ids, tick] = actions
        self.tick[ids] = tick = tick + 1
        done = tick == len(self.password)
        out.rewards[:] = done & np.all(self.guesses[ids] == self.password, axis=1)
        out.terminations[:] = done
        out.obs[:] = self.guesses[ids]


class Stochastic(BatchEnv):
    """Action 0 pays 1 unless more than ``p`` of this episode's actions so far were 0, in which case only action 1
    pays (``p / (1 - p)``). The observation never changes: the best policy plays 0 with probability about ``p``."""

    single_observation_space = spaces.Box(0, 1, (1,), np.float32)
    single_action_space = spaces.Discrete(2)

    def __init__(self, num_envs: int, p: float = 0.75, horizon: int = 16) -> None:
        super().__init__(num_envs)
        self.p, self.horizon = rules.check_stochastic(p, horizon)
        self.zeros = np.zeros(num_envs, np.int64)
        self.tick = np.zeros(num_envs, np.int64)

    def reset(self, ids: np.ndarray, seeds: Sequence[int | None], out: Outputs) -> None:
        self.zeros[ids] = 0
        self.tick[ids] = 0
        out.obs[:] = 0

    def step(self, ids: np.ndarray, actions: Any, out: Outputs) -> None:
        zeros, tick = self.zeros[ids], self.tick[ids]
        expects_zero = zeros > self.p * tick  # more than p of the actions so far were 0
        a = np.asarray(actions)
        out.rewards[:] = np.where(expects_zero, (a == 1) * (self.p / (1 - self.p)), (a == 0) * 1.0)
        self.zeros[ids] = zeros + (a == 0)
        self.tick[ids] = tick = tick + 1
        out.terminations[:] = tick == self.horizon
        out.obs[:] = 0


class Memory(BatchEnv):
    """Watch ``length`` random bits (+1/-1, one per step), wait ``delay`` steps (observation 0), then repeat them
    (action = bit); reward 1 per bit repeated right."""

    single_observation_space = spaces.Box(-1, 1, (1,), np.float32)
    single_action_space = spaces.Discrete(2)

    def __init__(self, num_envs: int, length: int = 2, delay: int = 1) -> None:
        super().__init__(num_envs)
        self.length, self.delay = rules.check_memory(length, delay)
        self.rng = Streams(num_envs)
        self.bits = np.zeros((num_envs, length), np.int64)
        self.tick = np.zeros(num_envs, np.int64)

    def reset(self, ids: np.ndarray, seeds: Sequence[int | None], out: Outputs) -> None:
        self.rng.seed(ids, seeds)
        self.bits[ids] = np.stack([self.rng.integers(ids, 2) for _ in range(self.length)], axis=1)
        self.tick[ids] = 0
        self._observe(ids, out)

    def step(self, ids: np.ndarray, actions: Any, out: Outputs) -> None:
        tick = self.tick[ids]
        recall = tick - self.length - self.delay  # which bit this step repeats (negative: none yet)
        answering = recall >= 0
        wanted = self.bits[ids, np.clip(recall, 0, self.length - 1)]
        out.rewards[:] = answering & (np.asarray(actions) == wanted)
        self.tick[ids] = tick + 1
        out.terminations[:] = tick + 1 == 2 * self.length + self.delay
        self._observe(ids, out)

    def _observe(self, ids: np.ndarray, out: Outputs) -> None:
        tick = self.tick[ids]
        showing = tick < self.length
        bit = self.bits[ids, np.minimum(tick, self.length - 1)]
        out.obs[:, 0] = np.where(showing, 2.0 * bit - 1.0, 0.0)


class Multiagent(BatchEnv):
    """Two agents, one row each: each sees which agent it is (one-hot) and scores 1 for playing its own index
    (agent 0 plays 0, agent 1 plays 1); every episode is one step."""

    possible_agents = ("agent_0", "agent_1")
    single_observation_space = spaces.Box(0, 1, (2,), np.float32)
    single_action_space = spaces.Discrete(2)

    def reset(self, ids: np.ndarray, seeds: Sequence[int | None], out: Outputs) -> None:
        out.obs[:] = np.eye(2, dtype=np.float32)[ids % 2]

    def step(self, ids: np.ndarray, actions: Any, out: Outputs) -> None:
        agent = ids % 2
        out.rewards[:] = np.asarray(actions) == agent
        out.terminations[:] = True
        out.obs[:] = np.eye(2, dtype=np.float32)[agent]


class Spaces(BatchEnv):
    """Dict observation (a 5x5 image in [-1, 1), a flat int8 vector of -1/0/1) and Dict action (one bit per key):
    each bit scores 0.5 if it says whether its observation's sum is positive."""

    single_observation_space = rules.SPACES_OBS
    single_action_space = rules.SPACES_ACTION

    def __init__(self, num_envs: int) -> None:
        super().__init__(num_envs)
        self.rng = Streams(num_envs)
        self.answer = np.zeros((num_envs, 2), np.int64)  # image, flat

    def reset(self, ids: np.ndarray, seeds: Sequence[int | None], out: Outputs) -> None:
        self.rng.seed(ids, seeds)
        image = np.stack([self.rng.uniform(ids) for _ in range(25)], axis=1).reshape(-1, 5, 5) * 2 - 1
        flat = np.stack([self.rng.integers(ids, 3) for _ in range(5)], axis=1) - 1
        out.obs["image"][:] = image
        out.obs["flat"][:] = flat
        self.answer[ids, 0] = out.obs["image"].reshape(len(ids), -1).sum(axis=1) > 0
        self.answer[ids, 1] = flat.sum(axis=1) > 0

    def step(self, ids: np.ndarray, actions: Any, out: Outputs) -> None:
        answer = self.answer[ids]
        out.rewards[:] = 0.5 * (np.asarray(actions["image"]) == answer[:, 0]) + 0.5 * (
            np.asarray(actions["flat"]) == answer[:, 1])
        out.terminations[:] = True
        out.obs["image"][:] = 0
        out.obs["flat"][:] = 0


class Bandit(BatchEnv):
    """One pull of one of ``len(means)`` arms per episode; arm ``k`` pays 1 with probability ``means[k]``."""

    single_observation_space = spaces.Box(0, 1, (1,), np.float32)

    def __init__(self, num_envs: int, means: Sequence[float] = rules.BANDIT_MEANS) -> None:
        super().__init__(num_envs)
        self.means = rules.check_means(means)
        self.single_action_space = spaces.Discrete(len(self.means))
        self.rng = Streams(num_envs)

    def reset(self, ids: np.ndarray, seeds: Sequence[int | None], out: Outputs) -> None:
        self.rng.seed(ids, seeds)
        out.obs[:] = 1.0

    def step(self, ids: np.ndarray, actions: Any, out: Outputs) -> None:
        out.rewards[:] = self.rng.uniform(ids) < self.means[np.asarray(actions)]
        out.terminations[:] = True
        out.obs[:] = 1.0
