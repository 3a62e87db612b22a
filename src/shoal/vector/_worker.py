"""The loop each multiprocessing worker runs: one engine over its groups' rows of the shared buffers.

Commands come through the worker's :class:`~shoal.vector.link.Link`: the index of one of its groups to step (the
actions are already in shared memory), or to run a command whose payload the parent left in shared memory (action
sequences, a reset with neither seeds nor options: :func:`shared_kind`), a pickled
:class:`~shoal.vector.commands.Command`, or :data:`CLOSE`. One answer
per command, in the order they came: nothing (the results are in shared memory) or a pickled ``(ok, value)`` pair
carrying infos, call results or an error (in the answer slot's mailbox when it is small, else on the pipe). So a
step whose infos are empty makes no pickle, and one whose pickled answer fits a mailbox no system call.
In same-step autoreset mode, the final observations of the envs whose episode ended wait in shared memory too
(:func:`park_finals`), and a step whose only info is which envs ended is answered with the code :data:`FINALS`. A
step whose every env returned the same numeric infos is answered with the code :data:`TABLE`, the infos in shared
memory too (:mod:`shoal.vector.info_table`).
Before any of that the worker says :data:`READY` (or why not) on its pipe.
"""

from __future__ import annotations

import io
import logging
import os
import pickle
import signal
import traceback
from typing import Any, NamedTuple

import cloudpickle
import numpy as np

from shoal.errors import EnvError, EnvOutputError, ShoalError
from shoal.vector.buffers import Buffers, BufferSpec
from shoal.vector.channel import Channel
from shoal.vector.commands import Command, LooseObs, Op, Sequences
from shoal.vector.engine import run_of
from shoal.vector.info_table import InfoTable
from shoal.vector.infos import Block, Entry, Finals, unbatch_info
from shoal.vector.heap import retain_freed_memory
from shoal.vector.link import Link, Spin, link_memory

CLOSE = b"\x02"
READY = b"\x03"
OK = b""
FINALS = 1
"""An answer's code (nothing on the pipe): the group's answer is one :class:`Finals` without infos, of the envs
flagged in the buffers' ``ended``, their final observations in ``final_obs`` (:func:`parked_finals` rebuilds it)."""
TABLE = 2
"""An answer's code (nothing on the pipe): the group's answer is its envs' infos, in the buffers' info table
(:mod:`shoal.vector.info_table`)."""
SEQUENCES, RESET = 1, 2
"""Kinds of command posted without a message (:func:`shared_kind`; a worker of ``n`` groups is posted ``kind * n +
group``, a step, kind 0, the group alone): run the group's action sequences in the buffers' sequence area; reset, with
neither seed nor options, the envs of the group flagged in the buffers' ``resetting``."""
_ORPHAN_POLL_S = 1.0  # how often a sleeping worker checks that its parent is still alive
log = logging.getLogger(__name__)
host_index: int | None = None
"""In a worker process, the index of the host it runs (0, 1, ...); None in any other process."""


def error_reply(exc: BaseException) -> bytes:
    if not isinstance(exc, ShoalError):
        wrapped = EnvError.of(type(exc))(
            f"worker raised {type(exc).__name__}: {exc}", remote_traceback=traceback.format_exc()
        )
        wrapped.__cause__ = exc
        exc = wrapped
    try:
        return pickle.dumps((False, exc))
    except Exception:  # an unpicklable cause (or a class the parent cannot import): keep message and traceback
        bare = EnvError(str(exc), getattr(exc, "env_id", None), getattr(exc, "remote_traceback", ""))
        try:
            bare = EnvError.of(getattr(type(exc), "kind", EnvError))(str(exc), bare.env_id, bare.remote_traceback)
            return pickle.dumps((False, bare))
        except Exception:
            bare = EnvError(str(exc), bare.env_id, bare.remote_traceback)
            return pickle.dumps((False, bare))


class Replies:
    """A worker's answers, pickled by one :class:`_Pickler` kept for them all (one thread's: the worker loop's). A
    new pickler and buffer each answer cost ~0.7 us of the ~1.3 that a ``RecordEpisodeStatistics`` episode took."""

    def __init__(self) -> None:
        self._out = io.BytesIO()
        self._pickler = _Pickler(self._out, protocol=pickle.HIGHEST_PROTOCOL)

    def __call__(self, value: Any, ids: Any = None) -> bytes:
        """The answer carrying ``value`` (what a command returned for envs ``ids``); an :class:`EnvOutputError`
        naming the env whose part of it cannot be pickled."""
        if value is None or (isinstance(value, list) and not value):
            return OK
        out = self._out
        out.seek(0)
        out.truncate()  # (a large answer's buffer is given back: BytesIO shrinks past half its room)
        self._pickler.clear_memo()
        try:
            self._pickler.dump((True, value))
        except Exception as exc:
            self._pickler = _Pickler(out, protocol=pickle.HIGHEST_PROTOCOL)  # nothing of a failed dump kept
            raise _unpicklable(value, ids, exc) from exc
        return out.getvalue()


