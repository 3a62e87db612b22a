"""A step's two halves: ``send`` checks the actions and starts the batch the caller holds, ``recv`` waits for it.

``send`` takes one action per env (checked against the action space, the whole batch at once; written into the shared
buffers, or read in place by the engines of the calling process when the batch is large) or one action sequence per
env (run inside each env's worker, :class:`~shoal.vector.commands.Sequences`). ``recv`` collects the answers: in
synchronous mode every group's, copying each group's results out as it comes where that pays
(:class:`~shoal.vector.copies.SplitCopies`); in asynchronous mode the first ``batch_size`` envs to finish
(first-N-of-M), whose groups the caller then holds. :class:`~shoal.vector.base.VectorEnv` derives ``step`` from them.
"""

from __future__ import annotations

import functools
from itertools import accumulate
from typing import TYPE_CHECKING, Any, Callable

import numpy as np
from gymnasium.vector import AutoresetMode

from shoal.errors import ConfigError, NotResetError, ResetNeededError
from shoal.vector.checks import check_flat_sequences, check_sequences, is_sequence_batch
from shoal.vector.commands import Command, Op, Sequences
from shoal.vector.copies import SplitCopies
from shoal.vector.infos import InfoParts
from shoal.vector.results import ALL_ROWS, take
from shoal.vector.state import AsyncState, check_timeout, guarded

if TYPE_CHECKING:
    from gymnasium import spaces

    from shoal.spaces import Layout
    from shoal.vector._guard import CallGuard
    from shoal.vector.buffers import Buffers
    from shoal.vector.transport import Transport


