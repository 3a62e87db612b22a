"""The vector env's asynchronous state machine: which call is pending, and the errors for calls out of order.

``reset``, ``step`` and ``call`` are each a ``*_async`` that starts work and a ``*_wait`` that collects it; between
the two the vector env is waiting for that kind of answer, and nothing else may start.
"""

from __future__ import annotations

import functools
from enum import Enum
from typing import Any, Callable

from shoal.errors import AlreadyPendingCallError, ClosedError, ConfigError, NoAsyncCallError


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
        isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout < 0
    ):
        raise ConfigError(f"timeout must be None or a non-negative number of seconds, got {timeout!r}")
    return timeout


def whole(method: Callable[..., Any]) -> Callable[..., Any]:
    """``method`` runs both halves of a call (``step`` is ``send`` then ``recv``): an exception out of it goes to the
    vector env's ``_note_interrupt`` first, which remembers an interrupt (Ctrl-C) wherever it landed, so that the
    next call drops what this one left (its waits alone cannot see one between the halves)."""

    @functools.wraps(method)
    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except BaseException as exc:
            self._note_interrupt(exc)
            raise

    return run
