"""shoal's Stable-Baselines3 classes against SB3's own VecEnvs, in one run.

    python benchmarks/bench_sb3.py [--seconds 1] [--rounds 3] [--envs 8 16]
                                   [--workloads cartpole burn200us dict halfcheetah]

Steps/s through SB3's ``VecEnv.step`` (zero actions; each configuration's best window over ``--rounds`` interleaved
rounds) of SB3's ``DummyVecEnv`` and ``SubprocVecEnv`` (its default start method) and of their drop-ins
``shoal.sb3.DummyVecEnv`` and ``shoal.sb3.SubprocVecEnv``, then the ratio of shoal's best to SB3's best, per workload
and env count. Needs the ``sb3`` extra.
"""

from __future__ import annotations

import os
import sys

from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from workloads import arguments, best_rate, side_by_side  # noqa: E402

import shoal.sb3  # noqa: E402


def measure(envs, seconds: float) -> float:
    """Steps/s of ``envs`` (see :func:`workloads.best_rate`)."""
    return best_rate(envs, seconds, lambda envs: envs.reset())


def configs(fn, n):
    fns = [fn] * n
    yield "shoal", "shoal DummyVecEnv", lambda: shoal.sb3.DummyVecEnv(fns)
    yield "shoal", "shoal SubprocVecEnv", lambda: shoal.sb3.SubprocVecEnv(fns)
    yield "sb3", "SB3 DummyVecEnv", lambda: DummyVecEnv(fns)
    yield "sb3", "SB3 SubprocVecEnv", lambda: SubprocVecEnv(fns)


def main() -> None:
    side_by_side(arguments(__doc__, [8, 16]), configs, measure, "sb3")


if __name__ == "__main__":
    main()
