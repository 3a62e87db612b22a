"""Each sanity env's optimal return, a uniform random policy's, a scripted optimal policy, and :func:`evaluate`.

A policy is ``policy(obs, starts) -> actions`` for a batch: ``starts[j]`` says that ``obs[j]`` is the first
observation of an episode (a policy with memory forgets there). Returns are per episode, undiscounted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from shoal.sanity import rules

Policy = Callable[[Any, np.ndarray], Any]


@dataclass(frozen=True)
class SanityEnv:
    """One env of the suite with its default settings."""

    env_id: str
    checks: str
    """The mistake it is there to catch."""
    optimal: float
    """The best expected return (for Stochastic: of a policy of the observation, which never changes)."""
    random: float
    """The expected return of the uniform random policy (exact, or for Squared measured over 10^6 episodes)."""
    scripted: Callable[[], Policy]
    """Makes a policy that reaches ``optimal``."""
    budget: int
    """Env steps the example PPO (``examples/ppo_sanity.py``) trains for on this env."""


def stochastic_return(q: Any, p: float = 0.75, horizon: int = 16) -> Any:
    """Stochastic's expected return when action 0 is played with probability ``q`` every step (``q`` may be an
    array: one return each).

    At step ``t`` with ``Z`` zeros so far (``Z ~ Binomial(t, q)``) the env pays action 1 (``p / (1 - p)``) if
    ``Z > p t``, else action 0 (1)."""
    x = p / (1 - p)
    total = 0.0
    for t in range(horizon):
        over = sum(math.comb(t, z) * q**z * (1 - q) ** (t - z) for z in range(t + 1) if z > p * t)
        total += over * (1 - q) * x + (1 - over) * q
    return total


def stochastic_optimum(p: float = 0.75, horizon: int = 16) -> tuple[float, float]:
    """``(q, return)``: the probability of action 0 that maximizes :func:`stochastic_return`, to 1e-4 (each grid
    evaluated at once: ``q`` may be an array)."""
    grid = np.linspace(0, 1, 1001)
    best = grid[int(np.argmax(stochastic_return(grid, p, horizon)))]
    fine = np.linspace(max(best - 1e-3, 0), min(best + 1e-3, 1), 201)
    q = float(fine[int(np.argmax(stochastic_return(fine, p, horizon)))])
    return q, stochastic_return(q, p, horizon)


# -- scripted policies ---------------------------------------------------------------------------------------------


def squared_policy() -> Policy:
    """Walk to the closest target not hit yet (row-major first among ties), one king's move per step."""
    def act(obs: np.ndarray, starts: np.ndarray) -> np.ndarray:
        n, side, _ = obs.shape
        flat = obs.reshape(n, -1)
        me = np.argmax(flat == -1, axis=1)
        r, c = me // side, me % side
        rr, cc = np.indices((side, side))
        dist = np.maximum(np.abs(rr[None] - r[:, None, None]), np.abs(cc[None] - c[:, None, None]))
        dist = np.where(obs == 1, dist, 10 * side).reshape(n, -1)
        goal = np.argmin(dist, axis=1)
        step = np.stack([np.sign(goal // side - r), np.sign(goal % side - c)], axis=1)
        return np.array([_MOVE_INDEX[(int(a), int(b))] for a, b in step])
    return act


_MOVE_INDEX = {(int(dr), int(dc)): k for k, (dr, dc) in enumerate(rules.MOVES)}


def password_policy(password: tuple[int, ...] = rules.PASSWORD) -> Callable[[], Policy]:
    bits = np.asarray(password)

    def make() -> Policy:
        def act(obs: np.ndarray, starts: np.ndarray) -> np.ndarray:
            return bits[np.minimum((obs != -1).sum(axis=1), len(bits) - 1)]
        return act
    return make


def stochastic_policy() -> Policy:
    q, _ = stochastic_optimum()
    rng = np.random.default_rng(0)

    def act(obs: np.ndarray, starts: np.ndarray) -> np.ndarray:
        return (rng.random(len(obs)) >= q).astype(np.int64)  # 0 with probability q
    return act


def memory_policy(length: int = 2, delay: int = 1) -> Policy:
    """Remember the bits shown, then repeat them: the policy's memory is its own, per env."""
    shown: dict[int, list[int]] = {}
    ticks: dict[int, int] = {}

    def act(obs: np.ndarray, starts: np.ndarray) -> np.ndarray:
        actions = np.zeros(len(obs), np.int64)
        for j in range(len(obs)):
            if starts[j]:
                shown[j], ticks[j] = [], 0
            if ticks[j] < length:
                shown[j].append(int(obs[j, 0] > 0))
            recall = ticks[j] - length - delay
            if recall >= 0:
                actions[j] = shown[j][recall]
            ticks[j] += 1
        return actions
    return act


def multiagent_policy() -> Policy:
    return lambda obs, starts: obs.argmax(axis=1)  # each row plays its agent's index, read from its one-hot


def spaces_policy() -> Policy:
    def act(obs: dict, starts: np.ndarray) -> dict:
        n = len(obs["flat"])
        return {"image": (obs["image"].reshape(n, -1).sum(axis=1) > 0).astype(np.int64),
                "flat": (obs["flat"].astype(np.int64).sum(axis=1) > 0).astype(np.int64)}
    return act


def bandit_policy() -> Policy:
    best = int(np.argmax(rules.BANDIT_MEANS))
    return lambda obs, starts: np.full(len(obs), best)


_Q, _STOCHASTIC_BEST = stochastic_optimum()

SUITE: dict[str, SanityEnv] = {
    env.env_id: env
    for env in (
        SanityEnv("shoal/Squared-v0", "credit assignment over several steps; observations read right", 4.0,
                  1.226, squared_policy, 150_000),
        SanityEnv("shoal/Password-v0", "exploration: a policy that turns deterministic too early never sees a reward",
                  1.0, 1 / 2 ** len(rules.PASSWORD), password_policy(), 60_000),
        SanityEnv("shoal/Stochastic-v0", "a stochastic optimum: entropy and log-probabilities computed right",
                  _STOCHASTIC_BEST, stochastic_return(0.5), stochastic_policy, 100_000),
        SanityEnv("shoal/Memory-v0", "memory: observations before the current one reach the policy", 2.0, 1.0,
                  memory_policy, 60_000),
        SanityEnv("shoal/Multiagent-v0", "each agent's action gets its own reward", 1.0, 0.5, multiagent_policy,
                  20_000),
        SanityEnv("shoal/Spaces-v0", "structured spaces: every part of a Dict observation and action is used", 1.0,
                  0.5, spaces_policy, 40_000),
        SanityEnv("shoal/Bandit-v0", "noisy rewards: the best arm found from averages", max(rules.BANDIT_MEANS),
                  float(np.mean(rules.BANDIT_MEANS)), bandit_policy, 20_000),
    )
}


def evaluate(policy: Policy, env_id: str, episodes: int = 1000, num_envs: int = 256, seed: int = 0,
             env: Any = None) -> float:
    """The mean return of ``policy`` over ``episodes`` episodes of ``env_id`` (batch-native, serial; ``env``: a
    vector env to use instead, made with ``autoreset_mode="same_step"``)."""
    from shoal.make import make

    envs = env if env is not None else make(env_id, num_envs, backend="serial", autoreset_mode="same_step")
    try:
        n = envs.num_envs
        obs, _ = envs.reset(seed=seed)
        starts = np.ones(n, np.bool_)
        running = np.zeros(n)
        returns: list[float] = []
        while len(returns) < episodes:
            obs, reward, term, trunc, _ = envs.step(policy(obs, starts))
            running += reward
            starts = term | trunc
            returns += running[starts].tolist()
            running[starts] = 0
        return float(np.mean(returns[:episodes]))
    finally:
        if env is None:
            envs.close()
