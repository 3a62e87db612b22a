"""EnvPool's tasks that Gymnasium has too, through ``shoal.envpool`` against the real EnvPool, in one run.

    python benchmarks/bench_envpool_tasks.py [--tasks CartPole-v1 HalfCheetah-v5] [--envs 8] [--seconds 1]
                                             [--rounds 3]

The same calls on both: ``make(task, num_envs=N, num_threads=T)``, then ``step(actions)`` of random actions (both
pools synchronous; EnvPool with 1 and 2 threads, shoal with its default and 2). EnvPool runs its own C++
reimplementation of each task; ``shoal.envpool`` runs Gymnasium's Python env of the same id on shoal's workers, and
Gymnasium's ``SyncVectorEnv``/``AsyncVectorEnv`` of that env are shown for the cost of the env itself. Prints steps/s
(the best window of the best round) and the ratios of each side's best.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time
import warnings

import gymnasium as gym
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from shoal.bench.throughput import interleaved  # noqa: E402


def pool_rate(module: str, task: str, n: int, seconds: float, threads: int = 0) -> float:
    """Steps/s of a pool of ``task`` from ``module`` (``"envpool"`` or ``"shoal.envpool"``; ``threads``: its
    ``num_threads``, 0 its default), stepped with random actions."""
    envpool = importlib.import_module(module)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        envs = envpool.make(task, env_type="gymnasium", num_envs=n, num_threads=threads, seed=0)
    envs.reset()
    return _rate(envs, envs.action_space, n, seconds)


def gym_rate(kind: str, task: str, n: int, seconds: float) -> float:
    """Steps/s of Gymnasium's ``SyncVectorEnv`` or ``AsyncVectorEnv`` of ``task``, the same loop."""
    cls = gym.vector.SyncVectorEnv if kind == "sync" else gym.vector.AsyncVectorEnv
    envs = cls([lambda: gym.make(task)] * n)
    envs.reset(seed=0)
    return _rate(envs, envs.single_action_space, n, seconds)


def _rate(envs, space, n: int, seconds: float, windows: int = 5) -> float:
    """Steps/s of ``envs`` (reset, closed afterwards) stepped with random actions of one env's ``space``: the best of
    ``windows`` windows after a warm-up window."""
    rng = np.random.default_rng(0)
    actions = [np.stack([_sample(space, rng) for _ in range(n)]) for _ in range(64)]
    best, window = 0.0, seconds / windows
    for w in range(windows + 1):
        steps, start = 0, time.perf_counter()
        while time.perf_counter() - start < window:
            envs.step(actions[steps % 64])
            steps += 1
        if w:
            best = max(best, steps * n / (time.perf_counter() - start))
    envs.close()
    return best


def _sample(space, rng: np.random.Generator) -> np.ndarray:
    if isinstance(space, gym.spaces.Discrete):
        return np.int32(rng.integers(space.n))
    return rng.uniform(space.low, space.high).astype(np.float32)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="+", default=["CartPole-v1", "HalfCheetah-v5"])
    parser.add_argument("--envs", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    n, s = args.envs, args.seconds
    summary = []
    for task in args.tasks:
        runs = {
            ("envpool", "EnvPool, 1 thread"): lambda t=task: pool_rate("envpool", t, n, s, 1),
            ("envpool", "EnvPool, 2 threads"): lambda t=task: pool_rate("envpool", t, n, s, 2),
            ("shoal", "shoal.envpool, default"): lambda t=task: pool_rate("shoal.envpool", t, n, s),
            ("shoal", "shoal.envpool, num_threads=2"): lambda t=task: pool_rate("shoal.envpool", t, n, s, 2),
            ("gymnasium", "gymnasium Sync"): lambda t=task: gym_rate("sync", t, n, s),
            ("gymnasium", "gymnasium Async"): lambda t=task: gym_rate("async", t, n, s),
        }
        rates = interleaved(runs, args.rounds)
        for (_, name), rate in rates.items():
            print(f"{task:16s} x{n}  {name:32s} {rate:12,.0f} steps/s", flush=True)
        sides = ("envpool", "shoal", "gymnasium")
        best = {side: max(r for (of, _), r in rates.items() if of == side) for side in sides}
        summary.append((task, best["shoal"] / best["envpool"], best["shoal"] / best["gymnasium"]))
    print("\nshoal.envpool's best / EnvPool's best, and / Gymnasium's best vector env of the same env (same run)")
    for task, vs_envpool, vs_gym in summary:
        print(f"{task:16s} x{n}  {vs_envpool:5.2f}x EnvPool   {vs_gym:5.2f}x Gymnasium")


if __name__ == "__main__":
    main()
