"""The loop each multiprocessing worker runs: one engine over its group's rows of the shared buffers.

Protocol on the worker's pipe (parent -> worker): :func:`step_message` (two bytes, :data:`STEP` and which of the
worker's groups; the actions are already in shared memory), a pickled :class:`~shoal.vector.engine.Command`, or
:data:`CLOSE`. Worker -> parent, one answer per command in the order they came: :data:`OK` (empty: nothing to
report, the results are in shared memory) or a pickled ``(ok, value)`` pair carrying infos, call results or an
error. So a step whose infos are empty moves two bytes there, none back, and no pickle.
"""

from __future__ import annotations

import logging
import os
import pickle
import signal
import time
import traceback
from typing import Any

import cloudpickle
import numpy as np

from shoal.errors import EnvError
from shoal.vector.buffers import BufferSpec

STEP = b"\x01"
CLOSE = b"\x02"
READY = b"\x03"
OK = b""
_ORPHAN_POLL_S = 1.0
log = logging.getLogger(__name__)  # how often a waiting worker checks that its parent is still alive


def step_message(local_group: int) -> bytes:
    """The message that steps the worker's group ``local_group`` (its index among the worker's groups)."""
    return STEP + bytes((local_group,))


def error_reply(exc: BaseException) -> bytes:
    if not isinstance(exc, EnvError):
        wrapped = EnvError(f"worker raised {type(exc).__name__}: {exc}", remote_traceback=traceback.format_exc())
        wrapped.__cause__ = exc
        exc = wrapped
    try:
        return pickle.dumps((False, exc))
    except Exception:  # an unpicklable cause: keep the message and traceback
        bare = EnvError(str(exc), getattr(exc, "env_id", None), getattr(exc, "remote_traceback", ""))
        return pickle.dumps((False, bare))


def reply(value: Any) -> bytes:
    if value is None or (isinstance(value, list) and not value):
        return OK
    return pickle.dumps((True, value), protocol=pickle.HIGHEST_PROTOCOL)


def decode(message: bytes) -> tuple[bool, Any]:
    """A worker's answer as ``(ok, value)``: :data:`OK` is ``(True, None)``, :data:`READY` is ``(True, READY)``."""
    if message == OK:
        return (True, None)
    if message == READY:
        return (True, READY)
    return pickle.loads(message)


def wait_readable(conn: Any, spin_s: float, timeout: float | None) -> bool:
    """Wait until ``conn`` has data: poll without sleeping for up to ``spin_s``, then block up to ``timeout``.

    A short wait answered while spinning skips the sleep/wake-up round trip (about 50 us on a small VM); a long wait
    costs ``spin_s`` of CPU and then nothing.
    """
    if spin_s > 0 and not conn.poll(0):
        deadline = time.perf_counter() + spin_s
        while time.perf_counter() < deadline:
            if conn.poll(0):
                return True
    return bool(conn.poll(timeout))


def run(
    conn: Any,
    memory: Any,
    spec: BufferSpec,
    factory_bytes: bytes,
    groups: list[range],
    autoreset_mode: Any,
    spin_s: float,
) -> None:
    """Worker entry point (the target of ``multiprocessing.Process``): one engine over ``groups`` (consecutive)."""
    ids = range(groups[0].start, groups[-1].stop)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle; it closes us
    parent = os.getppid()
    buffers = spec.view(memory)
    try:
        engine = cloudpickle.loads(factory_bytes)(ids, buffers, autoreset_mode)
    except BaseException as exc:
        conn.send_bytes(error_reply(exc))
        return
    conn.send_bytes(READY)
    group_ids = [np.arange(g.start, g.stop) for g in groups]
    try:
        while True:
            # Spin briefly (spin_s is 0 when processes outnumber cores), then block, waking now and then to notice
            # a parent that died without closing its end (a forked sibling may hold that end open).
            ready = wait_readable(conn, spin_s, _ORPHAN_POLL_S)
            while not ready:
                if os.getppid() != parent:
                    return
                ready = conn.poll(_ORPHAN_POLL_S)
            message = conn.recv_bytes()
            if message == CLOSE:
                return
            try:
                if message[:1] == STEP:
                    answer = reply(engine.step(group_ids[message[1]]))
                else:
                    answer = reply(engine.execute(pickle.loads(message)))
            except BaseException as exc:
                answer = error_reply(exc)
            conn.send_bytes(answer)
    except (EOFError, OSError, KeyboardInterrupt):
        return  # the parent is gone
    finally:
        try:
            engine.close()
        except Exception:  # closing after the parent died: nobody is left to report to
            log.exception("closing envs %s failed", ids)
