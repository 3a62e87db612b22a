"""The vector env's asynchronous state machine: which call is pending, and the errors for calls out of order.

``reset``, ``step`` and ``call`` are each a ``*_async`` that starts work and a ``*_wait`` that collects it; between
the two the vector env is waiting for that kind of answer, and nothing else may start.

Threads: a vector env takes one call at a time. Each call that reads or changes its state runs inside the vector
env's :class:`~shoal.vector._guard.CallGuard` (:func:`guarded`, :func:`whole`: the guard calls the method, so that
no interrupt can leave it held, as a ``with`` statement can on Python 3.14: see ``_guard.c``); a call from another
thread meanwhile raises :class:`~shoal.errors.ConcurrentCallError` before it touches anything. ``step``, ``reset``
and ``call`` hold it across their two halves (a ``recv`` refused between them would leave the step pending for
nobody); a ``send`` and a ``recv`` called apart are two calls, which threads may pair as they like. (Before, two
threads could both pass the idle check, both start a step, and one then waited forever for answers the other had
taken.) Calls handed from one thread to another between calls are fine.
"""

from __future__ import annotations

import functools
import numbers
import threading
from enum import Enum
from typing import Any, Callable, NoReturn

from shoal.vector._guard import Guarded
from shoal.errors import AlreadyPendingCallError, ClosedError, ConcurrentCallError, ConfigError, NoAsyncCallError


class AsyncState(Enum):
    """What the vector env is waiting for."""

    DEFAULT = "default"
    WAITING_RESET = "reset"
    WAITING_STEP = "step"
    WAITING_CALL = "call"


_STARTERS = {"step_wait": "step_async", "reset_wait": "reset_async", "call_wait": "call_async"}
_ALIASES = {"send": "step_async", "recv": "step_wait"}  # shoal's names for Gymnasium's step_async / step_wait


def check_idle(state: AsyncState, closed: bool, name: str) -> None:
    """``name`` starts new work: nothing may be pending."""
    if closed:
        raise ClosedError(f"{name}: this vector env is closed")
    if state is not AsyncState.DEFAULT:
        raise AlreadyPendingCallError(
            f"Calling `{_ALIASES.get(name, name)}` while waiting for a pending call to `{state.value}` to complete; "
            f"receive it first ({state.value}_wait()" + (" or recv())" if state is AsyncState.WAITING_STEP else ")"),
            state.value,
        )


def check_waiting(state: AsyncState, expected: AsyncState, closed: bool, name: str) -> None:
    """``name`` collects work of kind ``expected``: that must be what is pending."""
    if closed:
        raise ClosedError(f"{name}: this vector env is closed")
    if state is not expected:
        name = _ALIASES.get(name, name)
        raise NoAsyncCallError(f"Calling `{name}` without any prior call to `{_STARTERS[name]}`.", expected.value)


def check_timeout(timeout: float | None) -> float | None:
    """Gymnasium's ``*_wait(timeout=...)``: None (wait until the envs answer) or a number of seconds."""
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, numbers.Real) or not timeout >= 0  # (NaN)
    ):
        raise ConfigError(f"timeout must be None or a non-negative number of seconds, got {timeout!r}")
    return timeout


def refuse_concurrent(owner: int) -> NoReturn:
    """What a vector env's call guard raises for a thread that calls while thread ``owner`` is inside a call."""
    name = next((t.name for t in threading.enumerate() if t.ident == owner), "gone")
    raise ConcurrentCallError(
        f"another thread ({name!r}, ident {owner}) is inside a call of this vector env; a vector env takes one call "
        f"at a time: call it from one thread (or from one thread after another, each call returned before the next "
        f"starts), or give each thread its own vector env",
        owner,
    )


def guarded(method: Callable[..., Any]) -> Callable[..., Any]:
    """``method`` runs inside the vector env's call guard: one thread at a time (see the module's docstring). The
    guard calls it (a :class:`~shoal.vector._guard.Guarded`, in C: no Python frame of its own, ~0.05 us a call)."""
    return functools.update_wrapper(Guarded(method), method)


def whole(method: Callable[..., Any]) -> Callable[..., Any]:
    """``method`` runs both halves of a call (``step`` is ``send`` then ``recv``), inside the call guard (as
    :func:`guarded`): an exception out of it goes to the vector env's ``_note_interrupt`` first, inside the guard,
    which remembers an interrupt (Ctrl-C) wherever it landed, so that the next call drops what this one left (its
    waits alone cannot see one between the halves)."""
    return functools.update_wrapper(Guarded(method, note="_note_interrupt"), method)