def reply(value: Any, ids: Any = None) -> bytes:
    """The answer carrying ``value``, as :class:`Replies` gives it, by a pickler of its own (for any thread)."""
    return Replies()(value, ids)


class _Pickler(pickle.Pickler):
    """Pickles numpy's scalars as their type and Python value: the same scalar, its type and value exact, comes
    back, and everything else as any pickler does. Pickled by default, each one carries its dtype and its bytes:
    four envs' infos of MuJoCo's HalfCheetah (four numpy scalars each) took 10.3 us to pickle that way and 4 us to
    unpickle, against 6.7 and 2.8 so, and its 8 envs on 2 workers stepped 5-11% faster (three A/B runs, 2 cores).
    The hook is a Python call for each object that is not a plain one: 8 infos of a small array each took ~12% longer
    to pickle (18.0 against 20.2 us), CartPole x 8 with such infos stepped 2.6% slower in one A/B run. (A dispatch
    table instead cost ~0.6 us for each such object, its misses raising KeyError; wrapping the scalars beforehand
    saved less on them.)"""

    def reducer_override(self, obj: Any) -> Any:  # (called for objects other than None, bools, ints, str, ...)
        kind = type(obj)
        return (kind, (obj.item(),)) if kind in _SCALARS else NotImplemented


_SCALARS = frozenset((
    np.float64, np.float32, np.float16, np.complex128, np.complex64, np.bool_,
    np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
))  # (not longdouble nor clongdouble: item() would round them to a Python float or complex)