class Batches:
    """``send`` and ``recv`` of :class:`~shoal.vector.base.VectorEnv` (a mixin: it uses the vector env's transport,
    buffers, layouts, state machine and results)."""

    if TYPE_CHECKING:  # what it uses of the vector env, for type checkers
        num_envs: int
        groups: list[range]
        is_async: bool
        closed: bool
        autoreset_mode: AutoresetMode
        _guard: CallGuard
        _transport: Transport
        _buffers: Buffers
        _action_layout: Layout
        _single_action: spaces.Space
        _check_actions: Callable[..., Any]
        _own_rows: slice | None
        _no_sequences: str | None
        _state: AsyncState
        _interrupted: bool
        _held: list[int] | None
        _held_ids: np.ndarray
        _held_rows: Any
        _sent: list[int]
        _used_sequences: set[int]
        _write_slot: int
        _split: list[slice] | None
        _split_copies: SplitCopies | None
        _loose_obs: list[list[Any]]
        _ready: list[tuple[int, Any]]
        _handout: list[tuple[int, Any]] | None
        _wanted: int

        def _check_idle(self, name: str, full: bool = False) -> None: ...
        def _check_waiting(self, state: AsyncState, name: str) -> None: ...
        def _check_env_actions(self, ids: np.ndarray, values: np.ndarray, offsets: np.ndarray | None) -> None: ...
        def _group_ids(self, group: int) -> np.ndarray: ...
        def _hold(self, groups: list[int]) -> None: ...
        def _cut_short(self, exc: BaseException) -> None: ...
        def _forget_parked(self) -> None: ...
        def _results(self) -> tuple[np.ndarray, ...]: ...
        def _observations(self, rows: Any) -> Any: ...
        def _absorb(self, answers: list[tuple[int, Any]]) -> list[tuple[int, Any]]: ...
        def _info_parts(
            self, answers: list[tuple[int, Any]], ids: np.ndarray | None, rows: Any,
            extras: list[np.ndarray] | None = None,
        ) -> InfoParts: ...
        def _merged(self, parts: InfoParts) -> dict[str, Any]: ...

    @guarded
    def send(self, actions: Any, gamma: float | None = None) -> None:
        """Start a step of the batch the caller holds (all envs, or ``info["env_id"]`` of the last batch)."""
        ids = self._sendable()
        if type(actions) is not np.ndarray and is_sequence_batch(self._single_action, actions):
            values, offsets, discount = check_sequences(
                self._single_action, actions, len(ids), 1.0 if gamma is None else gamma
            )
            self._send_sequences(ids, values, offsets, discount)
            return
        batch = self._check_actions(self._single_action, actions, len(ids), "actions")
        self._check_env_actions(ids, batch, None)
        self._send_batch(ids, batch)

    def _send_batch(self, ids: np.ndarray, batch: Any) -> None:
        """Start a step of the held envs ``ids`` with ``batch``, one checked action each."""
        own = self._own_rows
        if (own is not None and type(batch) is np.ndarray and batch.nbytes >= IN_PLACE_FROM
                and batch.dtype == self._buffers.actions.dtype):
            # Synchronous: the engines in this process read their rows of the checked batch where they are (their
            # envs get them read-only), and only the workers' rows are written
            if own.stop < self.num_envs:
                self._buffers.actions[own.stop :] = batch[own.stop :]
            self._dispatch_step(ids, ids, own_actions=batch[own])
            return
        self._action_layout.write(self._buffers.actions, self._held_rows, batch)
        if self._action_layout.loose:  # leaves without a fixed size go with the command, one tuple per env
            held = self._sending
            per_env = list(zip(*self._action_layout.loose_values(batch)))
            starts = np.cumsum([0] + [len(self.groups[g]) for g in held]).tolist()
            commands = {
                g: Command(Op.STEP, self._group_ids(g), per_env[a:b]) for g, a, b in zip(held, starts, starts[1:])
            }
            self._dispatch_step(ids, ids, commands)
            return
        self._dispatch_step(ids, ids)

    @guarded
    def send_sequences(self, values: Any, offsets: Any, gamma: float | None = None) -> None:
        """:meth:`send` of action sequences given flat: env ``j`` of the batch runs ``values[offsets[j]:offsets[j+1]]``.

        The form the PyTorch ops use (no list of arrays to build); same semantics as a list of arrays.
        """
        ids = self._sendable()
        values, offsets, discount = check_flat_sequences(
            self._single_action, values, offsets, len(ids), 1.0 if gamma is None else gamma
        )
        self._send_sequences(ids, values, offsets, discount)

    def _sendable(self) -> np.ndarray:
        if (self._state is AsyncState.DEFAULT and not (self.closed or self.is_async or self._interrupted)
                and self._held is not None and not self._transport.owes()):
            return self._held_ids  # every synchronous step: what _check_idle would find, without its calls
        self._check_idle("send")
        if self._held is None:
            raise NotResetError("call reset() before step()/send()")
        return self._held_ids

    @property
    def _sending(self) -> list[int]:
        """The groups the caller holds, once :meth:`_sendable` has said there are some."""
        held = self._held
        assert held is not None  # _sendable checked it
        return held

    def _send_sequences(self, ids: np.ndarray, values: np.ndarray, offsets: np.ndarray, gamma: float) -> None:
        if self._no_sequences is not None:  # refused before any env is sent anything (asynchronous mode would
            raise ConfigError(self._no_sequences)  # otherwise raise it with a later batch)
        self._check_env_actions(ids, values, offsets)
        held = self._sending
        if len(values) == len(ids) and np.array_equal(offsets, _one_each(len(ids))):
            # one action each: a plain step (no command per group, nothing to sum), its steps_taken reported
            self._send_batch(ids, values)
            self._used_sequences |= set(held)
            return
        starts = list(accumulate((len(self.groups[g]) for g in held[:-1]), initial=0))
        parts = Sequences(values, offsets, gamma).split(starts)
        commands = {g: Command(Op.SEQUENCES, self._group_ids(g), p) for g, p in zip(held, parts)}
        disabled = self.autoreset_mode is AutoresetMode.DISABLED  # (only there does _dispatch_step look at them)
        self._dispatch_step(ids, ids[np.diff(offsets) > 0] if disabled else ids, commands)

    def _dispatch_step(
        self,
        ids: np.ndarray,
        stepping: np.ndarray,
        commands: dict[int, Command] | None = None,
        own_actions: np.ndarray | None = None,
    ) -> None:
        """Start a step of the held envs ``ids``: one step each (actions in the buffers, but for ``own_actions``:
        see :meth:`Transport.step`), or the ``commands`` (action sequences, or actions with loose leaves);
        ``stepping`` are the envs that will step (for the disabled-autoreset check)."""
        if self.autoreset_mode is AutoresetMode.DISABLED:
            ended = stepping[self._buffers.needs_reset[stepping]]
            if len(ended):
                raise ResetNeededError(
                    f"envs {ended.tolist()} ended their episode and autoreset_mode='disabled': reset them with "
                    f"reset(options={{'reset_mask': mask}}) before stepping them again"
                )
        held = self._sending
        if self._buffers.slots_on[0]:
            self._buffers.obs_target[ids] = self._write_slot
        if commands is not None and next(iter(commands.values())).op is Op.SEQUENCES:
            self._used_sequences |= set(commands)
        elif self._used_sequences:
            self._used_sequences -= set(held)
        try:
            if commands is not None:
                self._transport.dispatch(commands)
            else:
                self._transport.step(held, own_actions)
            self._sent, self._state = held, AsyncState.WAITING_STEP
        except BaseException as exc:
            if not isinstance(exc, Exception):  # an interrupt: some groups may be stepping (see _check_idle)
                self._interrupted = True
            raise

    def recv(self, timeout: float | None = None) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict]:
        """Wait for the step started by :meth:`send`; in asynchronous mode, the first ``batch_size`` envs to finish.

        ``timeout``: seconds to wait at most; past it, :class:`~shoal.errors.WaitTimeoutError` (a
        ``multiprocessing.TimeoutError``) is raised and the step goes on: call ``recv`` again to collect it.
        """
        obs, rewards, terminations, truncations, parts = self._recv_parts(timeout)
        infos = self._merged(parts) if parts.entries else parts.arrays  # (the usual step: no call)
        return obs, rewards, terminations, truncations, infos

    @guarded
    def _recv_parts(self, timeout: float | None = None) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, InfoParts]:
        """:meth:`recv` with its infos as they came (for an adapter that hands them out per env). Its results are
        copies (or the caller's views, ``copy=False``), so the infos are merged outside the call guard."""
        answers, ids, rows = self._receive(timeout, self._split)
        b = self._buffers
        extras: list[np.ndarray] | None = None
        if self._split_copies is not None:  # copied group by group (see _results)
            obs, rewards, terminations, truncations, *extras = self._split_copies.finish()
            self._split_copies = None
        else:
            obs, rewards = self._observations(rows), take(b.rewards, rows)
            terminations, truncations = take(b.terminations, rows), take(b.truncations, rows)
        parts = self._info_parts(answers, ids, rows, extras)
        if self._used_sequences and self._sequenced(answers):
            parts.arrays["steps_taken"] = take(b.steps_taken, rows)
        return obs, rewards, terminations, truncations, parts

    def _receive(
        self, timeout: float | None = None, split: list[slice] | None = None
    ) -> tuple[list[tuple[int, Any]], np.ndarray | None, Any]:
        """Wait for a sent step: the answers, the env ids of the batch (None: all, in order) and its buffer rows.

        The results stay in the shared buffers (rows ``rows``) until the next :meth:`send`. A timeout or an
        interrupt leaves the step pending (nothing read is lost); any other error ends it. ``split``: the groups'
        rows, whose results (:meth:`_results`) are copied out group by group as the answers come
        (:attr:`_split_copies`; synchronous steps only).
        """
        if self.closed or self._state is not AsyncState.WAITING_STEP:
            self._check_waiting(AsyncState.WAITING_STEP, "recv")
        if timeout is not None:
            check_timeout(timeout)
        try:
            if not self.is_async:
                self._split_copies = None
                if split is not None and not self._buffers.slots_on[0]:  # observations in slot 0
                    self._split_copies = SplitCopies(self._results(), split)
                copy = None if self._split_copies is None else self._split_copies.copy
                answers = self._transport.collect(self._sent, timeout, arrived=copy)
            else:
                answers = self._hand_out(timeout)
        except BaseException as exc:
            self._cut_short(exc)
            raise
        self._state, self._interrupted, self._handout = AsyncState.DEFAULT, False, None
        if not self.is_async:
            return (self._absorb(answers) if self._loose_obs else answers), None, ALL_ROWS
        return answers, self._held_ids, self._held_rows

    def _hand_out(self, timeout: float | None) -> list[tuple[int, Any]]:
        """Asynchronous mode: wait for the first :attr:`_wanted` answers (those parked earlier first), hold their
        groups, and forget the answers where they were kept. Every step of it can be cut short and done again by
        the wait that follows (an interrupt keeps the wait pending): the answers are only looked at until
        :attr:`_handout` holds them, and then that list is handed out again; the caller clears it with the state."""
        answers = self._handout
        if answers is None:
            self._forget_parked()
            answers = self._ready[: self._wanted]
            if len(answers) < self._wanted:
                answers = answers + self._transport.collect_any(self._wanted - len(answers), timeout)
            self._handout = answers = self._absorb(answers)
        groups = [g for g, _ in answers]
        self._hold(groups)
        if self._ready:
            self._ready = [a for a in self._ready if a[0] not in groups]
        self._transport.release(groups)
        return answers

    def _sequenced(self, answers: list[tuple[int, Any]]) -> bool:
        return any(g in self._used_sequences for g, _ in answers)


IN_PLACE_FROM = 64 << 10
"""A batch of actions of at least this many bytes is read in place by the engines in the calling process (see
:meth:`Batches.send`); a smaller one is written whole into the buffers, one call cheaper (measured when every
kind of engine took that path: CartPole x 8 on 2 processes stepped ~4% slower with the two writes)."""


@functools.lru_cache(maxsize=16)
def _one_each(n: int) -> np.ndarray:
    """The offsets of ``n`` sequences of one action each, ``0 .. n`` (read-only: kept for the next call)."""
    offsets = np.arange(n + 1, dtype=np.int64)
    offsets.flags.writeable = False
    return offsets
