"""shoal.pufferlib against PufferLib's own vector envs, the same calls on each side, in one run.

    python benchmarks/bench_pufferlib.py [--seconds 1] [--rounds 3] [--envs 8 16]
                                         [--workloads cartpole burn200us dict halfcheetah crowd spread]

Steps/s through PufferLib's ``step`` (zero actions; each configuration's best window over ``--rounds`` interleaved
rounds) of ``pufferlib.vector.make`` and ``shoal.pufferlib.make`` given the same creator (the env in PufferLib's
``GymnasiumPufferEnv``, or its ``PettingZooPufferEnv`` for the multi-agent ``crowd``, 16 agents as in
bench_multiagent, and ``spread``, MPE's simple_spread with 3 agents; their figures are agent-steps/s) and the same
arguments: ``Serial`` (PufferLib's own on both sides: ``shoal.pufferlib`` hands it out); ``Multiprocessing`` with a
worker per core, and with a worker per env (PufferLib's default, ``overwork=True``); two blocks of half the envs
(``batch_size=n/2``, a worker per core shared by them), where each ``step`` sends one block and returns the other;
and shoal's without ``num_workers`` (its default count). Then the ratio of shoal's best to PufferLib's best, per
workload and env count. Needs PufferLib (``pip install --no-deps pufferlib-core==3.0.23`` after torch).
"""

from __future__ import annotations

import functools
import os
import sys

import pufferlib.vector

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from multiagent_workloads import Crowd, spread  # noqa: E402
from workloads import WORKLOADS, arguments, best_rate, puffer_creator, side_by_side  # noqa: E402

import shoal.pufferlib  # noqa: E402
from shoal.vector.cpus import usable_cores  # noqa: E402


MULTIAGENT = {"crowd": functools.partial(Crowd, 16), "spread": spread}
WORKLOADS.update(MULTIAGENT)  # (this benchmark's choices: the shared ones and these)


def measure(envs, seconds: float) -> float:
    """Steps/s of ``envs`` (see :func:`workloads.best_rate`; ``num_envs`` is PufferLib's: the rows of a batch)."""
    return best_rate(envs, seconds, lambda envs: envs.reset(seed=0))


def configs(fn, n):
    creator = puffer_creator(fn, multiagent=fn in MULTIAGENT.values())

    cores = min(usable_cores(), n)
    settings = {
        "Serial": dict(backend="Serial"),
        f"Mp {cores} workers": dict(backend="Multiprocessing", num_workers=cores),
        f"Mp {n} workers": dict(backend="Multiprocessing", num_workers=n),
        "Mp 2 blocks": dict(backend="Multiprocessing", num_workers=cores, batch_size=n // 2),
    }
    for name, kwargs in settings.items():
        for side, make in (("shoal", shoal.pufferlib.make), ("pufferlib", pufferlib.vector.make)):
            yield side, f"{side} {name}", lambda make=make, kwargs=kwargs: make(creator, num_envs=n, overwork=True,
                                                                                 **kwargs)
    # without num_workers: shoal's default count (PufferLib's default is the worker per env above)
    yield "shoal", "shoal Mp default", lambda: shoal.pufferlib.make(creator, backend="Multiprocessing", num_envs=n)


def main() -> None:
    side_by_side(arguments(__doc__, [8, 16]), configs, measure, "pufferlib")


if __name__ == "__main__":
    main()
