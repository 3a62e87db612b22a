"""shoal's backends against Gymnasium's (and PufferLib's, when installed) vector envs, in one run.

    python benchmarks/bench_vector.py [--seconds 1] [--rounds 3] [--envs 8 16 64] [--workloads cartpole burn200us dict]

Prints steps/s of every configuration (its best window over ``--rounds`` interleaved rounds) and, per workload and
env count, the ratio of shoal's best configuration to the best peer configuration measured in the same run (absolute
figures drift on a shared machine; ratios hold).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import gymnasium as gym
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from workloads import WORKLOADS  # noqa: E402

import shoal  # noqa: E402
from shoal.bench.throughput import interleaved  # noqa: E402


def measure(envs, seconds: float, windows: int = 5) -> float:
    """Steps/s of ``envs`` (closed afterwards): the best of ``windows`` windows of ``seconds / windows`` each, after
    a warm-up of one window (like ``timeit``'s minimum: a spell of the shared machine's noise costs one window)."""
    envs.reset(seed=0)
    n = envs.num_envs
    actions = np.zeros(n, np.int64)
    best, window = 0.0, seconds / windows
    for w in range(windows + 1):
        steps, start = 0, time.perf_counter()
        while time.perf_counter() - start < window:
            envs.step(actions)
            steps += n
        if w:  # the first window warms up
            best = max(best, steps / (time.perf_counter() - start))
    envs.close()
    return best


def configs(fn, n):
    fns = [fn] * n
    yield "shoal", "serial", lambda: shoal.make(fns, backend="serial")
    yield "shoal", "default", lambda: shoal.make(fns)  # multiprocessing, inline; or serial (shoal.vector.load)
    yield "shoal", "mp 2 workers", lambda: shoal.make(fns, num_workers=2, inline=False)
    yield "peer", "gymnasium Sync", lambda: gym.vector.SyncVectorEnv(fns)
    yield "peer", "gymnasium Async", lambda: gym.vector.AsyncVectorEnv(fns)
    try:
        import pufferlib.vector  # noqa: F401
    except ImportError:
        return
    yield "peer", "pufferlib Serial", lambda: pufferlib.vector.make(fn, num_envs=n, backend=pufferlib.vector.Serial)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=3, help="rounds over every configuration; best one counts")
    parser.add_argument("--envs", type=int, nargs="+", default=[8, 16, 64])
    parser.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=list(WORKLOADS))
    args = parser.parse_args()
    print(f"{'workload':10s} {'envs':>4s}  {'config':18s} {'steps/s (best of ' + str(args.rounds) + ')':>22s}")
    summary = []
    for workload in args.workloads:
        for n in args.envs:
            runs = {
                (side, name): (lambda build=build: measure(build(), args.seconds))
                for side, name, build in configs(WORKLOADS[workload], n)
            }
            rates = interleaved(runs, args.rounds)
            best = {"shoal": (0.0, ""), "peer": (0.0, "")}
            for (side, name), sps in rates.items():
                print(f"{workload:10s} {n:4d}  {name:18s} {sps:22,.0f}", flush=True)
                best[side] = max(best[side], (sps, name))
            summary.append((workload, n, best["shoal"], best["peer"]))
    print("\nshoal best / peer best (same run; target >= 1.2)")
    for workload, n, (s, s_name), (p, p_name) in summary:
        print(f"{workload:10s} {n:4d}  {s / p:5.2f}x   ({s_name} {s:,.0f} vs {p_name} {p:,.0f})")

if __name__ == "__main__":
    main()
