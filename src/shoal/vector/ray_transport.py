"""The Ray backend: a vector env over the nodes of a Ray cluster, one actor per node hosting a local pool.

* Placement: the workers (``num_workers``, default the cluster's CPUs) are shared among the cluster's alive nodes in
  proportion to their CPUs, consecutively (the calling process's node first); each node that gets any has one
  actor, pinned there (:class:`~shoal.vector.ray_node.NodeHost`), which runs them as ``backend="multiprocessing"``
  would: worker processes and shared memory, the actor stepping one share itself in synchronous mode. No CPU is
  reserved (a second vector env's actors would wait forever for the first one's); the OS shares the cores.
* Traffic: Ray starts, places and watches the actors, and carries nothing per step (a Ray call costs ~1 ms). Each
  actor listens on its node's address; the vector env connects to it (``multiprocessing.connection``, with a key
  it sent through Ray) and sends one message per node per batch: that node's commands and actions; one reply per
  message brings each group's answer and its rows of every per-step array, copied into this process's buffers. The
  actor on the calling process's own Ray node sends no rows: the vector env maps its buffers (read-only) and copies
  its rows from there (:func:`map_shared`).
* First-N-of-M batches take the first groups answered, on any node: in asynchronous mode a node sends each answer
  back as soon as it has it (in synchronous mode, one reply per message).
* Ray is joined at ``address`` (or ``RAY_ADDRESS``, or an already initialized Ray); otherwise a local Ray is started
  with the machine's cores and shut down when the last vector env that started it closes. ``close()`` ends the
  actors it created (their pools first) and leaves a cluster it joined running.
* An actor or node that dies is a :class:`~shoal.errors.WorkerDiedError` naming its envs, raised by the wait that
  notices: its connection closes, or (a node lost without closing it) Ray reports the actor dead, which a wait
  checks every :data:`CHECK_S`. A worker process that dies inside a node is named the way the multiprocessing
  backend names it.
"""

from __future__ import annotations

import mmap
import os
import socket
import time
from multiprocessing.connection import Connection, answer_challenge, deliver_challenge, wait
from typing import Any, Callable, Sequence

import numpy as np
from gymnasium.vector import AutoresetMode

from shoal.errors import ConfigError, UnpicklableError, WorkerDiedError
from shoal.vector import _worker
from shoal.vector._memory import page_delta
from shoal.vector.buffers import Buffers, BufferSpec
from shoal.vector.channel import Channel
from shoal.vector.copies import CHECKED_FROM, NEAR
from shoal.vector.commands import Command, Op
from shoal.vector.ray_cluster import hold, nodes, release, shares
from shoal.vector.ray_node import (
    CLOSE, NUMBER, SHARED, NodeHost, command_request, no_delay, read_reply, step_arrays, step_request,
)
from shoal.vector.stacks import Receiver, stacked
from shoal.vector.transport import EngineFactory, Transport, messages, pickled, raise_first, timed_out

_CLOSE_GRACE_S = 5.0
_START_S = 120.0  # actors that are not up by then will not be
_CONNECT_S = 10.0  # a node's address that cannot be reached by then will not be
CHECK_S = 1.0
"""How often a wait asks Ray whether the actors it waits for are still alive."""
MAP_SHARED = True
"""Whether the rows of the actor on the calling process's own Ray node are read out of its memory
(:func:`map_shared`) rather than sent over its connection (the tests turn it off to test the connection with every
node)."""
class _Node:
    """The vector env's side of one node: its actor, connection, groups and the answers it owes."""

    def __init__(self, ray: Any, index: int, actor: Any, groups: list[int], ids: range) -> None:
        self.ray, self.index, self.actor, self.groups, self.ids = ray, index, actor, groups, ids
        self.connection: Channel | None = None  # set once its actor is ready (RayTransport._start)
        self.serving: Any = None  # the ref of its serve() call: it ends when the actor does
        self.where = ""  # its node's address and the actor's pid, for errors
        self.node_id = ""  # the Ray node it runs on
        self.pid = 0  # the actor's process
        self.shared: Buffers | None = None  # its buffers, mapped (read-only), where it runs on this machine
        self.mapping: mmap.mmap | None = None  # what holds them
        self.owed: set[int] = set()  # its groups sent a command and not answered yet
        self.taken = 0  # its replies read (each carries its number)

    def check_alive(self) -> None:
        """Run while a send to it has waited :data:`CHECK_S` for room, or a reply from it for its rest:
        :class:`BrokenPipeError` if Ray says its actor ended (a node lost with its machine can leave its connection
        open, never read or written again)."""
        dead, _ = self.ray.wait([self.serving], num_returns=1, timeout=0)
        if dead:
            raise BrokenPipeError(f"Ray actor {self.index} ended while a message to it waited for room")

    @property
    def channel(self) -> Channel:
        """Its connection (every node has one once the transport has started)."""
        if self.connection is None:
            raise RuntimeError(f"Ray actor {self.index} is not connected yet")
        return self.connection