def _unpicklable(value: Any, ids: Any, exc: Exception) -> Exception:
    """Which env's part of an answer cannot be pickled: its info entries, loose observations or call results."""
    parts: list[tuple[int | None, str, Any]] = []
    if isinstance(value, LooseObs):
        parts += _entry_parts(value.entries)
        parts += [(env_id, "observation", obs) for env_id, obs in value.values.items()]
    elif isinstance(value, list) and all(type(v) in (Finals, Block) or isinstance(v, tuple) and len(v) == 2
                                         and isinstance(v[1], dict) and isinstance(v[0], int) for v in value):
        parts += _entry_parts(value)
    elif isinstance(value, list) and ids is not None and len(value) == len(ids):
        parts += [(int(env_id), "call result", v) for env_id, v in zip(ids, value)]
    for env_id, what, part in parts:
        try:
            pickle.dumps(part, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as bad:
            return EnvOutputError(
                f"env {env_id} returned an {what} that cannot be pickled to send it to the parent process "
                f"({type(bad).__name__}: {bad})",
                env_id=env_id,
            )
    return EnvOutputError(f"an answer cannot be pickled to send it to the parent process ({type(exc).__name__}: {exc})")


def _entry_parts(entries: list[Entry]) -> list[tuple[int, str, Any]]:
    parts: list[tuple[int, str, Any]] = []
    for entry in entries:
        if isinstance(entry, Finals):
            values = [] if entry.obs is None else entry.obs  # None: in shared memory, pickled fine
            parts += [(env_id, "observation", obs) for env_id, obs in zip(entry.ids.tolist(), values)]
            parts += [(env_id, "info", info) for env_id, info in zip(entry.ids.tolist(), entry.infos)]
        elif isinstance(entry, Block):
            parts += [(entry.start + j, "info", info) for j, info in enumerate(unbatch_info(entry.info, entry.size))]
        else:
            parts.append((entry[0], "info", entry[1]))
    return parts


def shared_kind(buffers: Buffers, ids: range, command: Command) -> int:
    """In the parent: write what ``command`` for the group of envs ``ids`` carries into the buffers, where its worker
    reads it (:func:`shared_command`), and return the kind of command to post (:data:`SEQUENCES`, :data:`RESET`); 0
    where it does not go that way (other ops, sequences that do not fit, a reset with seeds or options): pickled."""
    if command.op is Op.SEQUENCES:
        return SEQUENCES if put_sequences(buffers, ids, command.payload) else 0
    if command.op is Op.RESET and buffers.resetting is not None:
        seeds, options = command.payload
        if options is None and seeds.count(None) == len(seeds):
            flags = buffers.resetting[ids.start : ids.stop]
            flags[:] = False
            flags[command.ids - ids.start] = True
            return RESET
    return 0


def shared_command(buffers: Buffers, kind: int, group: np.ndarray) -> Command:
    """In a worker: the command of ``kind`` that :func:`shared_kind` left in the buffers for ``group`` (its env ids)."""
    if kind == SEQUENCES:
        return Command(Op.SEQUENCES, group, sequences_in(buffers, group))
    ids = group[buffers.resetting[int(group[0]) : int(group[-1]) + 1]]  # type: ignore[index]
    return Command(Op.RESET, ids, ([None] * len(ids), None))


def put_sequences(buffers: Buffers, ids: range, sequences: Sequences) -> bool:
    """In the parent: write the action sequences of a group (envs ``ids``) into its region of the buffers' sequence
    area, for its worker to read (:func:`sequences_in`; a group in flight reads only its own region, so an
    asynchronous batch's sequences never overwrite another's). False where they do not fit: no area, more actions
    than the region holds, or actions of another dtype or shape (a subclass's check); they go pickled then."""
    area, values, rows = buffers.sequence_actions, sequences.values, buffers.spec.sequence_rows
    if area is None or len(values) > rows * len(ids):
        return False
    if values.dtype != area.dtype or values.shape[1:] != area.shape[1:]:
        return False
    start = ids.start * rows
    area[start : start + len(values)] = values
    buffers.sequence_lengths[ids.start : ids.stop] = np.diff(sequences.offsets)  # type: ignore[index]
    buffers.sequence_gamma[ids.start] = sequences.gamma  # type: ignore[index]
    return True


def sequences_in(buffers: Buffers, ids: np.ndarray) -> Sequences:
    """In a worker: the action sequences :func:`put_sequences` wrote for the group of envs ``ids`` (consecutive),
    their actions a view of the area (as a step's actions are of the buffers')."""
    first = int(ids[0])
    lengths = buffers.sequence_lengths[first : first + len(ids)]  # type: ignore[index]
    offsets = np.zeros(len(ids) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    start = first * buffers.spec.sequence_rows
    values = buffers.sequence_actions[start : start + int(offsets[-1])]  # type: ignore[index]
    return Sequences(values, offsets, float(buffers.sequence_gamma[first]))  # type: ignore[index]


def park_finals(value: Any, buffers: Buffers, ids: np.ndarray | None) -> tuple[Any, int]:
    """Same-step mode, in a worker: write the final observations of ``value``'s :class:`Finals` (an engine's answer)
    into the buffers' ``final_obs``, where they fit its records exactly, leaving ``obs`` None (read them there).
    Returns what is left to send and the answer's code: :data:`FINALS` when that is one Finals without infos and
    ``ids`` (the group's env ids, consecutive) are given, its envs then flagged in ``ended`` (nothing to send), else
    0. An env that returned a value the records would not give back as it was (another dtype or type: a Python int
    for a Discrete space) has its final observations pickled, as any other answer."""
    if type(value) is not list or not value:
        return value, 0
    parked = [entry._replace(obs=None) if type(entry) is Finals and _park(entry, buffers) else entry
              for entry in value]
    only = parked[0]
    if ids is None or len(parked) != 1 or type(only) is not Finals or only.obs is not None or any(only.infos):
        return parked, 0
    ended = buffers.ended
    assert ended is not None  # allocated with final_obs
    ended[run_of(ids)] = False
    ended[only.ids] = True
    return None, FINALS


def _park(finals: Finals, buffers: Buffers) -> bool:
    """Write the final observations of ``finals`` into ``buffers.final_obs`` if they fit its records exactly."""
    area, obs = buffers.final_obs, finals.obs
    assert area is not None  # park_finals runs only with spec.finals
    if isinstance(obs, np.ndarray):  # records already (an engine that reads them from the buffers)
        area[finals.ids] = obs
        return True
    assert obs is not None  # an engine's Finals always carry their observations
    layout = buffers.spec.obs
    if layout.structured:  # a dict or tuple read back from records is not the env's own container
        return False
    dtype, shape = layout.item_dtype, layout.item_shape
    if not all(type(v) is np.ndarray and v.dtype == dtype and v.shape == shape for v in obs):
        return False
    for env_id, v in zip(finals.ids.tolist(), obs):
        area[env_id] = v
    return True


def parked_finals(value: Any, buffers: Buffers) -> Any:
    """In the parent: a worker's answer ``value`` with the final observations :func:`park_finals` left in the buffers
    read back (copies: the buffers' are overwritten by the group's next step)."""
    if type(value) is not list:
        return value
    area = buffers.final_obs
    return [Finals(e.ids, area[e.ids], e.infos) if type(e) is Finals and e.obs is None else e  # type: ignore[index]
            for e in value]


def finals_of(buffers: Buffers, ids: np.ndarray) -> list[Entry]:
    """The answer a worker gave the code :data:`FINALS` for group ``ids`` (consecutive env ids)."""
    done = ids[buffers.ended[run_of(ids)]]  # type: ignore[index]
    return [Finals(done, buffers.final_obs[done], [])]  # type: ignore[index]


def decode(message: bytes) -> tuple[bool, Any]:
    """A worker's answer as ``(ok, value)``: :data:`OK` is ``(True, None)``, :data:`READY` is ``(True, READY)``."""
    if message == OK:
        return (True, None)
    if message == READY:
        return (True, READY)
    return pickle.loads(message)


class Signals(NamedTuple):
    """What a worker needs to build its end of its :class:`~shoal.vector.link.Link` (picklable for spawn)."""

    memory: Any  # the shared block holding the counters (and the mailboxes)
    counters: int  # how many it holds
    host: int
    ring: int
    spin_s: float
    at: int = 0  # where the counters start in it
    mail_at: int | None = None  # where the mailboxes start in it (link.mailbox_bytes); None: all messages on the pipe

    def link(self, conn: Any, stalled: Any = None) -> Link:
        """This worker's end of its link; ``stalled`` runs every :data:`_ORPHAN_POLL_S` that a message to or from
        the parent waits."""
        channel = Channel(conn, stalled, _ORPHAN_POLL_S)
        counters, mailboxes = link_memory(self.memory, self.at, self.counters, self.mail_at)
        return Link(channel, counters, self.host, self.ring, mailboxes)


def orphan_check(parent: int) -> Any:
    """A check that raises :class:`EOFError` once this process's parent (pid ``parent``) is gone. A worker cannot
    count on its pipe's end of file then: a forked sibling, or the worker itself, may hold the parent's end open."""

    def check() -> None:
        if os.getppid() != parent:
            raise EOFError(f"the parent process (pid {parent}) is gone")

    return check


def run(
    conn: Any,
    memory: Any,
    spec: BufferSpec,
    factory_bytes: bytes,
    groups: list[range],
    autoreset_mode: Any,
    signals: Signals,
) -> None:
    """Worker entry point (the target of ``multiprocessing.Process``): one engine over ``groups`` (consecutive)."""
    global host_index
    host_index = signals.host
    ids = range(groups[0].start, groups[-1].stop)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle; it closes us
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not a handler inherited from the parent (Ray installs one)
    retain_freed_memory()  # an engine's large temporaries are reused, not mapped and faulted in every step
    orphaned = orphan_check(os.getppid())
    link = signals.link(conn, orphaned)  # also while a message to or from the parent waits
    buffers = spec.view(memory)
    try:
        engine = cloudpickle.loads(factory_bytes)(ids, buffers, autoreset_mode)
    except BaseException as exc:
        link.channel.send(error_reply(exc))
        return
    link.channel.send(READY)
    group_ids = [np.arange(g.start, g.stop) for g in groups]
    spin, no_spin = Spin(signals.spin_s), Spin(0.0)
    parking = buffers.final_obs is not None
    table = InfoTable.of(buffers)
    reply = Replies()
    try:
        while True:
            # Spin briefly (spin_s is 0 when processes outnumber cores; the budget adapts: link.Spin), then sleep,
            # waking now and then to notice a parent that died without closing its end (a forked sibling may hold
            # that end open).
            ready = link.wait_command(spin, _ORPHAN_POLL_S)
            while not ready:
                orphaned()
                ready = link.wait_command(no_spin, _ORPHAN_POLL_S)
            command = link.take_command()
            if command == CLOSE:
                return
            try:
                code = 0
                if isinstance(command, int) and command < len(group_ids):
                    group = group_ids[command]
                    value = engine.run_step(group)
                    if parking:
                        value, code = park_finals(value, buffers, group)
                    if table is not None and not code and type(value) is list and value and table.put(value, group):
                        value, code = None, TABLE
                    answer = reply(value, group)
                else:  # a command in shared memory, or pickled: answered alike
                    if isinstance(command, int):
                        kind, local = divmod(command, len(group_ids))
                        order = shared_command(buffers, kind, group_ids[local])
                    else:
                        order = pickle.loads(command)
                    value = engine.execute(order)
                    if parking:
                        value, _ = park_finals(value, buffers, None)
                    answer = reply(value, order.ids)
            except BaseException as exc:
                answer = error_reply(exc)
            link.answer(answer, code)
    except (EOFError, OSError, KeyboardInterrupt):
        return  # the parent is gone
    finally:
        try:
            engine.close()
        except Exception:  # closing after the parent died: nobody is left to report to
            log.exception("closing envs %s failed", ids)
