"""Every exception shoal raises.

Each error subclasses :class:`ShoalError` *and* the builtin a caller would catch without knowing shoal, so
``except ValueError`` keeps working after switching from Gymnasium. The state errors also subclass Gymnasium's own
(``AlreadyPendingCallError``, ``NoAsyncCallError``, ``ClosedEnvironmentError``) so the drop-in classes raise what
Gymnasium raised, and the two refusals of :mod:`shoal.supersuit` are ``AssertionError`` s, as SuperSuit's are::

    ShoalError
    ├── ConfigError            (ValueError, gymnasium.error.Error)  bad constructor arguments
    │   ├── SpaceMismatchError (RuntimeError)   sub-envs whose spaces differ (Gymnasium raises RuntimeError)
    │   │   └── AgentSpacesError (AssertionError)  SuperSuit's form: agents whose spaces differ
    │   └── UnpicklableError   (TypeError)      an argument that must cross to a worker cannot be pickled
    ├── ActionError            (ValueError)     actions of the wrong shape, dtype or range
    │   └── ActionTypeError    (TypeError)      actions of the wrong kind (a scalar for a batch)
    ├── ResetArgumentError     (ValueError)     bad seeds or reset_mask
    │   └── ResetArgumentTypeError (TypeError)  a reset_mask that is not boolean
    ├── UnknownGameError       (LookupError)    a ROM id ale-py does not ship
    ├── MissingDependencyError (ImportError)    an optional extra is not installed
    ├── StateError             (RuntimeError)   a call at the wrong moment
    │   ├── AlreadyPendingCallError             send/reset while a call is pending
    │   ├── NoAsyncCallError                    recv without a pending call
    │   ├── NotResetError                       step before the first reset
    │   ├── ResetNeededError                    stepping a finished env with autoreset disabled
    │   ├── ConcurrentCallError                 a call while another thread is inside one
    │   └── ClosedError                         any call after close()
    ├── WaitTimeoutError       (multiprocessing.TimeoutError, TimeoutError)  a *_wait(timeout=...) ran out
    └── EnvError               (RuntimeError)   a sub-environment raised; carries env_id and the traceback
        ├── (the env's own type)                 EnvError.of(ValueError) also is a ValueError, and so on
        ├── EnvOutputError     (ValueError)     an env returned data that disagrees with its spaces
        │   └── AgentPresenceError (AssertionError)  SuperSuit's form: an agent absent before its episode ends
        └── WorkerDiedError                     a worker process died (signal, os._exit, OOM kill)

An exception a sub-environment raises reaches the caller as an :class:`EnvError` that is *also* an instance of the
exception's own class (``EnvError.of(type(exc))``), so ``except ValueError`` written against Gymnasium, which
re-raises the env's exception type, still catches it, while ``env_id`` and the remote traceback stay available.
"""

from __future__ import annotations

import multiprocessing
from typing import Any

from gymnasium import error as gym_error


class ShoalError(Exception):
    """Base class of every error shoal raises."""


class ConfigError(ShoalError, ValueError, gym_error.Error):
    """A constructor argument is invalid or cannot be honoured (also Gymnasium's ``error.Error``, which its envs and
    ale-py's pool raise for bad arguments)."""


class SpaceMismatchError(ConfigError, RuntimeError):
    """The sub-environments of one vector env have spaces that differ."""


class AgentSpacesError(SpaceMismatchError, AssertionError):
    """SuperSuit's vector envs (:mod:`shoal.supersuit`) need one observation space and one action space for every
    agent; these differ (SuperSuit asserts it: ``except AssertionError`` catches both)."""


class UnpicklableError(ConfigError, TypeError):
    """Something that must be sent to a worker process (an env factory, call arguments, reset options) cannot be
    pickled."""


class ActionError(ShoalError, ValueError):
    """Actions passed to ``step``/``send`` do not match the action space."""


class ActionTypeError(ActionError, TypeError):
    """Actions of the wrong kind: a scalar where a batch is expected, a string where a tuple of actions is."""


class ResetArgumentError(ShoalError, ValueError):
    """Seeds or ``reset_mask`` passed to ``reset`` are invalid."""


class ResetArgumentTypeError(ResetArgumentError, TypeError):
    """A ``reset_mask`` of the wrong dtype."""


class UnknownGameError(ShoalError, LookupError):
    """A ROM id that ale-py does not ship."""


class MissingDependencyError(ShoalError, ImportError):
    """An optional dependency is missing; the message names the pip command that installs it."""


class StateError(ShoalError, RuntimeError):
    """A call that is not valid in the vector env's current state."""


