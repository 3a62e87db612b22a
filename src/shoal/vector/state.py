"""The vector env's asynchronous state machine: which call is pending, and the errors for calls out of order.

``reset``, ``step`` and ``call`` are each a ``*_async`` that starts work and a ``*_wait`` that collects it; between
the two the vector env is waiting for that kind of answer, and nothing else may start.
"""

from __future__ import annotations

from enum import Enum

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
