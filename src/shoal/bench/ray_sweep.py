"""Sweeps on a Ray cluster: each node runs its share of the game x seed pairs in a vector env of its own, next to the
policy, and streams the episodes back as its pairs finish.

A pair's episodes depend only on its game, its seed and the policy (each pair's env is seeded, and the random policy
has a generator per pair), so whichever node runs a pair, the episodes are those of a local sweep. The pairs are
shared among the alive nodes in proportion to their CPUs, dealt in turn (:func:`dealt`), so that each node gets a mix
of the games (their steps cost differently; a node's share of whole games would end later than another's); each node
runs one Ray task pinned to it (reserving no CPU, like the vector env's actors), which steps its pairs with
``backend="multiprocessing"`` on as many workers as the node has CPUs (or its share of ``num_workers``; one worker:
in the task's own process) and yields
the events of :func:`~shoal.bench.sweep.run_pairs` (a streaming generator), so nothing crosses the network per step.
The policy file travels with the task.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generator

from shoal.bench.sweep import policy_file, run_pairs
from shoal.vector.ray_cluster import nodes, session, shares

if TYPE_CHECKING:
    from shoal.vector.base import Backend


def run_on_nodes(
    pairs: list[tuple[str, int]],
    unit: str,
    amount: int,
    policy: str | Path,
    num_workers: int | None,
    atari: dict[str, Any],
) -> Generator[tuple, None, None]:
    """:func:`~shoal.bench.sweep.run_pairs`'s events for ``pairs`` spread over the cluster's nodes (progress summed
    over them; the seconds stepping: the longest node's), and ``("ran", node id, pairs)`` as each node ends."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    path = None if str(policy) == "random" else policy_file(policy)
    policy_bytes = None if path is None else (path.name, path.read_bytes())
    with session() as ray:
        where = nodes(ray)
        cpus = [c for _, c in where]
        counts = shares(len(pairs), cpus)
        workers = shares(max(num_workers, len(where)), cpus) if num_workers else cpus
        task = ray.remote(node_events)
        live, done = [], {}
        for (node_id, _), share, node_workers in zip(where, dealt(pairs, counts), workers):
            if not share:
                continue
            live.append(task.options(
                num_cpus=0, num_returns="streaming",
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
            ).remote(share, unit, amount, policy_bytes, max(1, min(node_workers, len(share))), atari))
            done[live[-1]] = 0.0
        total, stepping = float(len(pairs) * amount), 0.0
        steps: dict[str, int] = {}
        try:
            while live:
                ready, _ = ray.wait(live, num_returns=1)
                try:
                    event = ray.get(next(ready[0]))
                except StopIteration:
                    live.remove(ready[0])
                    continue
                if event[0] == "progress":
                    done[ready[0]] = event[1]
                    yield ("progress", sum(done.values()), total)
                elif event[0] == "end":
                    for game, count in event[1].items():
                        steps[game] = steps.get(game, 0) + count
                    stepping = max(stepping, event[2])
                    yield ("ran", event[3], event[4])
                else:
                    yield event
        finally:
            for generator in live:  # interrupted: the nodes' vector envs go with their tasks
                ray.cancel(generator, force=True)
        yield ("end", steps, stepping)


def dealt(pairs: list[tuple[str, int]], counts: list[int]) -> list[list[tuple[str, int]]]:
    """``pairs`` dealt into hands of ``counts`` pairs each: each pair in turn to the hand that holds the smallest
    part of its count so far (ties: the first), so each hand gets every stretch of the games x seeds order in
    proportion. Consecutive runs gave one node whole games: with Pong and Breakout on one node and Space Invaders
    and Ms. Pac-Man (~20% dearer a step here) on the other, the sweep ended with the second, ~9% after an even
    split would have."""
    hands: list[list[tuple[str, int]]] = [[] for _ in counts]
    for pair in pairs:
        open_ = [k for k, count in enumerate(counts) if len(hands[k]) < count]
        hands[min(open_, key=lambda k: len(hands[k]) / counts[k])].append(pair)
    return hands


def node_events(
    pairs: list[tuple[str, int]],
    unit: str,
    amount: int,
    policy: tuple[str, bytes] | None,
    num_workers: int,
    atari: dict[str, Any],
) -> Generator[tuple, None, None]:
    """A node's task: its pairs' events, on a local multiprocessing vector env (the last one also names the node)."""
    import ray

    with tempfile.TemporaryDirectory(prefix="shoal-policy-") as folder:
        path: str | Path = "random"
        if policy is not None:
            path = Path(folder) / policy[0]
            path.write_bytes(policy[1])
        backend: Backend = "multiprocessing" if num_workers > 1 else "serial"  # one worker: none beside the task
        for event in run_pairs(pairs, unit, amount, path, backend, num_workers, atari):
            yield event if event[0] != "end" else (*event, ray.get_runtime_context().get_node_id(), pairs)
