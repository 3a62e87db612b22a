"""The cost of Ray against multiprocessing, and of a sweep spread over a (simulated) Ray cluster, in one run.

    python benchmarks/bench_ray.py [--seconds 2] [--rounds 4] [--sweep-steps 1000] [--sweep-only | --wire]

1. One machine: the same vector env, the same workers (one per core), random actions; steps/s of each backend (best
   of ``--rounds``, each round running both in turn) and the ratio ray / multiprocessing (the median of the rounds'
   ratios, and their range), for an Atari workload (Breakout x 16, 84x84 gray, stack 4, frameskip 4; synchronous,
   and in asynchronous batches of the first 8 to finish) and a cheap one (CartPole x 64, synchronous and in batches
   of the first 32), where the per-step round trip dominates.
2. A two-node cluster simulated on this machine (Ray's ``cluster_utils.Cluster``: two raylets, one CPU each): a
   sweep of 8 game x seed pairs (``--sweep-steps`` agent steps each, random policy) over both nodes, against the sum
   of its two nodes' shares each run alone on its node (the other one idle); ``--rounds`` of each, in turn, ratios
   as in 1. Rates are agent steps over the seconds spent stepping (start-up excluded; for the spread sweep, the
   slower node's). Both nodes share this machine's cores: on a 2-core machine, "together" has one core per node, as
   each had alone, plus the calling process.

``--wire`` runs only Breakout x 16 with the node read over its connection, as a node on another machine is (see
:func:`over_the_wire` for shaping the link with ``tc``).
"""

from __future__ import annotations

import argparse
import os

import numpy as np
import ray

import shoal
from bench_atari import round_ratios
from shoal.bench.throughput import SETTINGS, time_steps
from shoal.vector.cpus import usable_cores

SWEEP_GAMES = ["pong", "breakout", "space_invaders", "ms_pacman"]


def rate(make, seconds: float) -> float:
    """Steps/s of random actions: whole batches, or (``batch_size < num_envs``) send/recv of the first envs done."""
    with make() as envs:
        envs.reset(seed=0)
        rng = np.random.default_rng(0)
        n, batch = envs.single_action_space.n, envs.batch_size

        def step() -> int:
            envs.send(rng.integers(0, n, batch))
            envs.recv()
            return batch

        return time_steps(step, seconds)[0]


def ratios(numerators: list[float], denominators: list[float]) -> str:
    """The rounds' ratios (:func:`bench_atari.round_ratios`): their median, and their range."""
    median, lowest, highest = round_ratios(numerators, denominators)
    return f"{median:.2f}x (rounds {lowest:.2f}-{highest:.2f}x)"


def over_the_wire(seconds: float, rounds: int) -> None:
    """Breakout x 16 on Ray with the node read over its connection, as a node on another machine is (its rows as
    frames: shoal.vector.stacks), against multiprocessing. Shape the loopback first to see a link's effect, e.g.
    ``tc qdisc add dev lo root tbf rate 125mbit burst 512kb latency 200ms`` (root; ``tc qdisc del dev lo root``
    after): 125 Mb/s is to 2 cores what 1 Gb/s is to 16."""
    from shoal.vector import ray_transport

    ray.init(address="local", num_cpus=usable_cores(), include_dashboard=False, logging_level="WARNING")
    workers = usable_cores()
    rates: dict[str, list[float]] = {"multiprocessing": [], "ray": []}
    for _ in range(rounds):
        for backend, got in rates.items():
            ray_transport.MAP_SHARED = False
            got.append(rate(lambda: shoal.AtariVectorEnv(
                games=["breakout"] * 16, backend=backend, num_workers=workers, **SETTINGS), seconds))
    mp, wire = rates["multiprocessing"], rates["ray"]
    print(f"Breakout x16 over the connection   multiprocessing {max(mp):9,.0f} steps/s   ray {max(wire):9,.0f} "
          f"steps/s   ray / multiprocessing {ratios(wire, mp)}", flush=True)
    ray.shutdown()


