"""shoal.pufferlib against PufferLib's own vector envs, the same calls on each side, in one run.

    python benchmarks/bench_pufferlib.py [--seconds 1] [--rounds 3] [--envs 8 16]
                                         [--workloads cartpole burn200us dict halfcheetah crowd spread swarm swarm1k]

Steps/s through PufferLib's ``step`` (zero actions; each configuration's best window over ``--rounds`` interleaved
rounds) of ``pufferlib.vector.make`` and ``shoal.pufferlib.make`` given the same creator and the same arguments.
The creators: the env in PufferLib's ``GymnasiumPufferEnv``; its ``PettingZooPufferEnv`` for the multi-agent
``crowd`` (16 agents, as in bench_multiagent) and ``spread`` (MPE's simple_spread, 3 agents); ``swarm`` and
``swarm1k``, a native ``PufferEnv`` of 64 or 1024 agents stepped together in numpy, are their own creators. The
multi-agent figures are agent-steps/s. The configurations: ``Serial`` (PufferLib's own on both sides:
``shoal.pufferlib`` hands it out); ``Multiprocessing`` with a worker per core, and with a worker per env (PufferLib's
default, ``overwork=True``); two blocks of half the envs (``batch_size=n/2``, a worker per core shared by them),
where each ``step`` sends one block and returns the other; and shoal's without ``num_workers`` (its default count).
Then the ratio of shoal's best to PufferLib's best, per workload and env count. Needs PufferLib (``pip install
--no-deps pufferlib-core==3.0.23`` after torch).
"""

from __future__ import annotations

import functools
import os
import sys

import gymnasium as gym
import numpy as np
import pufferlib
import pufferlib.vector

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from multiagent_workloads import Crowd, spread  # noqa: E402
from workloads import WORKLOADS, arguments, best_rate, puffer_creator, side_by_side  # noqa: E402

import shoal.pufferlib  # noqa: E402
from shoal.vector.cpus import usable_cores  # noqa: E402


class Swarm(pufferlib.PufferEnv):
    """A native PufferEnv as PufferLib's Ocean envs are written, in numpy: ``agents`` on a plane, stepped together,
    each reset by the env when it strays; observations its position, velocity and the distance to the centre."""

    def __init__(self, buf=None, seed=0, agents=64):
        self.single_observation_space = gym.spaces.Box(-1e3, 1e3, (5,), np.float32)
        self.single_action_space = gym.spaces.Discrete(5)
        self.num_agents = agents
        super().__init__(buf)
        self.rng = np.random.default_rng(seed)
        self.moves = np.array([[0, 0], [1, 0], [-1, 0], [0, 1], [0, -1]], np.float32)

    def reset(self, seed=None):
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self.pos = self.rng.uniform(-1, 1, (self.num_agents, 2)).astype(np.float32)
        self.vel = np.zeros_like(self.pos)
        self._observe()
        return self.observations, []

    def step(self, actions):
        self.actions[:] = actions
        self.vel = 0.9 * self.vel + 0.1 * self.moves[self.actions]
        self.pos += self.vel
        distance = self._observe()
        self.rewards[:] = -distance
        self.terminals[:] = strayed = distance > 3
        if strayed.any():
            self.pos[strayed] = self.rng.uniform(-1, 1, (int(strayed.sum()), 2))
            self.vel[strayed] = 0
        return self.observations, self.rewards, self.terminals, self.truncations, []

    def _observe(self):
        distance = np.sqrt((self.pos**2).sum(axis=1))
        self.observations[:, :2], self.observations[:, 2:4], self.observations[:, 4] = self.pos, self.vel, distance
        return distance

    def close(self):
        pass


MULTIAGENT = {"crowd": functools.partial(Crowd, 16), "spread": spread}
NATIVE = {"swarm": Swarm, "swarm1k": functools.partial(Swarm, agents=1024)}
WORKLOADS.update(MULTIAGENT, **NATIVE)  # (this benchmark's choices: the shared ones and these)


def measure(envs, seconds: float) -> float:
    """Steps/s of ``envs`` (see :func:`workloads.best_rate`, which waits for PufferLib's workers after its
    ``close``: :func:`workloads.close`; ``num_envs`` is PufferLib's: the rows of a batch)."""
    return best_rate(envs, seconds, lambda envs: envs.reset(seed=0))


def configs(fn, n):
    native = fn in NATIVE.values()
    creator = fn if native else puffer_creator(fn, multiagent=fn in MULTIAGENT.values())

    cores = min(usable_cores(), n)
    settings = {
        "Serial": dict(backend="Serial"),
        f"Mp {cores} workers": dict(backend="Multiprocessing", num_workers=cores),
        f"Mp {n} workers": dict(backend="Multiprocessing", num_workers=n),
        "Mp 2 blocks": dict(backend="Multiprocessing", num_workers=cores, batch_size=n // 2),
    }
    for name, kwargs in settings.items():
        for side, make in (("shoal", shoal.pufferlib.make), ("pufferlib", pufferlib.vector.make)):
            yield side, f"{side} {name}", lambda make=make, kwargs=kwargs: make(creator, num_envs=n, overwork=True,
                                                                                 **kwargs)
    # without num_workers: shoal's default count (PufferLib's default is the worker per env above)
    yield "shoal", "shoal Mp default", lambda: shoal.pufferlib.make(creator, backend="Multiprocessing", num_envs=n)


def main() -> None:
    side_by_side(arguments(__doc__, [8, 16]), configs, measure, "pufferlib")


if __name__ == "__main__":
    main()
