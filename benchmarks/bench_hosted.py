"""Gymnasium's own batch-native CartPole (``CartPoleVectorEnv``) hosted by shoal, against one of it, in one run.

    python benchmarks/bench_hosted.py [--rows 4096 65536] [--units 2 8] [--seconds 1] [--rounds 3]

Gymnasium runs a batch-native vector env in one process: one ``CartPoleVectorEnv(num_envs=R)`` is its way to step
``R`` CartPoles. shoal hosts ``U`` of ``R / U`` sub-envs each (``shoal.make(partial(CartPoleVectorEnv,
num_envs=R // U), U)``), on its serial backend and on two worker processes (the calling process stepping one share).
Prints steps/s (sub-env steps, zero actions; the best window of the best round) and shoal's best over the one env.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys

from gymnasium.envs.classic_control.cartpole import CartPoleVectorEnv

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from workloads import best_rate  # noqa: E402

import shoal  # noqa: E402
from shoal.bench.throughput import interleaved  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[4096, 65536])
    parser.add_argument("--units", type=int, nargs="+", default=[2, 8])
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    summary = []
    print(f"{'rows':>6s}  {'config':34s} {'steps/s':>12s}")
    for rows in args.rows:
        builds = {"gymnasium, one CartPoleVectorEnv": lambda rows=rows: CartPoleVectorEnv(num_envs=rows)}
        for units in args.units:
            fn = functools.partial(CartPoleVectorEnv, num_envs=rows // units)
            builds[f"shoal serial, {units} units"] = lambda fn=fn, u=units: shoal.make(fn, u, backend="serial")
            builds[f"shoal mp 2, {units} units"] = lambda fn=fn, u=units: shoal.make(fn, u, num_workers=2)
        runs = {name: (lambda build=build: best_rate(build(), args.seconds, lambda e: e.reset(seed=0)))
                for name, build in builds.items()}
        rates = interleaved(runs, args.rounds)
        for name, sps in rates.items():
            print(f"{rows:6d}  {name:34s} {sps:12,.0f}", flush=True)
        one = rates.pop("gymnasium, one CartPoleVectorEnv")
        best = max(rates, key=rates.__getitem__)
        summary.append((rows, rates[best] / one, best))
    print("\nshoal's best / one CartPoleVectorEnv (same run)")
    for rows, ratio, best in summary:
        print(f"{rows:6d}  {ratio:5.2f}x  ({best})")


if __name__ == "__main__":
    main()
