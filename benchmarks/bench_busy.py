"""shoal's default configuration on a machine other processes keep busy, against the single-process loops, in one run.

    python benchmarks/bench_busy.py [--busy 0 2 4 8] [--envs 8 16] [--workloads cartpole dict burn200us]

For each number of busy processes (each a Python loop that never sleeps, started before the vector envs are made and
kept running while they step), measures shoal's default configuration (``shoal.make(fns)``), shoal's serial
backend, Gymnasium's ``SyncVectorEnv`` and ``AsyncVectorEnv``, in interleaved rounds, and prints shoal's default over
the better of serial and Gymnasium's Sync. Targets: >= 0.9 under load, >= 1.2 idle (issue 20).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import sys

import gymnasium as gym

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_vector import measure  # noqa: E402
from workloads import WORKLOADS  # noqa: E402

import shoal  # noqa: E402
from shoal.bench.throughput import interleaved  # noqa: E402


def spin() -> None:
    while True:
        pass


def configs(fn, n):
    fns = [fn] * n
    yield "shoal default", lambda: shoal.make(fns)
    yield "shoal serial", lambda: shoal.make(fns, backend="serial")
    yield "gymnasium Sync", lambda: gym.vector.SyncVectorEnv(fns)
    yield "gymnasium Async", lambda: gym.vector.AsyncVectorEnv(fns)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    cores = os.cpu_count() or 1
    parser.add_argument("--busy", type=int, nargs="+", default=[0, cores, 2 * cores, 4 * cores])
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--envs", type=int, nargs="+", default=[8, 16])
    parser.add_argument("--workloads", nargs="+", default=["cartpole", "dict", "burn200us"], choices=list(WORKLOADS))
    args = parser.parse_args()
    print(f"{cores} cores; busy = processes spinning beside the benchmark")
    print(f"{'busy':>4s} {'workload':10s} {'envs':>4s}  {'config':16s} {'steps/s':>10s}")
    summary = []
    for busy in args.busy:
        hogs = [mp.Process(target=spin, daemon=True) for _ in range(busy)]
        for hog in hogs:
            hog.start()
        try:
            for workload in args.workloads:
                for n in args.envs:
                    runs = {name: (lambda build=build: measure(build(), args.seconds))
                            for name, build in configs(WORKLOADS[workload], n)}
                    rates = interleaved(runs, args.rounds)
                    for name, sps in rates.items():
                        print(f"{busy:4d} {workload:10s} {n:4d}  {name:16s} {sps:10,.0f}", flush=True)
                    summary.append((busy, workload, n, rates))
        finally:
            for hog in hogs:
                hog.kill()
                hog.join()
    print("\nshoal default / best of (shoal serial, Gymnasium Sync); target >= 0.9 busy, >= 1.2 idle")
    for busy, workload, n, r in summary:
        floor = max(r["shoal serial"], r["gymnasium Sync"])
        print(f"busy {busy:2d}  {workload:10s} {n:4d}  {r['shoal default'] / floor:5.2f}x  "
              f"(default {r['shoal default']:,.0f}, serial {r['shoal serial']:,.0f}, "
              f"Sync {r['gymnasium Sync']:,.0f}, Async {r['gymnasium Async']:,.0f})")


if __name__ == "__main__":
    main()