class AlreadyPendingCallError(StateError, gym_error.AlreadyPendingCallError):
    """``send``/``reset``/``call`` while an earlier asynchronous call has not been received."""

    def __init__(self, message: str, name: str = "") -> None:
        StateError.__init__(self, message)
        self.name = name


class NoAsyncCallError(StateError, gym_error.NoAsyncCallError):
    """``recv`` (or another ``*_wait``) without a matching pending call."""

    def __init__(self, message: str, name: str = "") -> None:
        StateError.__init__(self, message)
        self.name = name


class NotResetError(StateError):
    """``step``/``send`` before the first ``reset``."""


class ResetNeededError(StateError):
    """With ``autoreset_mode="disabled"``, an env whose episode ended was stepped without being reset."""


class ConcurrentCallError(StateError):
    """A call of a vector env while another thread is inside one of its calls: a vector env takes one call at a
    time. ``owner`` is the ident of the thread inside."""

    def __init__(self, message: str, owner: int | None = None) -> None:
        StateError.__init__(self, message)
        self.owner = owner


class ClosedError(StateError, gym_error.ClosedEnvironmentError):
    """Any call on a vector env after ``close()``."""


class WaitTimeoutError(ShoalError, multiprocessing.TimeoutError, TimeoutError):
    """``reset_wait``/``step_wait``/``call_wait`` with a ``timeout`` that ran out before the envs answered.

    The work goes on: wait again to collect it, or ``close()`` the vector env.
    """


class EnvError(ShoalError, RuntimeError):
    """A sub-environment raised. ``env_id`` names it; ``remote_traceback`` is the traceback where it ran.

    The original exception, when it could be carried across the process boundary, is the ``__cause__``; the error
    raised is also an instance of its class (see :meth:`of`).
    """

    def __init__(self, message: str, env_id: int | None = None, remote_traceback: str = "") -> None:
        super().__init__(message)
        self.env_id = env_id
        self.remote_traceback = remote_traceback

    @staticmethod
    def of(kind: type[BaseException]) -> type[EnvError]:
        """The :class:`EnvError` class that is also a ``kind`` (``EnvError`` itself where Python cannot combine
        the two, as with ``OSError``'s own layout, or for non-``Exception`` kinds)."""
        return _env_error_class(kind)

    def __reduce__(self):  # keep env_id, the traceback and the cause across processes (pickle drops __cause__)
        kind = getattr(type(self), "kind", None)
        if kind is not None:
            args = (kind, self.args[0], self.env_id, self.remote_traceback)
            return (_rebuild_env_error, args, {"cause": self.__cause__})
        return (type(self), (self.args[0], self.env_id, self.remote_traceback), {"cause": self.__cause__})

    def __setstate__(self, state: dict[str, Any] | None) -> None:
        if state is not None:
            self.__cause__ = state["cause"]

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


_ENV_ERROR_CLASSES: dict[type, type[EnvError]] = {}  # each kind's class, made once


def _env_error_class(kind: type[BaseException]) -> type[EnvError]:
    cls = _ENV_ERROR_CLASSES.get(kind)
    if cls is None:
        cls = _ENV_ERROR_CLASSES[kind] = _combined_class(kind)
    return cls


def _combined_class(kind: type[BaseException]) -> type[EnvError]:
    if issubclass(kind, EnvError) or not issubclass(kind, Exception) or issubclass(kind, ShoalError):
        return EnvError
    try:
        cls = type(f"EnvError[{kind.__name__}]", (EnvError, kind), {"kind": kind, "__module__": __name__})
    except TypeError:  # an instance layout Python cannot combine with EnvError's (OSError, ...)
        return EnvError
    # the kind's own __init__/__str__ may expect other arguments; EnvError's are the ones used
    setattr(cls, "__init__", EnvError.__init__)
    setattr(cls, "__str__", EnvError.__str__)
    return cls


def _rebuild_env_error(kind: type[BaseException], message: str, env_id: int | None, remote_traceback: str) -> EnvError:
    return _env_error_class(kind)(message, env_id, remote_traceback)


class EnvOutputError(EnvError, ValueError):
    """An env returned an observation, reward or flag that disagrees with its spaces (wrong shape, a dtype that
    would lose values, ``None``): raised instead of writing it into the batch."""


class AgentPresenceError(EnvOutputError, AssertionError):
    """SuperSuit's vector envs (:mod:`shoal.supersuit`) need every agent present from its env's reset until the
    env's episode ends; an agent was absent, or done, before then (SuperSuit asserts it)."""


class WorkerDiedError(EnvError):
    """A worker process hosting envs died without reporting an error (killed by a signal, ``os._exit``, ...)."""
