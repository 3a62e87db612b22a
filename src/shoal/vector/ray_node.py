"""The Ray backend's actor: one per node, running that node's share of the envs on a local pool.

The actor builds the same transport ``backend="multiprocessing"`` uses (shared memory and counters; it steps one
share itself in synchronous mode), or, for a single worker's share, steps the envs itself (the serial transport).
It then serves one connection from the vector env (``multiprocessing.connection``, authenticated by a key that came
through Ray): a message per batch carries the commands of this node's groups and their actions; a reply carries
the answers of some of them and their rows of every per-step array (frame stacks as their new frames:
:mod:`shoal.vector.stacks`), unless the vector env runs on this machine and reads those rows out of the node's memory
(:data:`SHARED`; see :func:`shared_block`). In synchronous mode one reply
answers each message, once all its groups are done. In asynchronous mode (several groups per worker) each answer goes
back as soon as the pool has it, so that the vector env's first-N-of-M batch can take it, and while groups are in
flight the actor looks for a new message every :data:`POLL_S` as it waits for its workers, so that a group sent
back is stepped at once.
"""

from __future__ import annotations

import os
import pickle
import socket
import struct
from multiprocessing import AuthenticationError
from multiprocessing.connection import Connection, answer_challenge, deliver_challenge
from typing import Any, Sequence

import cloudpickle
import numpy as np

from shoal.errors import WaitTimeoutError
from shoal.vector import _worker
from shoal.vector.buffers import Buffers, BufferSpec
from shoal.vector.commands import Command
from shoal.vector.stacks import Receiver, Sender, stacked
from shoal.vector.transport import Transport, pickled

POLL_S = 0.001
"""How often an actor serving asynchronous batches looks for the next message while it waits for its workers."""
CLOSE = b""
"""The message that ends an actor's service (its pool is closed; the actor is then killed)."""
SHARED = b"M"
"""The message that says the vector env has mapped the node's memory (:func:`shared_block`): from then on, replies
carry no rows."""
HANDSHAKE_S = 5.0
"""How long a connection to an actor may take to answer the key's challenge before the actor drops it and waits for
the next (a silent stranger on the port must not keep the vector env out)."""


