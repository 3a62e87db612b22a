"""Instructions per step of serial vector envs, counted by valgrind's callgrind: shoal's serial backend against
Gymnasium's ``SyncVectorEnv`` and PufferLib's ``Serial`` (when pufferlib-core is installed).

    python benchmarks/instructions.py [--envs 8 64] [--workloads cartpole dict noop] [--steps 200 1200]

A count does not drift with the host as a time does (a configuration's count stays within a few percent from run to
run, whatever else the machine runs; hash seeds are fixed, addresses still move), so on a shared, noisy machine it
settles what a timing cannot: whether a change to the per-step path costs or saves work of more than that.
It is not a time: numpy's C loops run more instructions per cycle than the interpreter does, so two paths with the
same count may take different times. Each configuration runs twice under callgrind, for the two ``--steps``
counts after the same start; the difference over the difference in steps is its count per step (imports, making
the envs and the reset cancel out). Every run takes 30-90 s under valgrind; two run at once.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import gymnasium as gym
import numpy as np
from gymnasium import spaces

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from workloads import WORKLOADS, puffer_make  # noqa: E402


class NoopEnv(gym.Env):
    """An env that does nothing (a 4-float observation, 100-step episodes): what remains is the vector env's own
    work per step."""

    observation_space = spaces.Box(-1, 1, (4,), np.float32)
    action_space = spaces.Discrete(2)

    def __init__(self) -> None:
        self.obs, self.t = np.zeros(4, np.float32), 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self.obs, {}

    def step(self, action):
        self.t += 1
        return self.obs, 1.0, False, self.t >= 100, {}


ENVS = {**WORKLOADS, "noop": NoopEnv}
CONFIGS = ("shoal serial", "gymnasium Sync", "pufferlib Serial")


def build(config: str, fn, n: int):
    if config == "shoal serial":
        import shoal

        return shoal.make([fn] * n, backend="serial")
    if config == "gymnasium Sync":
        return gym.vector.SyncVectorEnv([fn] * n)
    return puffer_make(fn, n, backend="Serial")


def run(config: str, workload: str, n: int, steps: int) -> None:
    """The child's work: make the vector env, reset it, step it ``steps`` times with zero actions."""
    envs = build(config, ENVS[workload], n)
    envs.reset(seed=0)
    actions = np.zeros(n, np.int64)
    for _ in range(steps):
        envs.step(actions)


def counted(config: str, workload: str, n: int, steps: int) -> int:
    """Instructions callgrind counts for a child running :func:`run`."""
    out = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, __file__, "--run",
         config, workload, str(n), str(steps)],
        capture_output=True, text=True, check=True, env={**os.environ, "PYTHONHASHSEED": "0"},
    )
    found = re.search(r"Collected : (\d+)", out.stderr)
    if found is None:
        raise RuntimeError(f"no count in callgrind's output:\n{out.stderr[-2000:]}")
    return int(found.group(1))


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--run":
        config, workload, n, steps = sys.argv[2:6]
        run(config, workload, int(n), int(steps))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", type=int, nargs="+", default=[8, 64])
    parser.add_argument("--workloads", nargs="+", default=["cartpole", "dict", "noop"], choices=list(ENVS))
    parser.add_argument("--steps", type=int, nargs=2, default=[200, 1200])
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is not installed (apt-get install valgrind)")
    configs = [c for c in CONFIGS if c != "pufferlib Serial" or _has_pufferlib()]
    low, high = args.steps
    jobs = [(c, w, n, s) for w in args.workloads for n in args.envs for c in configs for s in (low, high)]
    with ThreadPoolExecutor(2) as pool:
        counts = dict(zip(jobs, pool.map(lambda job: counted(*job), jobs)))
    print(f"{'workload':10s} {'envs':>4s}  " + "  ".join(f"{c:>16s}" for c in configs) + "   (instructions per step)")
    for w in args.workloads:
        for n in args.envs:
            per = [(counts[(c, w, n, high)] - counts[(c, w, n, low)]) / (high - low) for c in configs]
            print(f"{w:10s} {n:4d}  " + "  ".join(f"{p:16,.0f}" for p in per)
                  + f"   shoal / gymnasium {per[0] / per[1]:.2f}"
                  + (f", shoal / pufferlib {per[0] / per[2]:.2f}" if len(per) > 2 else ""))


def _has_pufferlib() -> bool:
    import importlib.util

    return importlib.util.find_spec("pufferlib") is not None


if __name__ == "__main__":
    main()