class RayTransport(Transport):
    """Groups of envs on the nodes of a Ray cluster, each node's on a local pool in one actor.

    Args:
        address: the Ray cluster to join (default: ``RAY_ADDRESS``, a running Ray, or a new local one).
    """

    shared = True

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
        self._ray, self._held = hold(address)  # a local Ray shoal started: the last user to close shuts it down
        self.buffers = spec.allocate()
        self._nodes: list[_Node] = []
        self._node_of: dict[int, _Node] = {}
        self._answers: dict[int, tuple[bool, Any]] = {}  # group -> answer read, not yet gathered (in arrival order)
        self._plans: dict[tuple[int, ...], list[tuple[_Node, list[int], list[range]]]] = {}  # see step()
        self._frames: Receiver | None = None  # the rows read last, where observations come as frames
        try:
            self._start(factory, spec, autoreset_mode)
        except BaseException:
            self.close()
            raise

    def _start(self, factory: EngineFactory, spec: BufferSpec, autoreset_mode: AutoresetMode) -> None:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        ray = self._ray
        factory_bytes = pickled(factory, "the env constructors (to start the Ray actors)")
        key = os.urandom(32)
        where = nodes(ray)
        counts = shares(len(self.hosts), [cpus for _, cpus in where])
        host_class = ray.remote(NodeHost)
        first_host = 0
        for (node_id, _), count in zip(where, counts):
            if not count:
                continue
            hosts = list(range(first_host, first_host + count))
            first_host += count
            groups = [g for h in hosts for g in self.hosts[h]]
            local_hosts = [[g - groups[0] for g in self.hosts[h]] for h in hosts]
            actor = host_class.options(
                num_cpus=0, max_restarts=0, max_concurrency=2,  # serve() runs while pid() can answer
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
            ).remote(factory_bytes, [self.groups[g] for g in groups], local_hosts, groups[0], spec,
                     autoreset_mode, key)
            node = _Node(ray, len(self._nodes), actor, groups, self.span(groups))
            self._nodes.append(node)
            self._node_of.update((g, node) for g in groups)
        replies = self._get([n.actor.ready.remote() for n in self._nodes], self._nodes, _START_S)
        raise_first([
            (node.groups[0], _worker.decode(status)) for node, (status, *_) in zip(self._nodes, replies)
            if status != _worker.READY
        ])
        here = ray.get_runtime_context().get_node_id()
        for node, (_, address, pid, node_id, shared) in zip(self._nodes, replies):
            node.serving = node.actor.serve.remote()
            node.connection = Channel(dial(address, key, node.index))
            node.where, node.node_id, node.pid = f"on {address[0]}, pid {pid}", node_id, pid
            if MAP_SHARED and node_id == here and shared is not None:
                mapped = map_shared(pid, shared)
                if mapped is not None:
                    node.mapping, node.shared = mapped
                    node.channel.send(SHARED, node.check_alive, CHECK_S)
        shared = [n.shared for n in self._nodes if n.shared is not None]
        if shared:
            self.buffers = placed(spec, shared)
        if len(shared) < len(self._nodes) and stacked(spec):  # rows on the wire, as frames
            self._frames = Receiver(spec)

    # -- moving data -----------------------------------------------------------------------------------------------

    def dispatch(self, commands: dict[int, Command]) -> None:
        by_node: dict[int, dict[int, Command]] = {}
        for group, command in commands.items():
            by_node.setdefault(self._node_of[group].index, {})[group] = command
        try:  # every request pickled before any is sent: one that cannot be leaves no node out of step
            requests = [
                (self._nodes[index], command_request(mine, [self._actions(g) if c.op is Op.STEP else None
                                                            for g, c in mine.items()]), list(mine))
                for index, mine in by_node.items()
            ]
        except UnpicklableError:
            messages(commands)  # raises the error naming the command that cannot be sent
            raise
        for node, message, groups in requests:
            self._send(node, message, groups)

    def step(self, groups: Sequence[int], own_actions: np.ndarray | None = None) -> None:
        # own_actions is always None: no engine runs in the calling process (own_rows is None)
        key = tuple(groups)
        plan = self._plans.get(key)
        if plan is None:  # per node: its groups among these (a few sets of groups recur)
            if len(self._plans) > 256:
                self._plans.clear()
            mine_by_node = [(n, [g for g in key if self._node_of[g] is n]) for n in self._nodes]
            plan = self._plans[key] = [(n, mine, [self.groups[g] for g in mine]) for n, mine in mine_by_node if mine]
        actions = self.buffers.actions
        for node, mine, ranges in plan:
            self._send(node, step_request(mine, actions, ranges), mine)

    def _actions(self, group: int) -> np.ndarray:
        ids = self.groups[group]
        return self.buffers.actions[ids.start : ids.stop]

    def _send(self, node: _Node, message: bytes, groups: list[int]) -> None:
        """Send ``message`` (commands for ``groups``) to ``node``. Queued first, tagged with its groups, then
        owed, then written: wherever an interrupt lands, :meth:`_settle` (before any other message goes) owes its
        groups and finishes writing it, so that no group waits for an answer to a message the node never got."""
        try:  # while a large message waits for room, the node's replies are read meanwhile: no deadlock
            node.channel.queue(message, tag=groups)
            node.owed.update(groups)
            node.channel.flush(node.check_alive, CHECK_S)
        except OSError:  # the actor is gone: these groups (and any it owed) get the error naming its envs
            self._fail(node)

    def _settle(self, node: _Node) -> None:
        """Finish the message an interrupt left queued to ``node``, if any (its groups owed)."""
        queued = node.channel.queued
        if queued is not None:
            node.owed.update(queued[0])
            try:
                node.channel.flush(node.check_alive, CHECK_S)
            except OSError:
                self._fail(node)

    def owes(self) -> bool:
        return bool(self._answers) or any(node.owed or node.channel.queued for node in self._nodes)

    def drain(self) -> None:
        for node in self._nodes:
            self._settle(node)
        owing = [node for node in self._nodes if node.owed]
        while owing:
            self._wait(owing, None)
            owing = [node for node in self._nodes if node.owed]
        for node in self._nodes:  # nothing is owed now: a reply left in the inbox was read before an interrupt
            while node.channel.whole():  # cut _read short (it would take it for the next request's): taken
                node.taken = node.channel.prefix(NUMBER)[0] + 1
                node.channel.skip()
        self._answers.clear()

    def gather(
        self,
        groups: Sequence[int],
        timeout: float | None = None,
        keep: bool = False,
        arrived: Callable[[int], None] | None = None,
    ) -> list[tuple[int, tuple[bool, Any]]]:
        deadline = None if timeout is None else time.monotonic() + timeout
        for group in groups:
            while group not in self._answers:
                node = self._node_of[group]
                if group not in node.owed:
                    raise RuntimeError(f"gather: group {group} was sent no command to answer")
                if not self._wait([node], deadline):
                    raise timed_out(timeout)
        return self._stored(groups, keep)

    def gather_any(self, count: int, timeout: float | None = None) -> list[tuple[int, tuple[bool, Any]]]:
        deadline = None if timeout is None else time.monotonic() + timeout
        self._read_available()
        while len(self._answers) < count:
            owing = [n for n in self._nodes if n.owed]
            if not owing:
                raise RuntimeError(f"gather_any: {count} answers wanted, {len(self._answers)} can come")
            if not self._wait(owing, deadline):
                raise timed_out(timeout)
        return self._first_stored(count)

    def _read_available(self) -> None:
        for node in self._nodes:
            while node.owed and node.channel.ready():
                self._read(node)

    def _wait(self, owing: list[_Node], deadline: float | None) -> bool:
        """Wait until one of ``owing`` answers a message (read it; a dead node's groups get errors); False if
        ``deadline`` came first. Every :data:`CHECK_S` asks Ray whether the nodes are alive."""
        buffered = [n for n in owing if n.channel.buffered]  # read while sending: the descriptor has no news of it
        if buffered:
            for node in buffered:
                self._read(node)
            return True
        fds = [n.channel.fd for n in owing]
        while True:
            left = CHECK_S if deadline is None else min(CHECK_S, deadline - time.monotonic())
            ready = wait(fds, max(left, 0.0))
            if ready:
                for node in owing:
                    if node.channel.fd in ready:
                        self._read(node)
                return True
            dead, _ = self._ray.wait([n.serving for n in owing], num_returns=1, timeout=0)
            if dead:
                self._fail(next(n for n in owing if n.serving == dead[0]))
                return True
            if deadline is not None and time.monotonic() >= deadline:
                return False

    def _read(self, node: _Node) -> None:
        """Read ``node``'s next reply: its answers, and its rows copied into the buffers. The reply leaves the
        inbox only after it is counted as taken, and one taken already is skipped: an interrupt anywhere in here
        leaves the same reply to read again (reading it twice writes the same) or one to skip, never the replies
        one out of step."""
        channel = node.channel
        try:  # (a node lost halfway through a reply: see _Node.check_alive)
            while True:
                message = channel.peek(NUMBER.size, node.check_alive, CHECK_S)
                (number,) = channel.prefix(NUMBER)
                if number >= node.taken:
                    break
                channel.skip()
        except (EOFError, OSError):
            self._fail(node)
            return
        frames = self._frames if node.shared is None else None
        for group, answer in read_reply(message, self.buffers, self.groups, node.shared, frames, number):
            if group in node.owed:  # (an answer for a group already failed, when a worker died, is dropped)
                node.owed.discard(group)
                self._answers[group] = answer
        node.taken = number + 1
        channel.skip()

    def _fail(self, node: _Node) -> None:
        """``node``'s actor died: every group it owes an answer gets the error naming its envs."""
        error = self._died(node)
        node.channel.abandon()  # a message it did not take: the next send to it fails as this one did
        for group in sorted(node.owed):
            self._answers[group] = (False, error)
        node.owed.clear()

    def _died(self, node: _Node) -> WorkerDiedError:
        cause = "its connection closed"
        ready, _ = self._ray.wait([node.serving], timeout=5.0)  # Ray says why, once it has noticed
        if ready:
            try:
                self._ray.get(ready[0])
            except Exception as exc:
                cause = str(exc).splitlines()[0]
        return WorkerDiedError(
            f"Ray actor {node.index} ({node.where}, hosting envs {node.ids.start}..{node.ids.stop - 1}) died: "
            f"{cause}; close() this vector env and make a new one",
            env_id=node.ids.start,
        )

    def _get(self, refs: list[Any], owners: list[_Node], timeout: float | None = None) -> list[Any]:
        try:
            return self._ray.get(refs, timeout=timeout)
        except self._ray.exceptions.GetTimeoutError:
            raise WorkerDiedError(
                f"the Ray actors of this vector env did not start within {timeout:.0f} s (is the cluster at its "
                f"limits, or unreachable?)"
            ) from None
        except self._ray.exceptions.RayActorError as exc:
            dead = next((n for n, ref in zip(owners, refs) if _failed(self._ray, ref)), owners[0])
            raise WorkerDiedError(
                f"Ray actor {dead.index} (hosting envs {dead.ids.start}..{dead.ids.stop - 1}) died: "
                f"{str(exc).splitlines()[0]}",
                env_id=dead.ids.start,
            ) from exc

    # -- shutdown --------------------------------------------------------------------------------------------------

    def close(self, terminate: bool = False) -> None:
        nodes_, self._nodes, self._answers = self._nodes, [], {}
        for node in nodes_:
            channel = node.connection
            if channel is not None:
                if not terminate:
                    try:
                        channel.flush(node.check_alive, CHECK_S)  # what an interrupt left half-sent first
                        channel.send(CLOSE, node.check_alive, CHECK_S)
                    except OSError:  # already gone
                        pass
                # Closed at once: a node still sending a reply (an asynchronous batch in flight) then fails to,
                # rather than wait for a reader, and ends as a node that read CLOSE does.
                channel.close()
        serving = [n.serving for n in nodes_ if n.serving is not None and not terminate]
        if serving:  # each closes its pool and returns
            self._ray.wait(serving, num_returns=len(serving), timeout=_CLOSE_GRACE_S)
        alive = self._ray.is_initialized()  # at exit, Ray may have shut down first: its actors went with it
        self._node_of.clear()  # its actor handles end with this close, not with the vector env
        self._plans.clear()
        for node in nodes_:
            if alive:
                self._ray.kill(node.actor)
            mapping, node.shared, node.mapping = node.mapping, None, None  # its views first: they hold the mapping
            if mapping is not None:
                try:
                    mapping.close()
                except BufferError:  # a view still held (by an exception's traceback): unmapped when it goes
                    pass
        held, self._held = self._held, False
        release(self._ray, held)