class NodeHost:
    """The actor class: groups ``groups`` (global env id ranges, global group indices ``first``, ``first + 1``, ...)
    on workers ``hosts`` (indices into ``groups``), listening for the vector env on this node's address."""

    def __init__(
        self,
        factory_bytes: bytes,
        groups: list[range],
        hosts: list[list[int]],
        first: int,
        spec: BufferSpec,
        autoreset_mode: Any,
        authkey: bytes,
    ) -> None:
        import ray

        self.first = first
        self.ranges = {first + i: ids for i, ids in enumerate(groups)}  # global group index -> its env ids
        self.overlaps = any(len(members) > 1 for members in hosts)  # several groups per worker: asynchronous batches
        self.error: bytes | None = None
        self.local: Transport | None = None
        self.block: tuple[int, int, int, int, int] | None = None  # see shared_block()
        self.rows = True  # replies carry the rows (until the vector env says it maps the node's memory)
        # where the rows may be frame stacks: the rows sent last (shoal.vector.stacks; dropped with the rows)
        envs = range(min(ids.start for ids in groups), max(ids.stop for ids in groups))
        self.frames = Sender(spec, envs) if stacked(spec) else None
        self.authkey = authkey
        self.server = socket.create_server((ray.util.get_node_ip_address(), 0))
        try:
            factory = cloudpickle.loads(factory_bytes)
            if len(hosts) == 1:
                from shoal.vector.arena import shared_bytes
                from shoal.vector.serial import SerialTransport

                memory = shared_bytes(spec.nbytes)  # shared: a vector env on this machine may map it
                self.local = SerialTransport(factory, groups, spec, autoreset_mode, memory=memory)
            else:
                from shoal.vector.multiproc import MultiprocessingTransport

                # Waiters spin as in a local pool (the transport's default, adaptive): a round trip to the vector
                # env is shorter than the spin on one machine and on a LAN, and spinning stops where it keeps
                # running out. Measured on 2 cores (three alternating runs, medians of 4 rounds): CartPole x 64 on
                # Ray 0.41-0.47x multiprocessing without it, 0.56-0.66x with it; Breakout x 16 unchanged (~0.8x).
                self.local = MultiprocessingTransport(
                    factory, groups, spec, autoreset_mode, hosts, inline=not self.overlaps
                )
                memory = self.local.memory
            self.block = shared_block(memory)
        except BaseException as exc:
            self.error = _worker.error_reply(exc)

    def ready(self) -> tuple[bytes, Any, int, str, Any]:
        """:data:`~shoal.vector._worker.READY` (or why not), the address to connect to, this process's id, the Ray
        node's, and where the buffers lie: :func:`shared_block` and their layout (None: nowhere a reader can map)."""
        import ray

        status = self.error if self.error is not None else _worker.READY
        shared = None if self.block is None or self.local is None else (*self.block, self.local.buffers.spec)
        return status, self.server.getsockname()[:2], os.getpid(), ray.get_runtime_context().get_node_id(), shared

    def serve(self) -> None:
        """Answer the vector env's messages until it sends :data:`CLOSE` or goes away; then close the pool."""
        conn = self._accept()
        self.server.close()
        try:
            if self.local is not None:
                self._serve(conn, self.local)
        except (EOFError, OSError):
            pass  # the vector env is gone
        finally:
            conn.close()
            if self.local is not None:
                self.local.close()

    def _accept(self) -> Connection:
        """The vector env's connection: the first to pass the key's challenge both ways (``multiprocessing``'s
        handshake) within :data:`HANDSHAKE_S`; whatever else reaches the port first is dropped."""
        while True:
            sock, _ = self.server.accept()
            sock.settimeout(None)
            no_delay(sock)
            conn = Connection(sock.detach())
            _receive_timeout(conn.fileno(), HANDSHAKE_S)  # a blocking read past it fails (EAGAIN)
            try:
                deliver_challenge(conn, self.authkey)
                answer_challenge(conn, self.authkey)
            except (AuthenticationError, EOFError, OSError):
                conn.close()
                continue
            _receive_timeout(conn.fileno(), 0)
            return conn

    def _serve(self, conn: Connection, local: Transport) -> None:
        owed: set[int] = set()  # groups sent a command and not answered back yet
        answered: dict[int, tuple[bool, Any]] = {}  # answers read from the pool, not sent yet
        replies = 0  # sent so far: each reply carries its number
        while True:
            if not owed or (self.overlaps and conn.poll(0)):
                message = conn.recv_bytes()
                if message == CLOSE:
                    return
                if message == SHARED:
                    self.rows, self.frames = False, None
                    continue
                owed.update(self._start(message, local, answered))
                continue
            # Asynchronous batches: each answer goes back at once (the first N of M may want it); synchronous: all
            # of them together, in one reply.
            if not answered or (not self.overlaps and len(answered) < len(owed)):
                try:
                    done = local.gather_any(1, POLL_S if self.overlaps else None)
                except WaitTimeoutError:
                    continue
                answered.update((g + self.first, answer) for g, answer in done)
                local.release(g for g, _ in done)
                continue
            groups = list(answered)
            owed.difference_update(groups)
            answers = [answered.pop(g) for g in groups]
            ranges = [self.ranges[g] for g in groups]
            conn.send_bytes(reply(replies, groups, answers, local.buffers if self.rows else None, ranges, self.frames))
            replies += 1

    def _start(self, message: bytes, local: Transport, answered: dict[int, tuple[bool, Any]]) -> list[int]:
        """Write a message's actions and start its commands; its groups (global indices)."""
        groups, commands = read_request(message, local.buffers.actions, self.ranges)
        try:
            if commands is None:
                local.step([g - self.first for g in groups])
            else:
                local.dispatch({g - self.first: c for g, c in commands.items()})
        except BaseException as exc:  # a worker found dead as the commands went out: every group of it answers so
            for group in groups:
                answered.setdefault(group, (False, exc))
        return groups

    def pid(self) -> int:
        return os.getpid()


# -- the wire: a message is b"S" (a plain step), b"P" (pickled commands) or CLOSE; a reply is its number, the
# answers, pickled unless all are empty, then the rows of every per-step array, raw (observations that may be frame
# stacks: as frames, shoal.vector.stacks). Both sides know the row sizes from the spec.

_COUNT = struct.Struct("<i")
NUMBER = struct.Struct("<q")
"""A reply's number (the node's replies count from 0), before the rest: the reader knows which it has taken."""


def step_request(groups: Sequence[int], actions: np.ndarray, ranges: Sequence[range]) -> bytes:
    """A plain step of ``groups`` (env ids ``ranges``): their indices, then their rows of the actions, raw."""
    parts: list[Any] = [b"S", _COUNT.pack(len(groups)), np.asarray(groups, np.int32).tobytes()]
    parts += [actions[ids.start : ids.stop] for ids in ranges]
    return b"".join(parts)


