"""The cost of Ray against multiprocessing on one machine, in one run.

    python benchmarks/bench_ray.py [--seconds 3] [--rounds 2]

Same vector env, same workers (one per core), random actions; steps/s of each backend (best of ``--rounds``) and
the ratio ray / multiprocessing, for an Atari workload (Breakout x 16, 84x84 gray, stack 4, frameskip 4) and a
cheap one (CartPole x 16), where the per-step round trip dominates.
"""

from __future__ import annotations

import argparse
import os

import numpy as np
import ray

import shoal
from shoal.bench.throughput import SETTINGS, time_steps


def rate(make, seconds: float) -> float:
    with make() as envs:
        envs.reset(seed=0)
        rng = np.random.default_rng(0)
        n = envs.single_action_space.n

        def step() -> int:
            envs.step(rng.integers(0, n, envs.num_envs))
            return envs.num_envs

        return time_steps(step, seconds)[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    ray.init(num_cpus=os.cpu_count(), include_dashboard=False, logging_level="WARNING")
    workers = os.cpu_count()
    workloads = {
        "Breakout x16": lambda backend: lambda: shoal.AtariVectorEnv(
            games=["breakout"] * 16, backend=backend, num_workers=workers, **SETTINGS),
        "CartPole x16": lambda backend: lambda: shoal.make("CartPole-v1", 16, backend=backend, num_workers=workers),
    }
    for name, make in workloads.items():
        best = {b: max(rate(make(b), args.seconds) for _ in range(args.rounds)) for b in ("multiprocessing", "ray")}
        print(f"{name:14s} multiprocessing {best['multiprocessing']:9,.0f} steps/s   ray {best['ray']:9,.0f} steps/s   "
              f"ray / multiprocessing {best['ray'] / best['multiprocessing']:.2f}x", flush=True)
    ray.shutdown()


if __name__ == "__main__":
    main()
