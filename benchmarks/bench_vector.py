"""shoal's backends against Gymnasium's (and PufferLib's, when installed) vector envs, in one run.

    python benchmarks/bench_vector.py [--seconds 1] [--rounds 3] [--envs 8 16 64] [--workloads cartpole burn200us dict]

Prints steps/s of every configuration (its best window over ``--rounds`` interleaved rounds) and, per workload and
env count, the ratio of shoal's best configuration to the best peer configuration measured in the same run (absolute
figures drift on a shared machine; ratios hold).
"""

from __future__ import annotations

import os
import sys

import gymnasium as gym

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from workloads import arguments, best_rate, side_by_side  # noqa: E402

import shoal  # noqa: E402


def measure(envs, seconds: float) -> float:
    """Steps/s of ``envs`` (see :func:`workloads.best_rate`)."""
    return best_rate(envs, seconds, lambda envs: envs.reset(seed=0))


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
    side_by_side(arguments(__doc__, [8, 16, 64]), configs, measure, "peer", target=">= 1.2")


if __name__ == "__main__":
    main()