def command_request(commands: dict[int, Command], actions: list[np.ndarray | None]) -> bytes:
    """Commands of several groups, with their rows of the actions where the command is a step (else None); pickled,
    or cloudpickled where a command carries a function (``call`` of a lambda)."""
    return b"P" + pickled((commands, list(commands), actions), "the commands")


def read_request(message: bytes, actions: np.ndarray, ranges: dict[int, range]) -> tuple[list[int], Any]:
    """A message's groups and commands (None: a plain step), its actions written into ``actions``."""
    if message[:1] == b"P":
        commands, groups, rows = pickle.loads(message[1:])
        for group, values in zip(groups, rows):
            if values is not None:
                ids = ranges[group]
                actions[ids.start : ids.stop] = values
        return groups, commands
    (count,) = _COUNT.unpack_from(message, 1)
    groups = np.frombuffer(message, np.int32, count, 1 + _COUNT.size).tolist()
    _unpack(memoryview(message)[1 + _COUNT.size + 4 * count :], [actions], [ranges[g] for g in groups])
    return groups, None


def reply(
    number: int, groups: list[int], answers: list[tuple[bool, Any]], buffers: Buffers | None, ranges: list[range],
    frames: Sender | None = None,
) -> bytes:
    """A node's reply ``number``: its answers for ``groups`` (env ids ``ranges``): the groups, their answers
    (encoded as a worker's; pickled unless all are empty), and their rows of every per-step array in ``buffers``,
    raw (None: no rows; the reader maps the node's memory), the observations as ``frames`` encodes them if given
    (:mod:`shoal.vector.stacks`)."""
    encoded = []
    for ids, (ok, value) in zip(ranges, answers):
        try:
            encoded.append(_worker.reply(value, np.arange(ids.start, ids.stop)) if ok else _worker.error_reply(value))
        except Exception as exc:  # an answer that cannot be pickled: the error naming its env
            encoded.append(_worker.error_reply(exc))
    header = b"" if not any(encoded) else pickle.dumps(encoded, protocol=pickle.HIGHEST_PROTOCOL)
    parts: list[Any] = [NUMBER.pack(number), _COUNT.pack(len(groups)), np.asarray(groups, np.int32).tobytes(),
                        _COUNT.pack(len(header)), header]
    if buffers is not None:
        ranges = joined(ranges)
        arrays = step_arrays(buffers, buffers.slot(0))
        if frames is not None:
            parts += frames.encode(arrays[0], ranges)
            arrays = arrays[1:]
        for array in arrays:
            parts += [array[ids.start : ids.stop] for ids in ranges]
    return b"".join(parts)


def read_reply(
    message: bytes, buffers: Buffers, ranges: Sequence[range], shared: Buffers | None = None,
    frames: Receiver | None = None, number: int = 0,
) -> list[tuple[int, tuple[bool, Any]]]:
    """The groups of reply ``number`` (``message``: without its number) and their answers, their rows copied into
    ``buffers`` (observations: into their target slots) from the reply, or from ``shared`` (the node's own buffers,
    mapped: the reply carries no rows); ``ranges``: every group's env ids; ``frames``: where the observations came
    as frames (:mod:`shoal.vector.stacks`). Reading one twice writes the same (the node does not touch a group's
    rows again before its next command, which is sent after this read)."""
    (count,) = _COUNT.unpack_from(message)
    groups = np.frombuffer(message, np.int32, count, _COUNT.size).tolist()
    offset = _COUNT.size * 2 + 4 * count
    (size,) = _COUNT.unpack_from(message, offset - _COUNT.size)
    answers = pickle.loads(message[offset : offset + size]) if size else [_worker.OK] * count
    data = memoryview(message)[offset + size :]
    mine = joined([ranges[g] for g in groups])
    if buffers.slots_on[0]:  # observations go to their target slots: through a staging copy of slot 0's layout
        span = np.concatenate([np.arange(r.start, r.stop) for r in mine])
        if shared is None:
            obs = np.empty((len(span), *buffers.obs.shape[1:]), buffers.obs.dtype)
            if frames is None:
                data = _unpack(data, [obs], [range(len(span))])
            else:
                data = frames.decode(data, number, mine, obs)
        else:
            obs = shared.obs[span]
        buffers.obs[buffers.target_rows(span)] = obs
        buffers.settle(span)
        arrays, sources = step_arrays(buffers, None), None if shared is None else step_arrays(shared, None)
    else:
        arrays = step_arrays(buffers, buffers.slot(0))
        sources = None if shared is None else step_arrays(shared, shared.slot(0))
        if frames is not None and shared is None:
            data = _rebuilt(data, frames, number, mine, arrays[0])
            arrays = arrays[1:]
    if sources is None:
        _unpack(data, arrays, mine)
    else:
        for array, source in zip(arrays, sources):
            for ids in mine:
                array[ids.start : ids.stop] = source[ids.start : ids.stop]
    return [(g, _worker.decode(a)) for g, a in zip(groups, answers)]


