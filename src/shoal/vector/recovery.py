"""What a call cut short leaves owed by the envs, and how the next call collects or drops it.

A wait can end early: a timeout leaves its call pending (waiting again collects it), an interrupt (Ctrl-C) may land
in a wait, between a step's halves, or while this process steps its own envs or tells the workers to step theirs.
Whatever then stays owed is dropped before the next call starts new work, so that no call ever takes a stale answer
for its own; in asynchronous mode, batches in flight are kept for the next ``recv`` across a ``call``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from shoal.errors import NotResetError, WaitTimeoutError
from shoal.vector.state import AsyncState, check_idle, check_waiting

if TYPE_CHECKING:
    from shoal.vector.buffers import Buffers
    from shoal.vector.transport import Transport


class Recovery:
    """The recovery methods of :class:`~shoal.vector.base.VectorEnv` (a mixin: it uses the vector env's transport,
    groups and state machine)."""

    if TYPE_CHECKING:  # what it uses of the vector env, for type checkers
        num_envs: int
        groups: list[range]
        is_async: bool
        closed: bool
        _transport: Transport
        _buffers: Buffers
        _state: AsyncState
        _interrupted: bool
        _calling: bool
        _held: list[int] | None
        _ready: list[tuple[int, Any]]
        _handout: list[tuple[int, Any]] | None

        def _hold(self, groups: list[int]) -> None: ...
        def _check_owner(self, name: str) -> None: ...

    def _check_idle(self, name: str, full: bool = False) -> None:
        """``name`` starts new work; ``full``: it is a full reset.

        What an interrupt (Ctrl-C during a wait, or while this process stepped its own envs or told the workers to
        step theirs) left owed by the envs is collected and dropped first, so that no later call takes a stale
        answer for its own. In synchronous mode that is anything owed while no call is pending (one check per
        call; a pending call cut short by an interrupt is dropped the same way). In asynchronous mode batches are
        in flight by design, and only a full reset drops them; a ``send`` after an interrupted ``recv`` is refused
        as for any pending call (``recv`` again collects it), and after an interrupted ``send`` only a full reset
        may start new work. A call parks what is in flight before it starts (:meth:`_quiesce_for_call`), so one cut
        short (not left pending by ``call_async``) owes its own answers alone, and they are dropped here."""
        if self.closed:
            self._check_owner(name)
        elif self.is_async:
            if self._calling and self._state is AsyncState.DEFAULT:  # a call cut short: it had parked what was
                self._transport.drain()  # stepping, so what the envs owe is that call's answers alone
                self._calling = self._interrupted = False
            if self._interrupted and full:
                self._drop_owed()
            elif self._interrupted and self._state is AsyncState.DEFAULT:
                raise NotResetError(
                    f"{name}: an interrupt (Ctrl-C) cut short the send that started the last batch, so which envs "
                    f"are stepping is not known; reset() to go on"
                )
        elif self._interrupted or (self._state is AsyncState.DEFAULT and self._transport.owes()):
            self._drop_owed()
        check_idle(self._state, self.closed, name)
        self._handout = None  # the last wait's batch is the caller's (an interrupt may have left this set)

    def _drop_owed(self) -> None:
        """Collect and drop every answer the envs owe, and what was read and not collected: nothing is pending."""
        self._transport.drain()
        self._ready = []
        self._calling = False
        if self.is_async and self._held is not None:
            self._hold(list(range(len(self.groups))))  # nothing is in flight now: the full reset holds its batch
        self._state = AsyncState.DEFAULT
        self._interrupted = False

    def _note_interrupt(self, exc: BaseException) -> None:
        """``exc`` ended a synchronous ``step``/``reset``/``call`` (its two halves in one: ``state.whole``): if it is
        an interrupt, wherever it landed (in a wait, between the halves, after the answers were read), the next call
        drops what that one left (:meth:`_check_idle`), as one cut short in its wait does. (In asynchronous mode the
        halves of a step or reset are the user's to pair, and only the waits' own rule applies; a whole call cut
        short in its wait is no longer pending, and the next call drops it.)"""
        if isinstance(exc, Exception):
            return
        if not self.is_async:
            self._interrupted = True
        elif self._state is AsyncState.WAITING_CALL:  # a whole call's wait: the next call or step drops it
            self._state = AsyncState.DEFAULT  # (_calling), as a synchronous one does

    def _cut_short(self, exc: BaseException) -> None:
        """The wait for a pending call's answers ended in ``exc`` (a wait that ends well makes the state default).
        A timeout, or an interrupt (Ctrl-C), leaves the call pending with what was read kept, so that waiting again
        collects it (Gymnasium's AsyncVectorEnv keeps an interrupted call pending too; after an interrupt, new work
        drops it: :meth:`_check_idle`); any other error ends the call, every answer having been read first
        (:meth:`Transport.collect`). Not a context manager: this is on every step's path, and one costs ~1 us."""
        if isinstance(exc, WaitTimeoutError):
            return
        if isinstance(exc, Exception):
            self._state = AsyncState.DEFAULT
        else:
            self._interrupted = True

    def _check_waiting(self, state: AsyncState, name: str) -> None:
        if self.closed:
            self._check_owner(name)
        check_waiting(self._state, state, self.closed, name)

    def _in_flight(self) -> list[int]:
        if not self.is_async or self._held is None:
            return []
        taken = set(self._held) | {g for g, _ in self._ready}
        return [g for g in range(len(self.groups)) if g not in taken]

    def _park_in_flight(self) -> None:
        """Collect the groups still stepping (async mode) and keep their answers in :attr:`_ready` for the next
        ``recv``. The answers are looked at, kept (one store), then released by the transport: an interrupt anywhere
        leaves each answer in the transport, in both places or in :attr:`_ready` alone, never in neither (a copy
        left in the transport is forgotten before the transport is read again: :meth:`_forget_parked`)."""
        self._forget_parked()
        waiting = self._in_flight()
        if waiting:
            self._ready = self._ready + self._transport.collect(waiting, keep=True)
            self._transport.release(waiting)

    def _forget_parked(self) -> None:
        """Release in the transport the answers already kept in :attr:`_ready` (an interrupt may have come between
        their keeping and their release)."""
        if self._ready:
            self._transport.release([g for g, _ in self._ready])

    def _quiesce_for_call(self) -> None:
        """Before a call: park what is stepping, then bring every observation back to slot 0, where calls
        (``restore_state``) rewrite them in place: a slot the torch ops handed out is never written outside a step
        that aimed at it. From here until the call's answers are collected, they are all the envs owe (async mode:
        :attr:`_calling`, which lets the next call or step drop them if an interrupt cuts this one short)."""
        self._park_in_flight()
        if self._buffers.slots_on[0]:
            self._buffers.obs_target[:] = 0
            self._buffers.carry(np.arange(self.num_envs))
        self._calling = self.is_async