def map_shared(pid: int, shared: tuple[int, int, int, int, int, BufferSpec]) -> tuple[mmap.mmap, Buffers] | None:
    """Map, read-only, the buffers of the node actor ``pid`` on this machine (``shared``: their file's descriptor in
    that process, their offset and size, the file's device and inode, and their layout, from
    :func:`~shoal.vector.ray_node.shared_block`); None where they cannot be opened (another user's process, a
    ``/proc`` this process may not read) or the file opened is not theirs (a process of that id elsewhere).

    Why: with its rows on the wire, a synchronous batch of Breakout x 16 on 2 cores cost the node ~0.4 ms to send
    them (441 KiB over loopback TCP) and this process ~0.45 ms to read the reply and copy them, while every env
    waited; with them read out of the node's memory, the reply took ~0.2 ms (one copy of ~0.08 ms), and Ray ran at
    0.87x multiprocessing instead of 0.80x (CartPole x 64: 0.62x instead of 0.54x; medians of 6 alternating
    rounds). The node writes a group's rows only when a command for it comes, which is sent after the reply that
    answered it has been read, so the rows read are that reply's."""
    fd, start, size, device, inode, spec = shared
    try:
        file = os.open(f"/proc/{pid}/fd/{fd}", os.O_RDONLY)
    except OSError:
        return None
    try:
        stat = os.fstat(file)
        if (stat.st_dev, stat.st_ino) != (device, inode) or stat.st_size < start + size:
            return None
        mapping = mmap.mmap(file, start + size, mmap.MAP_SHARED, mmap.PROT_READ)
    except OSError:
        return None
    finally:
        os.close(file)
    return mapping, spec.view(memoryview(mapping)[start : start + size])


