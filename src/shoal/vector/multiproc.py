"""The multiprocessing backend: groups of envs in worker processes, every per-step array in shared memory.

* Memory: one shared block holds all buffers, then the links' counters and mailboxes
  (:func:`~shoal.vector.arena.shared_bytes`: a mapping of its own, never a block another library freed). Unlike
  ``multiprocessing.shared_memory``, its backing file is unlinked the moment it is created, so nothing can outlive
  the processes, even when the parent is killed with SIGKILL; and it works under fork, spawn and forkserver alike,
  on Linux and macOS.
* Signalling (:mod:`shoal.vector.link`): a step is posted and answered through counters in shared memory; one pipe
  per worker carries what is rare (infos, errors, call results, pickled). A worker may
  host several groups and answers their commands in the order it got them, so in asynchronous mode it steps its
  next group while the caller handles the one it just returned (EnvPool's queue, per worker), instead of idling
  until the caller's next ``send``.
* Waiting is a bounded spin, then sleep: when there are no more processes than cores, a waiter spins on the
  counters for up to ``spin_us`` (a short wait then costs about 1 us instead of a sleep/wake-up round trip, 15-30
  us on a small VM), then sleeps on the counter (a futex); a waiter whose spins keep running out stops spinning
  (:class:`~shoal.vector.link.Spin`), so a long wait (a model running) costs nothing. 1 ms by default: on 16
  cores synchronous Breakout x 64 ran 3-10% faster with it than with 300 us (five machines; workers start ~10 us
  after a post instead of ~40); on 2 cores Breakout x 2 synchronous, whose sides take turns being the slower by up
  to a few hundred us, kept 0.88-0.92x the best asynchronous configuration (300 us: 0.87-0.90x, 100 us:
  0.78-0.87x), and with a CNN of 0.5-2 ms picking the actions between steps (1 or 2 torch threads) every budget
  from none to 1 ms ran alike (benchmarks/bench_spin.py --model). With
  more processes than cores nobody spins: a spinning waiter would take a core from the envs (PufferLib 3.0 runs
  slower with 2 workers than with 1 on 2 cores for that reason).
* In synchronous mode the calling process hosts one group itself (``inline``): it signals the workers, steps its own
  envs while they step theirs, then waits. Two cores are then used by two processes, with no idle parent.
* Forking: under ``fork`` the workers are started with the parent's heap frozen
  (:func:`~shoal.vector.processes.frozen_heap`), so that a worker's garbage collector never finalizes an object it
  inherited. Ray's handles are such objects: a garbage ``ActorHandle`` collected in a forked worker calls into Ray's
  core worker, whose threads did not survive the fork (the worker hangs on their lock, its start never answered)
  and whose connections the parent still uses (the parent's Ray then hangs in ``ray.nodes()`` or aborts). Spawn and
  forkserver workers inherit no objects.
* Faults: a worker that dies closes its pipe; a waiting parent looks for closed pipes every
  :data:`~shoal.vector.link.PEER_CHECK_S` (0.1 s), so its wait ends with :class:`WorkerDiedError`. How workers start,
  are named when slow or dead, and stop: :mod:`shoal.vector.processes`.
"""

from __future__ import annotations

import multiprocessing as mp
import time
from collections import deque
from dataclasses import replace
from typing import Any, Callable, Sequence

import numpy as np
from gymnasium.vector import AutoresetMode

from shoal.errors import ConfigError, EnvError, WorkerDiedError
from shoal.vector import _worker, processes
from shoal.vector.arena import shared_bytes
from shoal.vector.buffers import BufferSpec, sequence_rows
from shoal.vector.info_table import InfoTable
from shoal.vector._counters import Counters
from shoal.vector.channel import Channel, Poller
from shoal.vector.link import (
    EVENTS,
    ON_PIPE,
    PARENT_ASLEEP,
    PEER_CHECK_S,
    Link,
    PeerClosed,
    Spin,
    closed_channels,
    counters_needed,
    link_memory,
    mailbox_bytes,
    wait,
)
from shoal.vector.commands import Command
from shoal.vector.engine import Engine
from shoal.vector.cpus import usable_cores
from shoal.vector.transport import EngineFactory, Transport, answer_of, messages, pickled, raise_first, timed_out

