"""``call``/``get_attr``/``set_attr`` of the vector env, and calls of an engine method on chosen envs.

Calls are rare and carry Python objects (pickled across processes), so they take the slow road: whatever is stepping
is parked first (its answers kept for the next ``recv``), observations are moved home (see
``VectorEnv._quiesce_for_call``), then each group that hosts a named env runs the command.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from shoal.errors import ConfigError
from shoal.vector.commands import Command, Op
from shoal.vector.state import AsyncState, check_timeout, guarded, whole

if TYPE_CHECKING:
    from shoal.vector._guard import CallGuard
    from shoal.vector.transport import Transport


class Calls:
    """The call methods of :class:`~shoal.vector.base.VectorEnv` (a mixin: it uses the vector env's transport,
    groups and state machine)."""

    if TYPE_CHECKING:  # what it uses of the vector env, for type checkers
        num_envs: int
        groups: list[range]
        _transport: Transport
        _state: AsyncState
        _interrupted: bool
        _calling: bool
        _guard: CallGuard

        def _check_waiting(self, state: AsyncState, name: str) -> None: ...
        def _check_idle(self, name: str, full: bool = False) -> None: ...
        def _cut_short(self, exc: BaseException) -> None: ...
        def _quiesce_for_call(self) -> None: ...
        def _group_ids(self, group: int) -> np.ndarray: ...

    @whole
    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Call ``name(*args, **kwargs)`` on every env (or read it, if it is not callable); one result per env."""
        self.call_async(name, *args, **kwargs)
        return self.call_wait()

    @guarded
    def call_async(self, name: str, *args: Any, **kwargs: Any) -> None:
        self._run_everywhere(Op.CALL, (name, args, kwargs))

    @guarded
    def call_wait(self, timeout: float | None = None) -> tuple[Any, ...]:
        """The results of :meth:`call_async` (or :meth:`get_attr`), one per env.

        ``timeout``: seconds to wait at most; past it, :class:`~shoal.errors.WaitTimeoutError` (a
        ``multiprocessing.TimeoutError``) is raised and the call goes on: call ``call_wait`` again to collect it.
        """
        check_timeout(timeout)
        self._check_waiting(AsyncState.WAITING_CALL, "call_wait")
        try:
            answers = self._transport.collect(list(range(len(self.groups))), timeout)
        except BaseException as exc:
            self._cut_short(exc)
            raise
        self._state, self._interrupted, self._calling = AsyncState.DEFAULT, False, False
        return tuple(value for _, result in answers for value in result)

    @whole
    def get_attr(self, name: str) -> tuple[Any, ...]:
        """The attribute ``name`` of every env."""
        self._run_everywhere(Op.GET_ATTR, name)
        return self.call_wait()

    @whole
    def set_attr(self, name: str, values: Any) -> None:
        """Set attribute ``name`` on every env: one value per env (list/tuple), or the same value for all."""
        if isinstance(values, (list, tuple)):
            if len(values) != self.num_envs:
                raise ConfigError(f"set_attr needs one value per env ({self.num_envs}), got {len(values)}")
        else:
            values = [values] * self.num_envs
        self._check_idle("set_attr")
        self._quiesce_for_call()
        self._run_now(
            {
                g: Command(Op.SET_ATTR, self._group_ids(g), (name, list(values[r.start : r.stop])))
                for g, r in enumerate(self.groups)
            }
        )

    def _run_now(self, commands: dict[int, Command]) -> list[tuple[int, Any]]:
        """Run a call's ``commands`` (after :meth:`_quiesce_for_call`) and collect their answers: the envs then owe
        nothing for it (``_calling`` cleared)."""
        self._transport.dispatch(commands)
        answers = self._transport.collect(list(commands))
        self._calling = False
        return answers

    def _run_everywhere(self, op: Op, payload: Any) -> None:
        self._check_idle(op.name.lower())
        self._quiesce_for_call()
        self._transport.dispatch(
            {g: Command(op, self._group_ids(g), payload) for g in range(len(self.groups))}
        )
        self._state = AsyncState.WAITING_CALL

    @property
    def np_random_seed(self) -> tuple[int, ...]:
        """Each env's ``np_random_seed``, as Gymnasium's Sync/AsyncVectorEnv return them."""
        return self.get_attr("np_random_seed")

    @property
    def np_random(self) -> tuple[Any, ...]:
        """Each env's ``np_random`` generator (copies, from a worker process), as Gymnasium's vector envs return."""
        return self.get_attr("np_random")

    def render(self) -> tuple[Any, ...] | None:
        """Each env's ``render()``."""
        return self.call("render")

    def call_envs(self, env_ids: Sequence[int] | None, name: Any, *args: Any, **kwargs: Any) -> list[Any]:
        """Call ``name(*args, **kwargs)`` on envs ``env_ids`` only (all if None), or read it if it is not callable;
        one result per env, in the order of ``env_ids``; the others are not touched. ``name`` may also be a function,
        called as ``name(env, *args, **kwargs)`` where the env lives (Gymnasium envs)."""
        return self._on_envs(Op.CALL, env_ids, lambda part: (name, args, kwargs), getattr(name, "__name__", name))

    def get_attr_envs(self, env_ids: Sequence[int] | None, name: str) -> list[Any]:
        """The attribute ``name`` of envs ``env_ids`` (all if None), in that order."""
        return self._on_envs(Op.GET_ATTR, env_ids, lambda part: name, name)

    def set_attr_envs(self, env_ids: Sequence[int] | None, name: str, values: Sequence[Any]) -> None:
        """Set attribute ``name`` of envs ``env_ids`` (all if None) to ``values``, one per env."""
        self._check_values(name, env_ids, values)
        self._on_envs(Op.SET_ATTR, env_ids, lambda part: (name, [values[p] for p in part]), name)

    def _call_each(self, name: str, env_ids: Sequence[int] | None, values: list[Any] | None = None) -> list[Any]:
        """Call engine method ``name`` on envs ``env_ids`` (all if None), with one value each if given (the engine
        gets them as one list: an engine's own calls, such as Atari's clone/restore).

        Returns one result per env, in the order of ``env_ids``.
        """
        if values is not None:
            self._check_values(name, env_ids, values)
        return self._on_envs(
            Op.CALL, env_ids, lambda part: (name, () if values is None else ([values[p] for p in part],), {}), name
        )

    def _check_values(self, name: str, env_ids: Sequence[int] | None, values: Sequence[Any]) -> None:
        count = self.num_envs if env_ids is None else len(env_ids)
        if len(values) != count:
            raise ConfigError(f"{name}: expected one value per env id ({count}), got {len(values)}")

    @guarded
    def _on_envs(self, op: Op, env_ids: Sequence[int] | None, payload: Any, name: str) -> list[Any]:
        """Run ``op`` on envs ``env_ids`` (all if None): each group hosting some of them gets ``payload(part)``,
        ``part`` being the positions in ``env_ids`` of its envs. One result per env, in the order of ``env_ids``."""
        ids: np.ndarray = np.arange(self.num_envs) if env_ids is None else np.asarray(env_ids)
        if ids.shape == (0,):  # (numpy makes [] float64: no env, no call)
            ids = ids.astype(np.int64)
        if ids.ndim != 1 or ids.dtype.kind not in "iu" or (len(ids) and (ids.min() < 0 or ids.max() >= self.num_envs)):
            raise ConfigError(f"env_ids must be a list of env indices in [0, {self.num_envs}), got {env_ids!r}")
        self._check_idle(name)
        self._quiesce_for_call()
        starts = np.array([r.start for r in self.groups])
        group_of = np.searchsorted(starts, ids, side="right") - 1
        positions = {g: np.flatnonzero(group_of == g).tolist() for g in np.unique(group_of).tolist()}
        commands = {g: Command(op, ids[part], payload(part)) for g, part in positions.items()}
        results: list[Any] = [None] * len(ids)
        for g, answer in self._run_now(commands):
            for p, value in zip(positions[g], answer or [None] * len(positions[g])):
                results[p] = value
        return results
