"""The default's worker count against every count, on cheap Gymnasium envs, in one run.

    python benchmarks/bench_workers.py [--seconds 1] [--rounds 2] [--envs 16 32 64 128 256]
                                       [--workloads dict cartpole] [--workers 2 4 8 16]

For each workload and env count: steps/s of the serial backend, of the default (``shoal.make(fns)``: the worker count
``shoal.vector.load.choose_workers`` picks from a timed step of one env) and of multiprocessing with each count in
``--workers`` that does not exceed the envs (the calling process stepping one share, as by default), interleaved
rounds, best window of each; then the count the default chose and each configuration over the best one. On a machine
with many cores this says whether the default's rule (fewer workers while a worker's share of a batch is under
``load.TINY_BATCH_S``) picks the count that runs fastest there; the README and ``benchmarks/RESULTS.md`` hold what it
measured.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from workloads import WORKLOADS, best_rate  # noqa: E402

import shoal  # noqa: E402
from shoal.bench.throughput import interleaved  # noqa: E402
from shoal.vector import load  # noqa: E402
from shoal.vector.cpus import usable_cores  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=2, help="rounds over every configuration; best one counts")
    parser.add_argument("--envs", type=int, nargs="+", default=[16, 32, 64, 128, 256])
    parser.add_argument("--workloads", nargs="+", default=["dict", "cartpole"], choices=list(WORKLOADS))
    parser.add_argument("--workers", type=int, nargs="+", default=[2, 4, 8, 16])
    args = parser.parse_args()
    print(f"{usable_cores()} usable cores")
    for workload in args.workloads:
        fn = WORKLOADS[workload]
        step = load.step_seconds(fn)
        print(f"{workload}: one env's step {'?' if step is None else f'{step * 1e6:.2f}'} us (as the default times it)")
        for n in args.envs:
            fns, chosen = [fn] * n, set()

            def default(fns=fns, chosen=chosen):
                envs = shoal.make(fns)
                chosen.add(envs.num_workers)
                return envs

            builds = {"serial": lambda fns=fns: shoal.make(fns, backend="serial"), "default": default}
            for w in args.workers:
                if w <= n:
                    builds[f"mp {w}"] = lambda fns=fns, w=w: shoal.make(fns, num_workers=w)
            runs = {
                name: (lambda build=build: best_rate(build(), args.seconds, lambda envs: envs.reset(seed=0)))
                for name, build in builds.items()
            }
            rates = interleaved(runs, args.rounds)
            best = max(rates.values())
            row = "  ".join(f"{name} {sps:,.0f} ({sps / best:.2f})" for name, sps in rates.items())
            print(f"{workload} x {n}: default chose {sorted(chosen)} workers; {row}", flush=True)


if __name__ == "__main__":
    main()