def placed(spec: BufferSpec, sources: list[Buffers]) -> Buffers:
    """New buffers for ``spec``, placed so that copying rows out of each of ``sources`` (nodes' buffers, mapped)
    runs at full speed: every large array at a page offset from its source outside the slow window of
    :mod:`~shoal.vector.copies` (two page-aligned blocks would be inside it), where such a place exists."""
    memory = memoryview(bytearray(spec.nbytes + mmap.PAGESIZE))
    for shift in range(0, mmap.PAGESIZE, 256):
        buffers = spec.view(memory[shift : shift + spec.nbytes])
        arrays = step_arrays(buffers, buffers.slot(0))
        if all(
            source.nbytes < CHECKED_FROM or page_delta(array, source) >= NEAR
            for shared in sources
            for array, source in zip(arrays, step_arrays(shared, shared.slot(0)))
        ):
            break
    return buffers


def dial(address: tuple[str, int], authkey: bytes, index: int) -> Connection:
    """Connect to actor ``index`` listening at ``address`` (``multiprocessing.connection.Client``'s handshake, with
    a time limit on reaching it)."""
    try:
        sock = socket.create_connection(address, timeout=_CONNECT_S)
    except OSError as exc:
        raise ConfigError(
            f"cannot reach Ray actor {index} at {address[0]}:{address[1]} from this process ({exc}): backend='ray' "
            f"connects to each node directly, so run it on a machine of the cluster (a Ray Client driver, "
            f"ray://..., outside the cluster's network cannot reach the nodes)"
        ) from exc
    sock.settimeout(None)
    no_delay(sock)
    conn = Connection(sock.detach())
    if not conn.poll(_START_S):  # the actor accepts (and sends its challenge) once serve() runs
        conn.close()
        raise WorkerDiedError(f"Ray actor {index} at {address[0]}:{address[1]} did not answer within {_START_S:.0f} s")
    answer_challenge(conn, authkey)
    deliver_challenge(conn, authkey)
    return conn


def _failed(ray: Any, ref: Any) -> bool:
    try:
        ray.get(ref, timeout=0)
    except ray.exceptions.RayActorError:
        return True
    except ray.exceptions.GetTimeoutError:  # still running: not the dead one
        return False
    return False
