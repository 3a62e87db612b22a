"""What a hand-off to a worker costs on this host, and where the default's worker choice stands against it.

    python benchmarks/handoff.py [--batches 10000] [--rounds 2] [--cases noop:2 dict:8 dict:16 dict:32 cartpole:16]

For each case, ``WORKLOAD:ENVS`` (a workload of ``workloads.py``; ``noop``, an env whose step does nothing; or
``burnX``, one whose step burns X µs of CPU), times ``--batches`` synchronous batches one by one on shoal's serial
backend, on the multiprocessing backend with two workers (one worker process beside the calling process, which steps
the other share, as by default) and on the default configuration (``shoal.make(fns)``), in ``--rounds`` alternating
rounds, and prints the median µs a batch (after 200 untimed batches), the probe's time of one env step and the
worker counts the default chose. ``noop:2``: two workers' batch minus serial's is what a hand-off costs beyond the
env work it moves (posting, meeting the worker, collecting its rows); ``burnX`` over X finds the share at which a
worker starts to pay, against the default's line for it, ``shoal.vector.load.TINY_BATCH_S``.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import time
from functools import partial

import gymnasium as gym
import numpy as np
from gymnasium import spaces

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from workloads import WORKLOADS, burn, zero_actions  # noqa: E402

import shoal  # noqa: E402
from shoal.vector.load import TINY_BATCH_S, step_seconds  # noqa: E402


class NoopEnv(gym.Env):
    """An env whose step does nothing (``burn_us``: or burns that much CPU): a batch of it is shoal's own cost."""

    observation_space = spaces.Box(-1, 1, (4,), np.float32)
    action_space = spaces.Discrete(2)
    obs = np.zeros(4, np.float32)

    def __init__(self, burn_us: float = 0.0) -> None:
        self.burn = burn_us / 1e6

    def reset(self, *, seed=None, options=None):
        return self.obs, {}

    def step(self, action):
        if self.burn:
            burn(self.burn)
        return self.obs, 0.0, False, False, {}


def batch_us(envs, batches: int) -> float:
    """The median µs of ``batches`` synchronous steps of ``envs`` (closed afterwards), after 200 untimed."""
    try:
        envs.reset(seed=0)
        actions = zero_actions(envs)
        for _ in range(200):
            envs.step(actions)
        times = np.empty(batches)
        for k in range(batches):
            before = time.perf_counter()
            envs.step(actions)
            times[k] = time.perf_counter() - before
        return float(np.median(times)) * 1e6
    finally:
        envs.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=10000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--cases", nargs="+", default=["noop:2", "dict:8", "dict:16", "dict:32", "cartpole:16"])
    args = parser.parse_args()
    workloads = {"noop": NoopEnv, **WORKLOADS}
    print(f"TINY_BATCH_S = {TINY_BATCH_S * 1e6:.1f} us; median us a batch over {args.batches} batches")
    print(f"{'case':12s} {'step us':>8s} {'chose':>8s} {'serial':>8s} {'2 workers':>10s} {'default':>8s}  serial/2w")
    for case in args.cases:
        name, n = case.split(":")
        burning = re.fullmatch(r"burn(\d+(?:\.\d*)?)", name)
        make_env = partial(NoopEnv, float(burning.group(1))) if burning else workloads[name]
        fns = [make_env] * int(n)
        step = step_seconds(make_env)
        chosen: list[int] = []

        def default(fns=fns, chosen=chosen):
            envs = shoal.make(fns)
            chosen.append(envs.num_workers)
            return envs

        configs = {
            "serial": lambda fns=fns: shoal.make(fns, backend="serial"),
            "2 workers": lambda fns=fns: shoal.make(fns, num_workers=2),
            "default": default,
        }
        rounds = {label: [] for label in configs}
        for _ in range(args.rounds):
            for label, build in configs.items():
                rounds[label].append(batch_us(build(), args.batches))
        med = {label: statistics.median(values) for label, values in rounds.items()}
        workers = "/".join(map(str, chosen))
        step_us = "?" if step is None else f"{step * 1e6:.2f}"
        print(f"{case:12s} {step_us:>8s} {workers:>8s} {med['serial']:8.1f} {med['2 workers']:10.1f} "
              f"{med['default']:8.1f}  {med['serial'] / med['2 workers']:.2f}x  "
              f"(rounds: {', '.join(f'{k} ' + '/'.join(f'{v:.1f}' for v in vs) for k, vs in rounds.items())})",
              flush=True)


if __name__ == "__main__":
    main()
