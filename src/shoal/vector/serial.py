"""The serial backend: every engine in the calling process; the reference the other backends must equal."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
from gymnasium.vector import AutoresetMode

from shoal.vector.buffers import BufferSpec
from shoal.vector.commands import Command
from shoal.vector.engine import close_all
from shoal.vector.transport import EngineFactory, Transport, answer_of


class SerialTransport(Transport):
    """Runs each command as soon as it is dispatched, in group order; ``collect_any`` answers first-in first-out."""

    def __init__(
        self,
        factory: EngineFactory,
        groups: Sequence[range],
        spec: BufferSpec,
        autoreset_mode: AutoresetMode,
        *,
        memory: Any = None,
    ) -> None:
        super().__init__(factory, groups, spec, autoreset_mode)
        self.buffers = spec.allocate() if memory is None else spec.view(memory)  # memory: a Ray node's, shared
        self.engines = []
        try:
            for ids in self.groups:
                self.engines.append(factory(ids, self.buffers, autoreset_mode))
        except BaseException:
            self.close()
            raise
        self._answers: dict[int, tuple[bool, Any]] = {}  # group -> answer not yet collected, in the order run
        self.own_rows = slice(0, self.groups[-1].stop)

    def dispatch(self, commands: dict[int, Command]) -> None:
        for group, command in commands.items():
            self._run(group, self.engines[group].execute, command)

    def step(self, groups: Sequence[int], own_actions: np.ndarray | None = None) -> None:
        engines, group_ids, answers = self.engines, self.group_ids, self._answers
        for group in groups:  # no Command per group, and answer_of written out: the hot path
            rows = self.groups[group]
            try:
                answers[group] = True, engines[group].run_step(
                    group_ids[group], None if own_actions is None else own_actions[rows.start : rows.stop]
                )
            except Exception as exc:
                answers[group] = False, exc

    def collect(
        self,
        groups: Sequence[int],
        timeout: float | None = None,
        keep: bool = False,
        arrived: Callable[[int], None] | None = None,
    ) -> list[tuple[int, Any]]:
        if keep or len(groups) != 1:
            return super().collect(groups, timeout, keep, arrived)
        (group,) = groups  # every synchronous step of the serial backend: one group
        ok, value = self._answers.pop(group)
        if not ok:
            raise value
        return [(group, value)]

    def _run(self, group: int, run: Callable[..., Any], *arguments: Any) -> None:
        """``run(*arguments)`` for ``group``; its answer (or error) waits for :meth:`gather`."""
        self._answers[group] = answer_of(run, *arguments)

    def owes(self) -> bool:
        return bool(self._answers)

    def drain(self) -> None:
        self._answers.clear()

    def gather(
        self,
        groups: Sequence[int],
        timeout: float | None = None,
        keep: bool = False,
        arrived: Callable[[int], None] | None = None,
    ) -> list[tuple[int, tuple[bool, Any]]]:
        return self._stored(groups, keep)

    def gather_any(self, count: int, timeout: float | None = None) -> list[tuple[int, tuple[bool, Any]]]:
        return self._first_stored(count)

    def close(self, terminate: bool = False) -> None:
        engines, self.engines = self.engines, []
        close_all((None, engine) for engine in engines)

