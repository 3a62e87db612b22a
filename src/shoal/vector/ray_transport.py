"""The Ray backend: each group of envs in a Ray actor, so a vector env can span a cluster.

* An actor hosts the same :class:`~shoal.vector.engine.Engine` a multiprocessing worker runs, over buffers of its
  own (actors may live on other machines: there is no shared memory). A command carries its group's actions; the
  answer carries the group's rows of every per-step array, which come back through Ray's object store (numpy arrays
  are read there without a copy) and are copied once into the vector env's buffers. Infos and errors use the
  multiprocessing worker's encoding (empty bytes: nothing to report).
* First-N-of-M batches wait with ``ray.wait``.
* Ray is joined at ``address`` (or ``RAY_ADDRESS``, or an already initialized Ray); otherwise a local Ray is started
  with the machine's cores and shut down when the last vector env that started it closes. ``close()`` kills the
  actors it created and leaves a cluster it joined running.
* An actor that dies is a :class:`~shoal.errors.WorkerDiedError` naming its envs, raised by the wait that notices.
"""

from __future__ import annotations

import os
from typing import Any, Sequence

import cloudpickle
import numpy as np
from gymnasium.vector import AutoresetMode

from shoal.errors import MissingDependencyError, WorkerDiedError
from shoal.vector import _worker
from shoal.vector.buffers import Buffers, BufferSpec
from shoal.vector.engine import Command, Op
from shoal.vector.transport import EngineFactory, Transport, messages, pickled, raise_first, timed_out

_CLOSE_GRACE_S = 5.0
_START_S = 120.0  # actors that are not up by then will not be
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
        else:
            ray.init(num_cpus=os.cpu_count(), include_dashboard=False, logging_level="WARNING")
            _local["started"] = True
    return ray


def cluster_cpus(address: str | None = None) -> int:
    """The CPUs of the Ray cluster (joining or starting it): the default number of actors."""
    return max(1, int(connect(address).cluster_resources().get("CPU", 1)))


class EngineHost:
    """The actor class: one engine over envs ``start..stop-1`` (one or more groups; it runs their commands in order)."""

    def __init__(self, factory_bytes: bytes, start: int, stop: int, spec: BufferSpec, autoreset_mode: Any) -> None:
        self.ids = range(start, stop)
        self.buffers = spec.allocate()
        self.error: bytes | None = None
        try:
            self.engine = cloudpickle.loads(factory_bytes)(self.ids, self.buffers, autoreset_mode)
        except BaseException as exc:
            self.error = _worker.error_reply(exc)

    def ready(self) -> bytes:
        return self.error if self.error is not None else _worker.READY

    def execute(self, command: Command, actions: Any, group: range) -> tuple[bytes, tuple]:
        """Run ``command`` for the group of envs ``group`` (``actions``: its rows of the actions, for a step)."""
        if actions is not None:
            self.buffers.actions[group.start : group.stop] = actions
        try:
            reply = _worker.reply(self.engine.execute(command), command.ids)
        except BaseException as exc:
            reply = _worker.error_reply(exc)
        return reply, rows_of(self.buffers, group)

    def close(self) -> None:
        """Close the envs and end this actor (its process exits; later calls fail with ``ActorDiedError``)."""
        import ray

        if self.error is None:
            self.engine.close()
        ray.actor.exit_actor()

    def pid(self) -> int:
        return os.getpid()


def rows_of(buffers: Buffers, ids: range) -> tuple:
    """The rows ``ids`` of every per-step array an engine writes."""
    rows = slice(ids.start, ids.stop)
    arrays = (buffers.obs, buffers.rewards, buffers.terminations, buffers.truncations, buffers.needs_reset,
              buffers.steps_taken, *buffers.extras.values())
    return tuple(a[rows] for a in arrays)


