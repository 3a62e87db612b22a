"""Ray itself: joining a cluster or starting a local one (and shutting down what shoal started, when its last user
closes), and the cluster's nodes and CPUs, among which the Ray backend and ``shoal sweep --backend ray`` share their
work."""

from __future__ import annotations

import os
import threading
from contextlib import contextmanager
from typing import Any, Iterator, Sequence

from shoal.errors import MissingDependencyError, WaitTimeoutError
from shoal.vector.cpus import usable_cores

_local = {"started": False, "open": 0}  # a local Ray shoal started, and how many transports use it


def import_ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise MissingDependencyError(
            'backend="ray" needs Ray, which is not installed: pip install "shoal[ray]"'
        ) from exc
    return ray


def connect(address: str | None = None) -> Any:
    """Join Ray at ``address`` / ``RAY_ADDRESS`` / the one already initialized, or start a local one; the module."""
    ray = import_ray()
    if not ray.is_initialized():
        address = address or os.environ.get("RAY_ADDRESS")
        if address:
            ray.init(address=address, logging_level="WARNING")
        else:  # "local": a new one, whatever /tmp/ray/ray_current_cluster names (a `ray start` cluster, or one
            # that died without removing it: Ray would join it, and refuse num_cpus)
            ray.init(address="local", num_cpus=usable_cores(), include_dashboard=False, logging_level="WARNING")
            _local["started"] = True
    return ray


def hold(address: str | None = None) -> tuple[Any, bool]:
    """:func:`connect`, and whether the caller holds a local Ray shoal started (then it must :func:`release` it)."""
    ray = connect(address)
    held = bool(_local["started"])
    _local["open"] += held
    return ray, held


def release(ray: Any, held: bool) -> None:
    """Let go of a local Ray held by :func:`hold`: the last holder shuts it down."""
    if held:
        _local["open"] -= 1
        if _local["open"] == 0 and _local["started"]:
            _local["started"] = False
            ray.shutdown()


@contextmanager
def session(address: str | None = None) -> Iterator[Any]:
    """Ray, joined or started (and then shut down at the end, unless a vector env still uses it), for a block."""
    ray, held = hold(address)
    try:
        yield ray
    finally:
        release(ray, held)


def cluster_cpus(address: str | None = None) -> int:
    """The CPUs of the Ray cluster (joining or starting it): the default number of workers."""
    return max(1, int(connect(address).cluster_resources().get("CPU", 1)))


NODES_TIMEOUT_S = 60.0
"""How long :func:`nodes` waits for Ray to list its nodes."""


def nodes(ray: Any, timeout: float = NODES_TIMEOUT_S) -> list[tuple[str, int]]:
    """The alive nodes with CPUs, as ``(node id, CPUs)``: the calling process's node first, then by id.

    ``ray.nodes()`` has no timeout of its own: it is asked in a thread, and a :class:`WaitTimeoutError` says so when
    it has not answered within ``timeout`` seconds, rather than the vector env's construction hanging (seen when a
    forked process had used this process's Ray connections: see :func:`shoal.vector.processes.frozen_heap`)."""
    here = ray.get_runtime_context().get_node_id()
    answer: list[Any] = []

    def ask() -> None:
        try:
            answer.append((True, ray.nodes()))
        except BaseException as exc:  # handed to the caller below
            answer.append((False, exc))

    thread = threading.Thread(target=ask, name="shoal-ray-nodes", daemon=True)
    thread.start()
    thread.join(timeout)
    if not answer:
        raise WaitTimeoutError(
            f"Ray did not list its nodes within {timeout:g} s (ray.nodes() is still waiting for the cluster's GCS); "
            f"no vector env was made: check the cluster (ray status) and try again"
        )
    ok, listed = answer[0]
    if not ok:
        raise listed
    alive = [(n["NodeID"], int(n["Resources"].get("CPU", 0))) for n in listed if n["Alive"]]
    return sorted([n for n in alive if n[1] > 0], key=lambda n: (n[0] != here, n[0]))


def shares(workers: int, cpus: Sequence[int]) -> list[int]:
    """``workers`` shared among nodes of ``cpus`` CPUs in proportion (largest remainders; ties to the first)."""
    total = sum(cpus)
    exact = [workers * c / total for c in cpus]
    counts = [int(e) for e in exact]
    by_remainder = sorted(range(len(cpus)), key=lambda i: (counts[i] - exact[i], i))
    for i in by_remainder[: workers - sum(counts)]:
        counts[i] += 1
    return counts
