"""The worker processes of the multiprocessing backend: how they start, how a slow or dead one is named, how they stop.

* Forking: under ``fork`` the workers are started with the parent's heap frozen (:func:`frozen_heap`), so that a
  worker's garbage collector never finalizes an object it inherited (Ray's handles among them: see
  :mod:`shoal.vector.multiproc`).
* A worker whose envs are not made after :data:`START_WARN_S` is named in a warning (:func:`slow_start`); one that
  died is named with its pid, its envs and its exit code, and where the start method reruns the main script, with
  what that does to a script that makes vector envs at its top level (:func:`died`, :func:`reruns_main`).
* The start method (:func:`start_context`): the platform's default, as Gymnasium's ``AsyncVectorEnv`` takes it, but
  ``forkserver`` where that default is ``fork`` and JAX has started its runtime in this process: JAX's threads do not
  follow a fork, and a forked worker whose env calls JAX waited forever on their locks (a JAX env such as Gymnasium's
  ``phys2d/CartPole-v0``, made after any JAX computation in the parent, hung at its first reset).
* Stopping (:func:`stop`): each worker is told to close and given :data:`CLOSE_GRACE_S` (all of them together), then
  terminated, then killed: ``close()`` always returns, with every worker joined.
"""

from __future__ import annotations

import gc
import logging
import multiprocessing as mp
import sys
import time
import warnings
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from shoal.errors import WorkerDiedError
from shoal.vector import _worker
from shoal.vector.link import ON_PIPE, Link

CLOSE_GRACE_S = 2.0
"""How long closing workers are given to finish, all of them together, before they are terminated (and as long again
before they are killed)."""
START_WARN_S = 60.0
"""A worker whose envs are not ready this long after the parent began waiting for them is named in a warning."""
log = logging.getLogger(__name__)


def start_context(context: str | None) -> tuple[Any, str]:
    """The multiprocessing context workers start in (``context``: a start method, or None for the default), and why
    it is not the one asked for ("" where it is)."""
    ctx = mp.get_context(context)
    if context is None and ctx.get_start_method() == "fork" and jax_started():
        log.info("JAX has started in this process: shoal's workers start with 'forkserver', not 'fork'")
        return mp.get_context("forkserver"), "jax"
    return ctx, ""


def jax_started() -> bool:
    """Whether JAX has started its runtime (its threads) in this process, as JAX itself tells before a fork, which it
    then warns of (not whether it is imported: importing starts nothing)."""
    bridge = sys.modules.get("jax._src.xla_bridge")
    started = getattr(bridge, "backends_are_initialized", None)
    try:
        return bool(callable(started) and started())
    except Exception:  # (a private function of JAX's: any change to it must not break starting workers)
        return False


@contextmanager
def frozen_heap(forking: bool = True) -> Iterator[None]:
    """While ``forking`` processes: every object the parent holds, garbage included, out of the garbage collector's
    reach (``gc.freeze()``, as Python's docs advise before a fork), so that the children never finalize one. The
    parent's heap is unfrozen afterwards, unless it was frozen before (then the caller froze it, and it stays)."""
    if not forking:
        yield
        return
    frozen_before = gc.get_freeze_count() > 0
    gc.freeze()
    try:
        yield
    finally:
        if not frozen_before:
            gc.unfreeze()


def reruns_main(method: str, why: str = "") -> str:
    """What may have killed a worker as it started, where the start method runs the caller's main script again (as
    ``__mp_main__``) before the worker: a script that makes a vector env at its top level makes one there too, and
    multiprocessing stops it with a RuntimeError. Empty under fork, and where the main module is no script. ``why``:
    why the method is not the one asked for (:func:`start_context`)."""
    script = getattr(sys.modules.get("__main__"), "__file__", None)
    if method == "fork" or script is None:
        return ""
    if why == "jax":
        default = " (chosen because JAX has started in this process: forked workers would hang in its calls)"
        otherwise = ""
    else:
        default = {"forkserver": " (Python 3.14's default on Linux)", "spawn": " (the default on macOS and Windows)"
                   }.get(method, "")
        otherwise = " (or pass context='fork')"
    return (
        f"; under the {method!r} start method{default} a worker's start runs the main script ({script}) again, so a "
        f"script that makes vector envs outside `if __name__ == \"__main__\":` kills its workers this way: put that "
        f"code under it{otherwise}"
    )


def slow_start(host: int, proc: Any, ids: range) -> Callable[[], None]:
    """Called while worker ``host`` (process ``proc``, hosting envs ``ids``) has not made its envs after each
    :data:`START_WARN_S`: warns once, and the wait goes on (making an env may take minutes; a worker that died ends
    the wait)."""
    warned = False

    def stalled() -> None:
        nonlocal warned
        if not warned:
            warned = True
            warnings.warn(
                f"shoal: worker {host} (pid {proc.pid}, hosting envs {ids.start}..{ids.stop - 1}) has not made its "
                f"envs after {START_WARN_S:g} s; still waiting. If making one env takes far less, the worker may be "
                f"deadlocked: a process forked while another of the parent's threads held a lock inherits it held; "
                f"context='spawn' or 'forkserver' starts workers without that risk",
                RuntimeWarning,
            )

    return stalled


def died(host: int, proc: Any, ids: range, why: str = "") -> WorkerDiedError:
    """The error of the death of worker ``host`` (process ``proc``, hosting envs ``ids``); ``why``: what may have
    caused it (as it started)."""
    proc.join(timeout=1.0)
    signal = f" (killed by signal {-proc.exitcode})" if (proc.exitcode or 0) < 0 else ""
    return WorkerDiedError(
        f"worker {host} (pid {proc.pid}, hosting envs {ids.start}..{ids.stop - 1}) died with exit code "
        f"{proc.exitcode}{signal}{why or '; close() this vector env and make a new one'}",
        env_id=ids.start,
    )


def stop(links: list[Link], procs: list[Any], terminate: bool = False) -> None:
    """Stop the workers ``procs`` (their ``links``): tell each to close (``terminate``: at once, telling none), then
    join them within :data:`CLOSE_GRACE_S` in all; terminate those still running, then kill them."""
    deadline = time.monotonic() + CLOSE_GRACE_S

    def late() -> None:  # a worker not reading (stuck in an env) while a message an interrupt cut short waits
        if time.monotonic() > deadline:
            raise TimeoutError("the worker does not read its pipe")

    for link in links:
        if terminate:
            break
        try:
            link.post(ON_PIPE, _worker.CLOSE, late, 0.1)
        except OSError:  # already dead, or not reading: nothing to tell it (TimeoutError is an OSError)
            continue
    for link in links:  # a worker still writing an answer nobody will read gets EPIPE and exits;
        link.channel.close()  # the others read CLOSE, which the pipe keeps for them
    if terminate:
        for proc in procs:
            proc.terminate()
    _join_all(procs, CLOSE_GRACE_S)  # one grace for all: workers stuck in an env's close wait it out together
    stuck = [proc for proc in procs if proc.is_alive()]
    for proc in stuck:
        proc.terminate()
    _join_all(stuck, CLOSE_GRACE_S)
    for proc in stuck:
        if proc.is_alive():
            proc.kill()
            proc.join()


def _join_all(procs: list[Any], seconds: float) -> None:
    """Join ``procs`` within ``seconds`` in all, not each."""
    deadline = time.monotonic() + seconds
    for proc in procs:
        proc.join(timeout=max(0.0, deadline - time.monotonic()))
