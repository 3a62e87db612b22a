"""Whose a vector env's backend is: the process that made it, and no child forked from that process.

A vector env ties its workers, Ray actors and shared memory to its own life (a finalizer closes them when it is
closed, collected, or the interpreter exits). A child forked from the process that made it gets a copy of the object,
not of the backend: right after the fork every such copy is closed in the child without a word to the workers
(:meth:`Owned._disown`), and calls on it are refused with the process that owns it named.
"""

from __future__ import annotations

import os
import weakref
from typing import TYPE_CHECKING

from shoal.errors import ClosedError

if TYPE_CHECKING:
    from shoal.vector._guard import CallGuard
    from shoal.vector.transport import Transport


class Owned:
    """The ownership methods of :class:`~shoal.vector.base.VectorEnv` (a mixin: it uses the vector env's transport,
    call guard and ``closed`` flag)."""

    if TYPE_CHECKING:  # what it uses of the vector env, for type checkers
        closed: bool
        _transport: Transport
        _guard: CallGuard

    _owner: int | None = None
    """In a child forked from the process that made this vector env: that process (:meth:`_disown`)."""
    _made_in: int | None = None
    """Where a backend that other processes share was made (:meth:`_own_backend`); None for one in this process."""

    def _track(self) -> None:
        """Count this vector env among those a fork must disown in the child (first thing its constructor does)."""
        _MADE.add(self)

    def _own_backend(self) -> None:
        """Tie the backend's life to this object: it is closed by :meth:`close`, or when this object is garbage
        collected or the interpreter exits (then at once, without the grace ``close()`` gives workers to finish),
        so workers never outlive the shared memory they write, and none keeps the interpreter from exiting."""
        self._finalizer = weakref.finalize(self, self._transport.close, True)
        if self._transport.shared:  # (workers, Ray actors: a forked child disowns it)
            self._made_in = os.getpid()

    def _disown(self) -> None:
        """In a child forked from the process that made this vector env: closed here, without a word to its
        workers, pipes or shared memory, which stay that process's (neither this one's exit nor its garbage
        collector closes them)."""
        if self.closed:  # closed in the parent already: it says so here too
            return
        if self._finalizer.detach() is not None:
            self._transport.disown()
        self.closed = True
        self._owner = self._made_in

    def _check_owner(self, name: str) -> None:
        """Refuse ``name`` in a child forked from the process that made this vector env (:meth:`_disown`)."""
        if self._owner is not None:
            raise ClosedError(
                f"{name}: this vector env belongs to process {self._owner}, which made it; this process is a child "
                f"forked from it, where it is closed (its workers and shared memory stay that process's): make a new "
                f"one here"
            )


_MADE: weakref.WeakSet[Owned] = weakref.WeakSet()
"""The vector envs alive in this process (a forked child's: those its parent had)."""


def _disown_all() -> None:
    """Right after a fork, in the child: every vector env with a shared backend is closed here and stays its
    parent's (:meth:`Owned._disown`). Before this, a child that exited normally (os.fork, then sys.exit) closed
    its parent's workers on its way out. Only the forking thread follows a fork, so no call guard is held by another
    thread in the child: each forgets its holder."""
    for envs in list(_MADE):
        envs._guard.forget()
        if envs._made_in is not None:
            envs._disown()


if hasattr(os, "register_at_fork"):  # (no fork, no hook: Windows)
    os.register_at_fork(after_in_child=_disown_all)
