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


_STARTERS = {"recv": "send()", "reset_wait": "reset_async()", "call_wait": "call_async()"}


def check_idle(state: AsyncState, closed: bool, name: str) -> None:
    """``name`` starts new work: nothing may be pending."""
    if closed:
        raise ClosedError(f"{name}: this vector env is closed")
    if state is not AsyncState.DEFAULT:
        raise AlreadyPendingCallError(
            f"{name}: a {state.value} call is still pending; receive it first (recv()/{state.value}_wait())",
            state.value,
        )


def check_waiting(state: AsyncState, expected: AsyncState, closed: bool, name: str) -> None:
    """``name`` collects work of kind ``expected``: that must be what is pending."""
    if closed:
        raise ClosedError(f"{name}: this vector env is closed")
    if state is not expected:
        raise NoAsyncCallError(
            f"{name}: no pending call to wait for; call {_STARTERS.get(name, '')} first", expected.value
        )


def refuse_timeout(timeout: float | None) -> None:
    """Gymnasium's ``*_wait(timeout=...)``: shoal waits until the envs answer (a dead worker is reported at once)."""
    if timeout is not None:
        raise ConfigError(
            f"timeout={timeout!r} is not supported: shoal waits until the envs answer (a dead worker is reported "
            f"at once); pass timeout=None"
        )