_DEFAULT_SPIN_US = 1000.0


class MultiprocessingTransport(Transport):
    """Groups of envs in worker processes (group 0 in the calling process when ``inline``).

    Args:
        context: ``"fork"``, ``"spawn"``, ``"forkserver"`` or None for the platform default.
        daemon: start workers as daemons (they cannot start processes of their own).
        inline: host group 0 in the calling process (it must be a host of its own).
        spin_us: how long a waiter spins before it sleeps; default: 1000 when processes <= cores, else 0.
    """

    reports_arrivals = True
    shared = True

    def __init__(
        self,
        factory: EngineFactory,
        groups: Sequence[range],
        spec: BufferSpec,
        autoreset_mode: AutoresetMode,
        hosts: Sequence[Sequence[int]] | None = None,
        *,
        context: str | None = None,
        daemon: bool = True,
        inline: bool = False,
        spin_us: float | None = None,
    ) -> None:
        super().__init__(factory, groups, spec, autoreset_mode, hosts)
        if inline and self.hosts[0] != [0]:
            raise ValueError("inline: group 0 must be a host of its own")
        self._local = {g: members.index(g) for members in self.hosts for g in members}  # index within its host
        process_count = len(self.hosts) + (0 if inline else 1)
        if spin_us is None:
            spin_us = _DEFAULT_SPIN_US if process_count <= usable_cores() else 0.0
        self._spin_s = spin_us / 1e6
        self._spin = Spin(self._spin_s)
        if context is not None and context not in mp.get_all_start_methods():
            raise ConfigError(
                f"cannot find context for {context!r}: context (a start method) must be None (the platform's "
                f"default) or one of {mp.get_all_start_methods()}"
            )
        ctx: Any  # (typeshed's BaseContext lacks Process)
        ctx, why = processes.start_context(context)
        # same-step final observations wait in shared memory (_worker.park_finals), unless they have loose leaves,
        # numeric infos of Gymnasium envs in an info table (shoal.vector.info_table), and action sequences and
        # which envs to reset in areas of their own (_worker.shared_kind)
        spec = replace(spec, finals=autoreset_mode is AutoresetMode.SAME_STEP and not spec.obs.loose,
                       info_table=getattr(factory, "infos_per_env", False),
                       sequence_rows=sequence_rows(spec.num_envs, spec.action), reset_flags=True)
        ring = max(len(members) for members in self.hosts)
        count = counters_needed(len(self.hosts), ring)
        # one shared block (one mapping, one file descriptor): the buffers, then the links' counters (each on a
        # cache line of its own; BufferSpec.nbytes ends on one), then their mailboxes. (A Ray node lets a vector env
        # on its machine map it.)
        at = spec.nbytes
        mail_at = at + Counters.nbytes(count)
        self.memory = shared_bytes(mail_at + mailbox_bytes(len(self.hosts), ring))
        self.buffers = spec.view(self.memory)
        self._table = InfoTable.of(self.buffers)
        self._counters, self._mailboxes = link_memory(self.memory, at, count, mail_at)
        self._inline = inline
        self.own_rows = slice(0, self.groups[0].stop) if inline else None
        self._engine: Engine | None = None  # the calling process's own (inline)
        self._procs: dict[int, Any] = {}  # host -> worker process
        self._links: dict[int, Link] = {}  # host -> its link
        self._queued: dict[int, deque[int]] = {}  # host -> its groups sent a command, in the order sent
        self._answers: dict[int, tuple[bool, Any]] = {}  # group -> answer read, not yet collected (in arrival order)
        self._waits: dict[tuple[int, ...], tuple[list[Link], list[Channel], Poller]] = {}  # see _wait()
        self._hosts_waited: dict[tuple[int, ...], tuple[int, ...]] = {}  # see _gather_as_they_come()
        self._next_check = 0.0  # when _wait looks for dead hosts next
        self._plans: dict[tuple[int, ...], tuple[list[tuple[int, list[int], list[int]]], bool]] = {}  # see step()
        factory_bytes = pickled(factory, "the env constructors (to start the worker processes)")
        try:
            with processes.frozen_heap(ctx.get_start_method() == "fork"):
                for host, members in enumerate(self.hosts):
                    if inline and host == 0:
                        continue
                    parent_end, child_end = ctx.Pipe(duplex=True)
                    signals = _worker.Signals(self.memory, count, host, ring, self._spin_s, at, mail_at)
                    proc = ctx.Process(
                        target=_worker.run,
                        args=(child_end, self.memory, spec, factory_bytes, [self.groups[g] for g in members],
                              autoreset_mode, signals),
                        name=f"shoal-worker-{host}",
                        daemon=daemon,
                    )
                    try:
                        proc.start()
                    except (EOFError, OSError) as exc:  # a forkserver that died first, running the main script
                        ids = self.span(members)
                        raise WorkerDiedError(
                            f"worker {host} (hosting envs {ids.start}..{ids.stop - 1}) could not be started: "
                            f"{type(exc).__name__}: {exc}{processes.reruns_main(ctx.get_start_method(), why)}",
                            env_id=ids.start,
                        ) from exc
                    child_end.close()
                    self._procs[host], self._queued[host] = proc, deque()
                    self._links[host] = Link(Channel(parent_end), self._counters, host, ring, self._mailboxes)
            if inline:
                self._engine = factory(self.groups[0], self.buffers, autoreset_mode)
            for host, link in self._links.items():  # each worker says it is ready, or why not
                try:
                    stalled = processes.slow_start(host, self._procs[host], self.span(self.hosts[host]))
                    answer = _worker.decode(link.channel.recv(stalled, processes.START_WARN_S))
                except (EOFError, OSError):
                    answer = (False, self._died(host, processes.reruns_main(ctx.get_start_method(), why)))
                if answer != (True, _worker.READY):
                    raise_first([(self.hosts[host][0], answer)])
        except BaseException:
            self.close()
            raise

    # -- moving data -----------------------------------------------------------------------------------------------

    def dispatch(self, commands: dict[int, Command]) -> None:
        remote = {g: c for g, c in commands.items() if not (self._inline and g == 0)}
        # action sequences that fit their area and resets without seeds or options go through the buffers (no
        # pickle either way), the rest pickled
        kinds = {g: kind for g, c in remote.items() if (kind := _worker.shared_kind(self.buffers, self.groups[g], c))}
        for group in kinds:
            del remote[group]
        for group, message in messages(remote).items():
            self._send(group, message)
        for group, kind in kinds.items():
            self._send(group, None, kind)
        if self._inline and 0 in commands:  # step our own share while the workers step theirs
            assert self._engine is not None  # made with the workers
            self._answers[0] = answer_of(self._engine.execute, commands[0])

    def step(self, groups: Sequence[int], own_actions: np.ndarray | None = None) -> None:
        key = tuple(groups)
        plan = self._plans.get(key)
        if plan is None:  # per worker: its groups' indices within it, and the groups (a few sets of groups recur)
            if len(self._plans) > 256:
                self._plans.clear()
            remote = [g for g in key if not (self._inline and g == 0)]
            hosts = sorted({self.host_of[g] for g in remote})
            plan = self._plans[key] = (
                [(h, [self._local[g] for g in remote if self.host_of[g] == h],
                  [g for g in remote if self.host_of[g] == h]) for h in hosts],
                len(remote) < len(key),  # the calling process steps group 0
            )
        posts, own = plan
        for host, local, members in posts:  # the hot path: a counter slot per group and one counter per host
            self._queued[host].extend(members)  # before the post: an interrupt between the two must not hide it
            try:
                self._links[host].post_steps(local)
            except (BrokenPipeError, ConnectionResetError, EOFError):
                raise self._died(host) from None
        if own:  # step our own share while the workers step theirs
            assert self._engine is not None  # made with the workers
            self._answers[0] = answer_of(self._engine.run_step, self.group_ids[0], own_actions)

    def owes(self) -> bool:
        return bool(self._answers) or any(self._queued.values())

    def drain(self) -> None:
        for host, queue in self._queued.items():  # what an interrupt may have left between recording and posting
            if queue:
                link = self._links[host]
                try:
                    link.resync()
                except (BrokenPipeError, ConnectionResetError, EOFError):  # died before it read a message cut short
                    self._fail(host, self._died(host))
                    continue
                for _ in range(len(queue) - (link.sent - link.taken)):  # recorded, not posted (or read, not taken)
                    queue.pop()
        owing = self._read_available()
        while owing:
            self._wait(owing, 1)
            owing = self._read_available()
        self._answers.clear()

    def gather(
        self,
        groups: Sequence[int],
        timeout: float | None = None,
        keep: bool = False,
        arrived: Callable[[int], None] | None = None,
    ) -> list[tuple[int, tuple[bool, Any]]]:
        deadline = None if timeout is None else time.monotonic() + timeout
        if arrived is not None:
            self._gather_as_they_come(groups, deadline, timeout, arrived)
        for group in groups:
            while group not in self._answers:
                host = self.host_of[group]
                if group not in self._queued[host]:
                    raise RuntimeError(f"gather: group {group} was sent no command to answer")
                if not self._wait((host,), 1, deadline):
                    raise timed_out(timeout)
                self._read(host)
        return self._stored(groups, keep)

    def _gather_as_they_come(
        self, groups: Sequence[int], deadline: float | None, timeout: float | None, arrived: Callable[[int], None]
    ) -> None:
        """Read the answers of ``groups`` as they come, whichever host answers first, calling ``arrived`` with each
        group as its answer is read (those read before, and the calling process's own, first)."""
        answers = self._answers
        for group in groups:
            if group not in answers and group not in self._queued.get(self.host_of[group], ()):
                raise RuntimeError(f"gather: group {group} was sent no command to answer")
        hosts = self._hosts_waited.get(tuple(groups))
        if hosts is None:
            if len(self._hosts_waited) > 256:
                self._hosts_waited.clear()
            own = self._inline and 0 in groups
            hosts = self._hosts_waited[tuple(groups)] = tuple(sorted(
                {self.host_of[g] for g in groups if not (own and g == 0)}))
        left = list(groups)
        while True:
            waiting = []
            for group in left:
                if group in answers:
                    arrived(group)
                else:
                    waiting.append(group)
            if not waiting:
                return
            left = waiting
            if not self._wait(hosts, 1, deadline):
                raise timed_out(timeout)
            self._read_available()

    def gather_any(self, count: int, timeout: float | None = None) -> list[tuple[int, tuple[bool, Any]]]:
        deadline = None if timeout is None else time.monotonic() + timeout
        answers = self._answers
        owing = self._read_available()
        while len(answers) < count:
            if not owing:
                raise RuntimeError(f"gather_any: {count} answers wanted, {len(answers)} can come")
            if not self._wait(owing, count - len(answers), deadline):
                raise timed_out(timeout)
            owing = self._read_available()
        return self._first_stored(count)

    def _read_available(self) -> tuple[int, ...]:
        """Read every answer that has come; the hosts that still owe some."""
        owing = []
        for host, queue in self._queued.items():
            if queue:
                for _ in range(min(len(queue), self._links[host].available())):
                    self._read(host)
                if queue:
                    owing.append(host)
        return tuple(owing)

    def _send(self, group: int, message: bytes | None, kind: int = 0) -> None:
        """Post a pickled command to ``group``'s host, or (``message`` None) a command of ``kind``: a step of it (0),
        or one whose payload is in the buffers (:func:`_worker.shared_kind`)."""
        host = self.host_of[group]
        self._queued[host].append(group)  # before the post, as in step()
        try:
            if message is None:
                self._links[host].post(kind * len(self.hosts[host]) + self._local[group])
            else:
                self._links[host].post(ON_PIPE, message)
        except (BrokenPipeError, ConnectionResetError, EOFError):
            raise self._died(host) from None

    def _wait(self, hosts: tuple[int, ...], count: int, deadline: float | None = None) -> bool:
        """Wait until ``hosts`` (each owing answers) have ``count`` more answers between them than have been read,
        or one of them is found dead (its groups get their answers: errors); False if ``deadline`` (a
        ``time.monotonic()`` value) came first. Looks for dead hosts every :data:`~shoal.vector.link.PEER_CHECK_S`
        at most, so that a dead one is found even while others answer."""
        if not hosts:
            return True
        waiting = self._waits.get(hosts)
        if waiting is None:  # the links, their pipes and a poller over them, kept per set of hosts (few recur)
            if len(self._waits) > 256:
                self._waits.clear()
            links = [self._links[h] for h in hosts]
            channels = [link.channel for link in links]
            waiting = self._waits[hosts] = (links, channels, Poller(c.fd for c in channels))
        links, channels, poller = waiting
        now = time.monotonic()
        if now >= self._next_check:  # a dead host among them? (a sleep notices one too, but an answer may come first)
            self._next_check = now + PEER_CHECK_S
            dead = closed_channels(channels, poller)
            for index in dead:
                self._fail(hosts[index], self._died(hosts[index]))
            if dead:
                return True

        def missing() -> int:
            have = 0
            for link in links:
                have += link.available()
            return max(0, count - have)

        timeout = None if deadline is None else max(0.0, deadline - now)
        try:
            return wait(self._counters, EVENTS, PARENT_ASLEEP, missing, channels, self._spin, timeout, poller)
        except PeerClosed as closed:
            self._fail(hosts[closed.index], self._died(hosts[closed.index]))
            return True

    def _read(self, host: int) -> None:
        """Read the next answer of ``host``: it belongs to the group it was sent a command for first."""
        queue = self._queued[host]
        if not queue:
            return
        try:
            taken = self._links[host].take_answer()
        except (EOFError, ConnectionResetError, OSError):
            self._fail(host, self._died(host))
            return
        group = queue.popleft()
        answer: tuple[bool, Any]
        if isinstance(taken, int):  # an answer without a message
            if taken == _worker.FINALS:
                answer = (True, _worker.finals_of(self.buffers, self.group_ids[group]))
            elif taken == _worker.TABLE:
                answer = (True, [self._table.read(self.group_ids[group])])  # type: ignore[union-attr]
            else:
                answer = (True, None)
        else:
            answer = _worker.decode(taken)
            if answer[0] and self.buffers.final_obs is not None:
                answer = (True, _worker.parked_finals(answer[1], self.buffers))
        self._answers[group] = answer

    def _fail(self, host: int, error: EnvError) -> None:
        """The worker died: every group it still owed an answer gets ``error``."""
        queue = self._queued[host]
        while queue:
            self._answers[queue.popleft()] = (False, error)

    def _died(self, host: int, why: str = "") -> EnvError:
        """The error of worker ``host``'s death; ``why``: what may have caused it (as it started)."""
        return processes.died(host, self._procs[host], self.span(self.hosts[host]), why)

    # -- shutdown --------------------------------------------------------------------------------------------------

    def disown(self) -> None:
        # multiprocessing's exit function terminates every daemon process it counts as a child of this one: a forked
        # child that exits normally would terminate its parent's workers (os.fork copies that count)
        children = getattr(mp.process, "_children", None)
        if isinstance(children, set):
            children.difference_update(self._procs.values())


    def close(self, terminate: bool = False) -> None:
        processes.stop(list(self._links.values()), list(self._procs.values()), terminate)
        self._procs, self._links, self._queued, self._answers, self._waits = {}, {}, {}, {}, {}
        engine, self._engine = self._engine, None
        if engine is not None:
            engine.close()