def _rebuilt(data: memoryview, frames: Receiver, number: int, ranges: list[range], obs: np.ndarray) -> memoryview:
    """:meth:`Receiver.decode` into rows ``ranges`` of ``obs`` (one env per row); the rest of ``data``."""
    if len(ranges) == 1:
        return frames.decode(data, number, ranges, obs[ranges[0].start : ranges[0].stop])
    staged = np.empty((sum(len(r) for r in ranges), *obs.shape[1:]), obs.dtype)
    data = frames.decode(data, number, ranges, staged)
    at = 0
    for ids in ranges:
        obs[ids.start : ids.stop] = staged[at : at + len(ids)]
        at += len(ids)
    return data


def step_arrays(buffers: Buffers, obs: np.ndarray | None) -> list[np.ndarray]:
    """Every array a step writes, one row per env: ``obs`` (slot 0's rows; None: left out), rewards, ..., extras."""
    arrays = [buffers.rewards, buffers.terminations, buffers.truncations, buffers.needs_reset, buffers.steps_taken,
              *buffers.extras.values()]
    return arrays if obs is None else [obs, *arrays]


def joined(ranges: list[range]) -> list[range]:
    """``ranges`` with each run of adjacent ones joined into one (rows laid out range by range lie the same way):
    a node's groups are usually consecutive, and one copy per array costs less than one per group."""
    out = ranges[:1]
    for ids in ranges[1:]:
        if ids.start == out[-1].stop:
            out[-1] = range(out[-1].start, ids.stop)
        else:
            out.append(ids)
    return out


def _unpack(data: memoryview, arrays: list[np.ndarray], ranges: list[range]) -> memoryview:
    """Copy rows ``ranges`` of each of ``arrays`` out of ``data`` (laid out array by array, range by range); the
    rest of ``data``."""
    offset = 0
    for array in arrays:
        row = array[:1].nbytes
        if not row:  # a space with nothing of fixed size (Text): its values travel with the answers
            continue
        for ids in ranges:
            count = ids.stop - ids.start
            array[ids.start : ids.stop] = np.frombuffer(data, array.dtype, count * row // array.itemsize,
                                                        offset).reshape((count, *array.shape[1:]))
            offset += count * row
    return data[offset:]


def shared_block(memory: Any) -> tuple[int, int, int, int, int] | None:
    """Where the shared block ``memory`` (:func:`~shoal.vector.arena.shared_bytes`) lies, for a process on this
    machine to map: its arena's file descriptor (``/proc/<pid>/fd/<fd>`` opens the file, unlinked as it is), its
    offset and size in that file, and the file's device and inode, which the reader checks it opened; None where
    that cannot be told (an arena without a file).

    Why: see :func:`~shoal.vector.ray_transport.map_shared`. ``multiprocessing`` keeps the arena's descriptor in
    ``BufferWrapper._state``, which no public name reaches (a test maps one: a Python release that moves it is
    caught, and the rows then travel on the wire)."""
    try:
        (arena, start, _), size = memory._wrapper._state
        fd = int(arena.fd)
    except (AttributeError, TypeError, ValueError):
        return None
    if fd < 0:
        return None
    stat = os.fstat(fd)
    return fd, int(start), int(size), stat.st_dev, stat.st_ino


def no_delay(sock: socket.socket) -> None:
    """Send each message as it is written (``TCP_NODELAY``). With Nagle's algorithm on, a short write while an
    earlier one is unacknowledged waits for its ACK, which the other end delays by up to 40 ms: a node answering two
    batches in a row waited that long (measured: asynchronous batches of a cheap env took 44 ms instead of 2)."""
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def _receive_timeout(fd: int, seconds: float) -> None:
    """Limit how long a blocking read of socket ``fd`` waits (0: no limit), in the kernel, so that it holds for any
    reader of the descriptor (a ``Connection``)."""
    sock = socket.socket(fileno=fd)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", int(seconds), int(seconds % 1 * 1e6)))
    finally:
        sock.detach()
