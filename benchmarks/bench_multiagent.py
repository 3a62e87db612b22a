"""Multi-agent (PettingZoo) envs through shoal against the route PettingZoo users take today, in one run.

    python benchmarks/bench_multiagent.py [--seconds 2] [--rounds 3] [--workloads crowd spread pistonball]

Workloads: ``crowd`` (a cheap synthetic env of 16 agents, benchmarks/multiagent_workloads.py, with its single-agent
twin), ``spread`` (MPE's simple_spread, 3 agents) and ``pistonball`` (butterfly, 20 agents, image observations). Per
workload: agent-steps/s (rows per step x steps/s) of shoal's serial and multiprocessing backends (2 workers, with
and without stepping a group in the calling process, and asynchronous batches of half the envs), of SuperSuit's
``pettingzoo_env_to_vec_env_v1`` + ``concat_vec_envs_v1`` in one process and with 2 processes (and the same call
through ``shoal.supersuit``, the drop-in, with its own ratio to SuperSuit's), and of PufferLib's
vector envs (serial, and 1 and 2 workers) over its PettingZoo wrapper when pufferlib-core is installed. Prints
shoal's best over the best peer, and for ``crowd`` the agent-steps/s of shoal on the many-agent env over shoal on
its single-agent twin (same walkers, one env each).
"""

from __future__ import annotations

import argparse
import importlib.util
import time
import warnings
from functools import partial

import numpy as np

import shoal
from shoal.bench.throughput import interleaved
from multiagent_workloads import Crowd, CrowdSingle, spread
from workloads import close, puffer_make

warnings.filterwarnings("ignore")  # SuperSuit and PettingZoo warn about deprecated attributes on every make


def pistonball():
    from pettingzoo.butterfly import pistonball_v6

    return pistonball_v6.parallel_env()


WORKLOADS = {  # name -> (env constructor, envs per vector env)
    "crowd": (partial(Crowd, 16), 8),
    "spread": (spread, 16),
    "pistonball": (pistonball, 4),
}


def measure(envs, seconds: float, windows: int = 4) -> float:
    """Agent-steps/s (rows x steps) over the best of ``windows`` windows after a warm-up window, random actions."""
    envs.reset(seed=0)
    single = getattr(envs, "single_action_space", None) or envs.action_space
    batch = getattr(envs, "batch_size", envs.num_envs)  # rows per step (shoal's asynchronous batches: fewer)
    single.seed(0)
    actions = [np.array([single.sample() for _ in range(batch)]) for _ in range(16)]
    best, window, k = 0.0, seconds / windows, 0
    for w in range(windows + 1):
        steps, start = 0, time.perf_counter()
        while time.perf_counter() - start < window:
            envs.step(actions[k % 16])
            k += 1
            steps += batch
        if w:
            best = max(best, steps / (time.perf_counter() - start))
    close(envs)  # (PufferLib's workers waited for)
    return best


def supersuit(fn, n: int, cpus: int):
    import supersuit as ss

    return ss.concat_vec_envs_v1(ss.pettingzoo_env_to_vec_env_v1(fn()), n, num_cpus=cpus, base_class="gymnasium")


def shoal_supersuit(fn, n: int, cpus: int):
    """The same call as :func:`supersuit`, with the import changed (shoal.supersuit, the drop-in)."""
    import shoal.supersuit as ss

    return ss.concat_vec_envs_v1(ss.pettingzoo_env_to_vec_env_v1(fn()), n, num_cpus=cpus, base_class="gymnasium")


