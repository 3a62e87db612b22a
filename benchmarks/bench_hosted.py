"""Gymnasium's own batch-native CartPole (``CartPoleVectorEnv``) hosted by shoal, against one of it, in one run.

    python benchmarks/bench_hosted.py [--rows 4096 65536] [--units 2 8] [--workloads plain episodes]
                                      [--seconds 1] [--rounds 3]

Gymnasium runs a batch-native vector env in one process: one ``CartPoleVectorEnv(num_envs=R)`` is its way to step
``R`` CartPoles. shoal hosts ``U`` of ``R / U`` sub-envs each (``shoal.make(partial(CartPoleVectorEnv,
num_envs=R // U), U)``), on its serial backend and on two worker processes (the calling process stepping one share).
The ``episodes`` workload wraps every vector env, Gymnasium's one and each of shoal's units, in Gymnasium's vector
``RecordEpisodeStatistics``, whose infos report the episodes that ended (zero actions end one every ~9 steps): each
unit's infos come back in Gymnasium's vector form. Prints steps/s (sub-env steps, zero actions; the best window of
the best round) and shoal's best over the one env.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys

from gymnasium.envs.classic_control.cartpole import CartPoleVectorEnv
from gymnasium.wrappers.vector import RecordEpisodeStatistics

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from workloads import best_rate  # noqa: E402

import shoal  # noqa: E402
from shoal.bench.throughput import interleaved  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[4096, 65536])
    parser.add_argument("--units", type=int, nargs="+", default=[2, 8])
    parser.add_argument("--workloads", nargs="+", choices=list(WORKLOADS), default=list(WORKLOADS))
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    summary = []
    print(f"{'rows':>6s}  {'workload':9s} {'config':34s} {'steps/s':>12s}")
    for workload in args.workloads:
        wrap = WORKLOADS[workload]
        for rows in args.rows:
            builds = {"gymnasium, one CartPoleVectorEnv": lambda rows=rows: wrap(CartPoleVectorEnv(num_envs=rows))}
            for units in args.units:
                fn = functools.partial(_unit, wrap, rows // units)
                builds[f"shoal serial, {units} units"] = lambda fn=fn, u=units: shoal.make(fn, u, backend="serial")
                builds[f"shoal mp 2, {units} units"] = lambda fn=fn, u=units: shoal.make(fn, u, num_workers=2)
            runs = {name: (lambda build=build: best_rate(build(), args.seconds, lambda e: e.reset(seed=0)))
                    for name, build in builds.items()}
            rates = interleaved(runs, args.rounds)
            for name, sps in rates.items():
                print(f"{rows:6d}  {workload:9s} {name:34s} {sps:12,.0f}", flush=True)
            one = rates.pop("gymnasium, one CartPoleVectorEnv")
            best = max(rates, key=rates.__getitem__)
            summary.append((rows, workload, rates[best] / one, best))
    print("\nshoal's best / one CartPoleVectorEnv (same run)")
    for rows, workload, ratio, best in summary:
        print(f"{rows:6d}  {workload:9s} {ratio:5.2f}x  ({best})")


WORKLOADS = {
    "plain": lambda env: env,
    "episodes": RecordEpisodeStatistics,  # (infos in Gymnasium's vector form whenever an episode ends)
}


def _unit(wrap, num_envs):
    """One of shoal's units: a ``CartPoleVectorEnv`` of ``num_envs``, wrapped as the workload wraps it."""
    return wrap(CartPoleVectorEnv(num_envs=num_envs))


if __name__ == "__main__":
    main()
