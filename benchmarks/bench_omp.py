"""A CPU model between steps: how OpenMP's waiting threads in PyTorch share the cores with shoal's workers.

    python benchmarks/bench_omp.py [--envs 2] [--workers W] [--model nature|small] [--threads T] [--rounds 6]
                                   [--seconds 3] [--settings default OMP_WAIT_POLICY=PASSIVE GOMP_SPINCOUNT=N ...]

PyTorch's CPU kernels run on an OpenMP thread pool (libgomp in the x86 wheels). By default a pool thread that
finishes its share of a kernel spins for a while before it sleeps, so while a vector env steps right after the
model, those threads hold the cores its workers need. ``OMP_WAIT_POLICY=PASSIVE`` makes them sleep at once
(``GOMP_SPINCOUNT=N``: after N spins). These are read when libgomp loads (with ``import torch``), so each setting
(``--settings``: ``default``, nothing set, or environment variables) runs in a process of its own, the settings in
turns, ``--rounds`` times. Each process steps Breakout x ``--envs`` synchronously (shoal's defaults), a CNN picking
every batch's actions from the observations it returned (``--model``, on ``--threads`` torch threads, default: one
per core, PyTorch's own default), and prints its steps/s over ``--seconds`` (after a second of warm-up) and the
model's time alone. The summary is each setting's median and its ratio to the first setting's.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

OMP_VARIABLES = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")


def child(args: argparse.Namespace) -> None:
    """One measurement, in this process: print ``{"steps_s": ..., "model_ms": ...}``."""
    import shoal
    from bench_spin import ModelStepper, cnn, model_ms
    from shoal.bench.throughput import SETTINGS as ATARI

    with shoal.AtariVectorEnv(game="breakout", num_envs=args.envs, num_workers=args.workers, **ATARI) as envs:
        net = cnn(args.model, envs.single_action_space.n, args.threads)
        step = ModelStepper(envs, net)
        start = time.perf_counter()
        while time.perf_counter() - start < 1.0:
            step()
        steps, start = 0, time.perf_counter()
        while time.perf_counter() - start < args.seconds:
            steps += step()
        rate = steps / (time.perf_counter() - start)
    print(json.dumps({"steps_s": rate, "model_ms": model_ms(net, args.envs)}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", type=int, default=2)
    parser.add_argument("--workers", type=int, help="default: as many as shoal chooses")
    parser.add_argument("--model", choices=["nature", "small"], default="nature")
    parser.add_argument("--threads", type=int, default=os.cpu_count(), help="the model's torch threads")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--settings", nargs="+", default=["default", "OMP_WAIT_POLICY=PASSIVE"],
                        help="'default' (none of the OpenMP variables set) or NAME=VALUE[,NAME=VALUE]")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args)
    here = os.path.dirname(os.path.abspath(__file__))
    command = [sys.executable, os.path.join(here, "bench_omp.py"), "--child", "--envs", str(args.envs), "--model",
               args.model, "--threads", str(args.threads), "--seconds", str(args.seconds)]
    if args.workers:
        command += ["--workers", str(args.workers)]
    results: dict[str, list[dict]] = {name: [] for name in args.settings}
    for round_ in range(args.rounds):
        for name in args.settings:
            env = {k: v for k, v in os.environ.items() if k not in OMP_VARIABLES}
            if name != "default":
                env.update(item.split("=", 1) for item in name.split(","))
            run = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
            results[name].append(json.loads(run.stdout.strip().splitlines()[-1]))
            print(f"round {round_ + 1}: {name:24s} {results[name][-1]['steps_s']:9,.0f} steps/s", flush=True)
    print(f"\nBreakout x {args.envs} synchronous, a CNN ({args.model}, {args.threads} torch threads) picking actions "
          f"between steps; medians of {args.rounds} rounds of {args.seconds:g} s")
    medians = {}
    for name, runs in results.items():
        medians[name] = float(np.median([r["steps_s"] for r in runs]))
        model = float(np.median([r["model_ms"] for r in runs]))
        low, high = min(r["steps_s"] for r in runs), max(r["steps_s"] for r in runs)
        print(f"  {name:24s} {medians[name]:9,.0f} steps/s ({low:,.0f}-{high:,.0f}); the model alone {model:.2f} ms")
    first = args.settings[0]
    for name in args.settings[1:]:
        print(f"  {name} / {first}: {medians[name] / medians[first]:.2f}x")


if __name__ == "__main__":
    main()