def configs(fn, n: int):
    yield "shoal serial", lambda: shoal.make(fn, n, backend="serial")
    yield "shoal mp x2", lambda: shoal.make(fn, n, num_workers=2)
    yield "shoal mp x2 no-inline", lambda: shoal.make(fn, n, num_workers=2, inline=False)
    rows = len(fn().possible_agents)
    yield "shoal mp x2 async", lambda: shoal.make(fn, n, num_workers=2, batch_size=n // 2 * rows)
    yield "shoal.supersuit 1 proc", lambda: shoal_supersuit(fn, n, 0)
    yield "shoal.supersuit 2 procs", lambda: shoal_supersuit(fn, n, 2)
    if importlib.util.find_spec("supersuit") is not None:
        yield "SuperSuit 1 proc", lambda: supersuit(fn, n, 0)
        yield "SuperSuit 2 procs", lambda: supersuit(fn, n, 2)
    if importlib.util.find_spec("pufferlib") is not None:
        yield from puffer_configs(fn, n)


def puffer_configs(fn, n: int):
    """PufferLib's vector envs over its own PettingZoo wrapper (agents as rows, as shoal's)."""
    make = partial(puffer_make, fn, n, multiagent=True)
    yield "PufferLib Serial", lambda: make(backend="Serial")
    for workers in (1, 2):  # one worker per core is PufferLib's rule; its calling process spins too
        yield f"PufferLib mp {workers}", lambda w=workers: make(backend="Multiprocessing", num_workers=w)


def twin_configs(n: int):
    fns = [CrowdSingle] * n
    yield "twin shoal serial", lambda: shoal.make(fns, backend="serial")
    yield "twin shoal mp x2", lambda: shoal.make(fns, num_workers=2)
    yield "twin shoal mp x2 no-inline", lambda: shoal.make(fns, num_workers=2, inline=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=list(WORKLOADS))
    args = parser.parse_args()
    if importlib.util.find_spec("pufferlib") is None:
        print("pufferlib is not installed (README: pip install --no-deps pufferlib-core==3.0.23): no PufferLib column")
    if importlib.util.find_spec("supersuit") is None:
        print("supersuit is not installed (pip install supersuit): no SuperSuit column")
    print(f"{'workload':11s} {'config':27s} {'agent-steps/s (best of ' + str(args.rounds) + ')':>28s}")
    summary = []
    for name in args.workloads:
        fn, n = WORKLOADS[name]
        builds = dict(configs(fn, n))
        if name == "crowd":
            builds.update(twin_configs(n * len(fn().possible_agents)))
        runs = {config: (lambda build=build: measure(build(), args.seconds)) for config, build in builds.items()}
        rates = interleaved(runs, args.rounds)
        for config, rate in rates.items():
            print(f"{name:11s} {config:27s} {rate:28,.0f}", flush=True)
        summary.append((name, rates))
    print("\ntargets: shoal >= 1.5x the best peer; crowd >= 0.5x its single-agent twin on shoal")
    print(f"{'workload':11s} {'shoal best':>12s} {'peer best':>12s} {'ratio':>6s} {'vs twin':>8s}")
    for name, r in summary:
        mine = max(v for k, v in r.items() if k.startswith("shoal"))
        peers = [v for k, v in r.items() if not k.startswith(("shoal", "twin"))]
        peer = max(peers) if peers else float("nan")
        twins = [v for k, v in r.items() if k.startswith("twin")]
        twin = f"{mine / max(twins):8.2f}" if twins else f"{'':8s}"
        print(f"{name:11s} {mine:12,.0f} {peer:12,.0f} {mine / peer:6.2f} {twin}")
    drop_in = [(name, r) for name, r in summary if "SuperSuit 1 proc" in r]
    if drop_in:
        print("\nthe drop-in: SuperSuit's own call with its import changed (shoal.supersuit) over SuperSuit's")
        print(f"{'workload':11s} {'1 proc':>8s} {'2 procs':>8s} {'best/best':>10s}")
        for name, r in drop_in:
            ours = max(r["shoal.supersuit 1 proc"], r["shoal.supersuit 2 procs"])
            theirs = max(r["SuperSuit 1 proc"], r["SuperSuit 2 procs"])
            one, two = (r[f"shoal.supersuit {k}"] / r[f"SuperSuit {k}"] for k in ("1 proc", "2 procs"))
            print(f"{name:11s} {one:8.2f} {two:8.2f} {ours / theirs:10.2f}")


if __name__ == "__main__":
    main()
