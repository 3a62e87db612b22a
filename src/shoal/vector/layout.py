"""How a vector env's envs are laid out: how many workers, how big a batch, which envs step together.

Pure functions of the constructor's arguments (and, for the default number of workers, of the machine:
:mod:`shoal.vector.load`), checked once when a vector env is made. A unit is an env the engines step as one: a row,
or ``rows`` consecutive rows (a multi-agent env's agents, a hosted vector env's sub-envs); workers' shares, groups and
asynchronous batches are made of whole units.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from shoal.errors import ConfigError
from shoal.vector.checks import integer
from shoal.vector.cpus import usable_cores
from shoal.vector.load import ShareCost, choose_workers, other_runnable


class Workers(NamedTuple):
    """The number of workers, and how the default chose it."""

    number: int
    others: float = 0.0
    """Runnable tasks besides this one when the default was chosen from the machine's load (else 0)."""
    alone: bool = False
    """The default chose the calling process alone: no worker process would pay."""


def worker_count(
    backend: str,
    num_workers: int | None,
    *,
    units: int,
    rows: int,
    address: str | None = None,
    share_cost: ShareCost | None = None,
) -> Workers:
    """``num_workers`` checked, or the default. ``share_cost``: where the default may follow the machine's load and
    the env's cost (None: one worker per core)."""
    if backend not in ("serial", "multiprocessing", "ray"):
        raise ConfigError(f"backend must be 'serial', 'multiprocessing' or 'ray', got {backend!r}")
    if address is not None and backend != "ray":
        raise ConfigError(f"address= is the Ray cluster to join; it needs backend='ray', not {backend!r}")
    if num_workers is None and backend == "ray":
        from shoal.vector.ray_cluster import cluster_cpus

        return Workers(min(units, cluster_cpus(address)))
    if num_workers is None and backend == "multiprocessing" and share_cost is not None:
        others = other_runnable()
        count = choose_workers(units, usable_cores(), others, share_cost)
        return Workers(count, others, alone=count == 1 < units)  # also on one core: a worker would only add hand-offs
    if num_workers is None:
        return Workers(1 if backend == "serial" else min(units, usable_cores()))
    if integer(num_workers) is None:
        raise ConfigError(f"num_workers must be an integer, got {num_workers!r}")
    if not 1 <= num_workers <= units:
        raise ConfigError(f"num_workers must be between 1 and {units_text(units, rows)}, got {num_workers}")
    return Workers(int(num_workers))


def checked_batch_size(batch_size: int | None, *, num_envs: int, rows: int, num_workers: int) -> int:
    """``batch_size`` checked (None: ``num_envs``, synchronous steps)."""
    if batch_size is None or batch_size == num_envs:
        return num_envs
    if integer(batch_size) is None:
        raise ConfigError(f"batch_size must be an integer, got {batch_size!r}")
    if not 1 <= batch_size <= num_envs:
        raise ConfigError(f"batch_size must be between 1 and num_envs={num_envs}, got {batch_size}")
    units = num_envs // rows
    if batch_size % rows:
        raise ConfigError(
            f"batch_size must be a multiple of {rows} (each env has {rows} rows, its agents or a vector env's "
            f"sub-envs, and a batch holds whole envs), got {batch_size}"
        )
    if units % num_workers:
        raise ConfigError(
            f"batch_size < num_envs shares the envs evenly among the workers, so "
            f"{units_text(units, rows, ' ({})')} must be divisible by num_workers ({num_workers})"
        )
    return int(batch_size)


def group_layout(
    *, num_envs: int, rows: int, num_workers: int, batch_size: int
) -> tuple[list[range], list[list[int]]]:
    """The groups of env rows (each stepped as one; an asynchronous batch is whole groups) and each worker's groups.

    Synchronous: one group per worker. Asynchronous: groups of the largest size that divides both a worker's share
    and the batch and is at most half a worker's share, so that a worker hosts at least two groups and steps the next
    one while the caller handles the one it just returned (EnvPool keeps its threads busy the same way, with a queue
    of envs).
    """
    units = num_envs // rows
    if batch_size == num_envs:
        groups = split_groups(units, num_workers)
        return [scaled(g, rows) for g in groups], [[g] for g in range(len(groups))]
    share, batch = units // num_workers, batch_size // rows
    size = max(d for d in range(1, max(share // 2, 1) + 1) if share % d == 0 and batch % d == 0)
    per_worker = share // size
    groups = split_groups(units, units // size)
    return [scaled(g, rows) for g in groups], [
        list(range(w * per_worker, (w + 1) * per_worker)) for w in range(num_workers)
    ]


def split_groups(num_envs: int, num_groups: int) -> list[range]:
    """``num_envs`` consecutive env ids split into ``num_groups`` ranges whose sizes differ by at most one."""
    base, extra = divmod(num_envs, num_groups)
    bounds = np.cumsum([0] + [base + (g < extra) for g in range(num_groups)])
    return [range(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:])]


def scaled(units: range, rows: int) -> range:
    """The rows of a range of units of ``rows`` rows each."""
    return range(units.start * rows, units.stop * rows)


def units_text(units: int, rows: int, form: str = "={}") -> str:
    """How errors name the number of envs: ``num_envs``, or the envs of several rows each."""
    if rows == 1:
        return "num_envs" + form.format(units)
    return f"the number of envs ({units}, of {rows} rows each)"
