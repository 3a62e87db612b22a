"""Every exception shoal raises.

Each error subclasses :class:`ShoalError` *and* the builtin a caller would catch without knowing shoal, so
``except ValueError`` keeps working after switching from Gymnasium. The state errors also subclass Gymnasium's own
(``AlreadyPendingCallError``, ``NoAsyncCallError``, ``ClosedEnvironmentError``) so the drop-in classes raise what
Gymnasium raised::

    ShoalError
    ├── ConfigError            (ValueError)     bad constructor arguments
    ├── ActionError            (ValueError)     actions of the wrong shape, dtype or range
    ├── ResetArgumentError     (ValueError)     bad seeds or reset_mask
    ├── UnknownGameError       (LookupError)    a ROM id ale-py does not ship
    ├── MissingDependencyError (ImportError)    an optional extra is not installed
    ├── StateError             (RuntimeError)   a call at the wrong moment
    │   ├── AlreadyPendingCallError             send/reset while a call is pending
    │   ├── NoAsyncCallError                    recv without a pending call
    │   ├── NotResetError                       step before the first reset
    │   ├── ResetNeededError                    stepping a finished env with autoreset disabled
    │   └── ClosedError                         any call after close()
    └── EnvError               (RuntimeError)   a sub-environment raised; carries env_id and the traceback
        └── WorkerDiedError                     a worker process died (signal, os._exit, OOM kill)
"""

from __future__ import annotations

from gymnasium import error as gym_error


class ShoalError(Exception):
    """Base class of every error shoal raises."""


class ConfigError(ShoalError, ValueError):
    """A constructor argument is invalid or cannot be honoured."""


class ActionError(ShoalError, ValueError):
    """Actions passed to ``step``/``send`` do not match the action space."""


class ResetArgumentError(ShoalError, ValueError):
    """Seeds or ``reset_mask`` passed to ``reset`` are invalid."""


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


class ClosedError(StateError, gym_error.ClosedEnvironmentError):
    """Any call on a vector env after ``close()``."""


class EnvError(ShoalError, RuntimeError):
    """A sub-environment raised. ``env_id`` names it; ``remote_traceback`` is the traceback where it ran.

    The original exception, when it could be carried across the process boundary, is the ``__cause__``.
    """

    def __init__(self, message: str, env_id: int | None = None, remote_traceback: str = "") -> None:
        super().__init__(message)
        self.env_id = env_id
        self.remote_traceback = remote_traceback

    def __reduce__(self):  # keep env_id, the traceback and the cause across processes (pickle drops __cause__)
        return (type(self), (self.args[0], self.env_id, self.remote_traceback), {"cause": self.__cause__})

    def __setstate__(self, state: dict) -> None:
        self.__cause__ = state["cause"]


class WorkerDiedError(EnvError):
    """A worker process hosting envs died without reporting an error (killed by a signal, ``os._exit``, ...)."""
