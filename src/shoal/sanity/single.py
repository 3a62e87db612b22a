"""The sanity envs one instance at a time, as plain Gymnasium envs (``gymnasium.make("shoal/Squared-v0")``), for
any vector env. Written apart from :mod:`shoal.sanity.native`, with the same random streams, so that the tests can
step the two side by side."""

from __future__ import annotations

from typing import Any, Sequence

import gymnasium
import numpy as np
from gymnasium import spaces

from shoal.batch import Streams
from shoal.sanity import rules

ONE = np.zeros(1, np.int64)  # the one stream of a Streams(1)


class _Single(gymnasium.Env):
    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self) -> None:
        self.rng = Streams(1)

    def _seed(self, seed: int | None) -> None:
        self.rng.seed(ONE, [seed])

    def _uniform(self) -> float:
        return float(self.rng.uniform(ONE)[0])

    def _integer(self, high: int) -> int:
        return int(self.rng.integers(ONE, high)[0])


class Squared(_Single):
    def __init__(self, distance: int = 2, num_targets: int = 4) -> None:
        super().__init__()
        self.distance, self.num_targets = rules.check_squared(distance, num_targets)
        side = 2 * self.distance + 1
        self.observation_space = spaces.Box(-1, 1, (side, side), np.float32)
        self.action_space = spaces.Discrete(8)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        self._seed(seed)
        cells = [tuple(cell) for cell in rules.perimeter(self.distance).tolist()]
        keys = [self._uniform() for _ in cells]
        order = sorted(range(len(cells)), key=lambda k: keys[k])  # sorted() is stable, as argsort(kind="stable")
        self.targets = {cells[k] for k in order[: self.num_targets]}
        self.row = self.col = self.distance
        self.tick = 0
        return self._obs(), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        d = self.distance
        dr, dc = rules.MOVES[int(action)]
        self.row, self.col = self.row + int(dr), self.col + int(dc)
        self.tick += 1
        reward = 0.0
        if self.tick % d == 0:  # a leg ends: scored where it stands
            if (self.row, self.col) in self.targets:
                self.targets.remove((self.row, self.col))
                reward = 1.0
            else:
                closest = min(max(abs(self.row - r), abs(self.col - c)) for r, c in self.targets)
                reward = 1.0 - closest / d
            self.row = self.col = d
        return self._obs(), reward, self.tick == d * self.num_targets, False, {}

    def _obs(self) -> np.ndarray:
        side = 2 * self.distance + 1
        grid = np.zeros((side, side), np.float32)
        for r, c in self.targets:
            grid[r, c] = 1.0
        grid[self.row, self.col] = -1.0
        return grid


class Password(_Single):
    def __init__(self, password: Sequence[int] = rules.PASSWORD) -> None:
        super().__init__()
        self.password = [int(b) for b in rules.check_password(password)]
        self.observation_space = spaces.Box(-1, 1, (len(self.password),), np.float32)
        self.action_space = spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        self.guesses: list[int] = []
        return self._obs(), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.guesses.append(int(action))
        done = len(self.guesses) == len(self.password)
        return self._obs(), float(done and self.guesses == self.password), done, False, {}

    def _obs(self) -> np.ndarray:
        obs = np.full(len(self.password), -1.0, np.float32)
        obs[: len(self.guesses)] = self.guesses
        return obs


class Stochastic(_Single):
    def __init__(self, p: float = 0.75, horizon: int = 16) -> None:
        super().__init__()
        self.p, self.horizon = rules.check_stochastic(p, horizon)
        self.observation_space = spaces.Box(0, 1, (1,), np.float32)
        self.action_space = spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        self.zeros = self.tick = 0
        return np.zeros(1, np.float32), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        if self.zeros > self.p * self.tick:  # more than p of the actions so far were 0: only 1 pays
            reward = self.p / (1 - self.p) if action == 1 else 0.0
        else:
            reward = 1.0 if action == 0 else 0.0
        self.zeros += int(action == 0)
        self.tick += 1
        return np.zeros(1, np.float32), reward, self.tick == self.horizon, False, {}


class Memory(_Single):
    def __init__(self, length: int = 2, delay: int = 1) -> None:
        super().__init__()
        self.length, self.delay = rules.check_memory(length, delay)
        self.observation_space = spaces.Box(-1, 1, (1,), np.float32)
        self.action_space = spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        self._seed(seed)
        self.bits = [self._integer(2) for _ in range(self.length)]
        self.tick = 0
        return self._obs(), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        recall = self.tick - self.length - self.delay
        reward = float(recall >= 0 and int(action) == self.bits[recall])
        self.tick += 1
        return self._obs(), reward, self.tick == 2 * self.length + self.delay, False, {}

    def _obs(self) -> np.ndarray:
        shown = 2.0 * self.bits[self.tick] - 1.0 if self.tick < self.length else 0.0
        return np.array([shown], np.float32)


class Multiagent(_Single):
    """Both agents in one Gymnasium env, for single-agent code: the observation holds their rows (``(2, 2)``, agent
    ``k``'s one-hot in row ``k``), the action is theirs (``MultiDiscrete([2, 2])``) and the reward is the mean of
    theirs. The multi-agent twin is :class:`shoal.sanity.parallel.MultiagentParallel`."""

    def __init__(self) -> None:
        super().__init__()
        self.observation_space = spaces.Box(0, 1, (2, 2), np.float32)
        self.action_space = spaces.MultiDiscrete([2, 2])

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        return np.eye(2, dtype=np.float32), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        reward = 0.5 * (int(action[0]) == 0) + 0.5 * (int(action[1]) == 1)
        return np.eye(2, dtype=np.float32), reward, True, False, {}


class Spaces(_Single):
    def __init__(self) -> None:
        super().__init__()
        self.observation_space = rules.SPACES_OBS
        self.action_space = rules.SPACES_ACTION

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        self._seed(seed)
        image = (np.array([self._uniform() for _ in range(25)]) * 2 - 1).astype(np.float32).reshape(5, 5)
        flat = np.array([self._integer(3) - 1 for _ in range(5)], np.int8)
        self.answer = (int(image.sum() > 0), int(flat.sum() > 0))
        return {"image": image, "flat": flat}, {}

    def step(self, action: dict) -> tuple[dict, float, bool, bool, dict]:
        reward = 0.5 * (int(action["image"]) == self.answer[0]) + 0.5 * (int(action["flat"]) == self.answer[1])
        obs = {"image": np.zeros((5, 5), np.float32), "flat": np.zeros(5, np.int8)}
        return obs, reward, True, False, {}


class Bandit(_Single):
    def __init__(self, means: Sequence[float] = rules.BANDIT_MEANS) -> None:
        super().__init__()
        self.means = [float(m) for m in rules.check_means(means)]
        self.observation_space = spaces.Box(0, 1, (1,), np.float32)
        self.action_space = spaces.Discrete(len(self.means))

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        self._seed(seed)
        return np.ones(1, np.float32), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        reward = float(self._uniform() < self.means[int(action)])
        return np.ones(1, np.float32), reward, True, False, {}