class RayTransport(Transport):
    """Groups of envs in Ray actors.

    Args:
        address: the Ray cluster to join (default: ``RAY_ADDRESS``, a running Ray, or a new local one).
    """

    def __init__(
        self,
        factory: EngineFactory,
        groups: Sequence[range],
        spec: BufferSpec,
        autoreset_mode: AutoresetMode,
        hosts: Sequence[Sequence[int]] | None = None,
        *,
        address: str | None = None,
    ) -> None:
        super().__init__(factory, groups, spec, autoreset_mode, hosts)
        ray = self._ray = connect(address)
        self.buffers = spec.allocate()
        self._actors: list[Any] = []
        self._in_flight: dict[int, Any] = {}
        self._local = _local["started"]  # on a Ray shoal started: the last transport to close shuts it down
        _local["open"] += self._local
        try:
            # No CPU reservation: a reserved CPU per actor would leave the actors of a second vector env unplaced
            # (waiting forever) once the first one holds every CPU; the OS shares the cores, as with processes.
            host = ray.remote(EngineHost).options(num_cpus=0, scheduling_strategy="SPREAD", max_restarts=0)
            factory_bytes = pickled(factory, "the env constructors (to start the Ray actors)")
            spans = [self.host_ids(h) for h in range(len(self.hosts))]
            self._actors = [host.remote(factory_bytes, s.start, s.stop, spec, autoreset_mode) for s in spans]
            firsts = [members[0] for members in self.hosts]
            replies = self._get([a.ready.remote() for a in self._actors], firsts, _START_S)
            raise_first([(g, _worker.decode(r)) for g, r in zip(firsts, replies) if r != _worker.READY])
        except BaseException:
            self.close()
            raise

    # -- moving data -----------------------------------------------------------------------------------------------

    def dispatch(self, commands: dict[int, Command]) -> None:
        messages(commands)  # that each one can be sent, before any is: Ray pickles them itself
        for group, command in commands.items():
            ids = self.groups[group]
            actions = self.buffers.actions[ids.start : ids.stop] if command.op is Op.STEP else None
            self._in_flight[group] = self._actors[self.host_of[group]].execute.remote(command, actions, ids)

    def collect(self, groups: Sequence[int], timeout: float | None = None) -> list[tuple[int, Any]]:
        if timeout is not None:
            pending = [self._in_flight[g] for g in groups]
            _, not_ready = self._ray.wait(pending, num_returns=len(pending), timeout=timeout)
            if not_ready:
                raise timed_out(timeout)
        refs = [self._in_flight.pop(g) for g in groups]
        answers = []
        for group, (reply, rows) in zip(groups, self._get(refs, groups)):
            self._store(group, rows)
            answers.append((group, _worker.decode(reply)))
        return raise_first(answers)

    def collect_any(self, count: int, timeout: float | None = None) -> list[tuple[int, Any]]:
        group_of = {ref: g for g, ref in self._in_flight.items()}
        ready, _ = self._ray.wait(list(group_of), num_returns=count, timeout=timeout)
        if len(ready) < count:
            raise timed_out(timeout)
        return self.collect([group_of[ref] for ref in ready])

    def _get(self, refs: list[Any], groups: Sequence[int], timeout: float | None = None) -> list[Any]:
        try:
            return self._ray.get(refs, timeout=timeout)
        except self._ray.exceptions.GetTimeoutError:
            raise WorkerDiedError(
                f"the Ray actors of this vector env did not start within {timeout:.0f} s (is the cluster at its "
                f"limits, or unreachable?)"
            ) from None
        except self._ray.exceptions.RayActorError as exc:
            dead = next((g for g, ref in zip(groups, refs) if _failed(self._ray, ref)), groups[0])
            for g in groups:  # the others' answers are lost with this batch: nothing is in flight for them now
                self._in_flight.pop(g, None)
            host = self.host_of[dead]
            ids = self.host_ids(host)
            raise WorkerDiedError(
                f"Ray actor {host} (hosting envs {ids.start}..{ids.stop - 1}) died: "
                f"{str(exc).splitlines()[0]}; close() this vector env and make a new one",
                env_id=ids.start,
            ) from exc

    def _store(self, group: int, rows: tuple) -> None:
        """Copy a group's rows from its actor into this process's buffers (observations: into their target slot;
        the actor's own buffers use slot 0 only)."""
        ids, b = self.groups[group], self.buffers
        span = np.arange(ids.start, ids.stop)
        b.obs[b.target_rows(span)] = rows[0]
        b.settle(span)
        for target, values in zip(rows_of(b, ids)[1:], rows[1:]):
            target[...] = values

    # -- shutdown --------------------------------------------------------------------------------------------------

    def close(self, terminate: bool = False) -> None:
        actors, self._actors, self._in_flight = self._actors, [], {}
        if actors and not terminate:
            closing = [a.close.remote() for a in actors]
            self._ray.wait(closing, num_returns=len(closing), timeout=_CLOSE_GRACE_S)
        if actors:
            for actor in actors:  # any that did not exit in time (hung, or already dead)
                self._ray.kill(actor)
        if self._local:
            self._local = False
            _local["open"] -= 1
            if _local["open"] == 0 and _local["started"]:
                _local["started"] = False
                self._ray.shutdown()


def _failed(ray: Any, ref: Any) -> bool:
    try:
        ray.get(ref, timeout=0)
    except ray.exceptions.RayActorError:
        return True
    except ray.exceptions.GetTimeoutError:  # still running: not the dead one
        return False
    return False