def one_machine(seconds: float, rounds: int) -> None:
    ray.init(address="local", num_cpus=usable_cores(), include_dashboard=False, logging_level="WARNING")
    workers = usable_cores()
    workloads = {
        "Breakout x16": lambda backend: lambda: shoal.AtariVectorEnv(
            games=["breakout"] * 16, backend=backend, num_workers=workers, **SETTINGS),
        "Breakout x16/8": lambda backend: lambda: shoal.AtariVectorEnv(  # first 8 of 16 to finish
            games=["breakout"] * 16, backend=backend, num_workers=workers, batch_size=8, **SETTINGS),
        "CartPole x64": lambda backend: lambda: shoal.make("CartPole-v1", 64, backend=backend, num_workers=workers),
        "CartPole x64/32": lambda backend: lambda: shoal.make(  # first 32 of 64 to finish
            "CartPole-v1", 64, backend=backend, num_workers=workers, batch_size=32),
    }
    for name, make in workloads.items():
        rates: dict[str, list[float]] = {"multiprocessing": [], "ray": []}
        for _ in range(rounds):  # each round runs both backends in turn: this host's speed drifts by tens of %
            for backend, got in rates.items():
                got.append(rate(make(backend), seconds))
        mp, on_ray = rates["multiprocessing"], rates["ray"]
        print(f"{name:15s} multiprocessing {max(mp):9,.0f} steps/s   ray {max(on_ray):9,.0f} steps/s   "
              f"ray / multiprocessing {ratios(on_ray, mp)}", flush=True)
    ray.shutdown()


def cluster_sweep(steps: int, rounds: int) -> None:
    from ray.cluster_utils import Cluster
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from shoal.bench.ray_sweep import node_events, run_on_nodes

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    cluster.add_node(num_cpus=1)
    ray.init(address=cluster.address, logging_level="ERROR")
    cluster.wait_for_nodes()
    try:
        pairs = [(g, s) for g in SWEEP_GAMES for s in range(2)]
        task = ray.remote(node_events)
        together: list[float] = []
        alone: list[float] = []
        for _ in range(rounds):  # the spread sweep, then its nodes' shares alone, in turn
            ran: dict[str, list[tuple[str, int]]] = {}  # node -> the pairs it ran
            for event in run_on_nodes(pairs, "steps", steps, "random", None, {}):
                if event[0] == "ran":
                    ran[event[1]] = event[2]
                elif event[0] == "end":
                    together.append(sum(event[1].values()) / event[2])
            summed = 0.0
            for node, share in ran.items():  # each node's share again, on that node alone
                where = NodeAffinitySchedulingStrategy(node, False)
                events = ray.get(list(task.options(num_cpus=0, num_returns="streaming", scheduling_strategy=where)
                                      .remote(share, "steps", steps, None, 1, {})))
                end = events[-1]
                summed += sum(end[1].values()) / end[2]
            alone.append(summed)
        print(f"2-node sweep   together {max(together):9,.0f} steps/s   nodes alone (sum) {max(alone):9,.0f} steps/s   "
              f"together / sum {ratios(together, alone)}   ({len(pairs)} pairs x {steps} steps, "
              f"{[len(share) for share in ran.values()]} pairs per node)", flush=True)
    finally:
        ray.shutdown()
        cluster.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--sweep-steps", type=int, default=1000)
    parser.add_argument("--sweep-only", action="store_true", help="only part 2")
    parser.add_argument("--wire", action="store_true", help="only Breakout x 16 with the node read over its connection")
    args = parser.parse_args()
    os.environ.pop("RAY_ADDRESS", None)
    if args.wire:
        over_the_wire(args.seconds, args.rounds)
        return
    if not args.sweep_only:
        one_machine(args.seconds, args.rounds)
    cluster_sweep(args.sweep_steps, args.rounds)


if __name__ == "__main__":
    main()
