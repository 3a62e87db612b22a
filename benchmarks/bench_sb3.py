"""shoal's Stable-Baselines3 classes against SB3's own VecEnvs, in one run.

    python benchmarks/bench_sb3.py [--seconds 1] [--rounds 3] [--envs 8 16] [--workloads cartpole burn200us dict]

Steps/s through SB3's ``VecEnv.step`` (zero actions; each configuration's best window over ``--rounds`` interleaved
rounds) of SB3's ``DummyVecEnv`` and ``SubprocVecEnv`` (its default start method) and of their drop-ins
``shoal.sb3.DummyVecEnv`` and ``shoal.sb3.SubprocVecEnv``, then the ratio of shoal's best to SB3's best, per workload
and env count. Needs the ``sb3`` extra.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from workloads import WORKLOADS  # noqa: E402

import shoal.sb3  # noqa: E402
from shoal.bench.throughput import interleaved  # noqa: E402


def measure(vec, seconds: float, windows: int = 5) -> float:
    """Steps/s of SB3 VecEnv ``vec`` (closed afterwards): its best window of ``seconds / windows``, after one window
    of warm-up."""
    vec.reset()
    n = vec.num_envs
    actions = np.zeros(n, np.int64)
    best, window = 0.0, seconds / windows
    for w in range(windows + 1):
        steps, start = 0, time.perf_counter()
        while time.perf_counter() - start < window:
            vec.step(actions)
            steps += n
        if w:
            best = max(best, steps / (time.perf_counter() - start))
    vec.close()
    return best


def configs(fn, n):
    fns = [fn] * n
    yield "shoal", "shoal DummyVecEnv", lambda: shoal.sb3.DummyVecEnv(fns)
    yield "shoal", "shoal SubprocVecEnv", lambda: shoal.sb3.SubprocVecEnv(fns)
    yield "sb3", "SB3 DummyVecEnv", lambda: DummyVecEnv(fns)
    yield "sb3", "SB3 SubprocVecEnv", lambda: SubprocVecEnv(fns)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=3, help="rounds over every configuration; best one counts")
    parser.add_argument("--envs", type=int, nargs="+", default=[8, 16])
    parser.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=list(WORKLOADS))
    args = parser.parse_args()
    print(f"{'workload':10s} {'envs':>4s}  {'config':20s} {'steps/s (best of ' + str(args.rounds) + ')':>22s}")
    summary = []
    for workload in args.workloads:
        for n in args.envs:
            runs = {
                (side, name): (lambda build=build: measure(build(), args.seconds))
                for side, name, build in configs(WORKLOADS[workload], n)
            }
            rates = interleaved(runs, args.rounds)
            best = {"shoal": (0.0, ""), "sb3": (0.0, "")}
            for (side, name), sps in rates.items():
                print(f"{workload:10s} {n:4d}  {name:20s} {sps:22,.0f}", flush=True)
                best[side] = max(best[side], (sps, name))
            summary.append((workload, n, best["shoal"], best["sb3"]))
    print("\nshoal best / SB3 best (same run)")
    for workload, n, (s, s_name), (p, p_name) in summary:
        print(f"{workload:10s} {n:4d}  {s / p:5.2f}x   ({s_name} {s:,.0f} vs {p_name} {p:,.0f})")


if __name__ == "__main__":
    main()
