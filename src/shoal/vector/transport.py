"""The backend interface: move commands to the engines hosting each group of envs, and their results back.

A backend knows nothing of autoreset, seeds, sequences or infos (the engine and the vector env own those); it only
carries :class:`~shoal.vector.commands.Command` objects to groups and results back, the way httpx's ``BaseTransport``
only carries requests. Group ``g`` is envs ``groups[g]`` (a range of global env ids), the unit of stepping; a host
(a worker process, a Ray actor) runs one engine over the consecutive groups ``hosts[h]`` and answers their commands
in the order it was sent them, so a host can step one group while the caller handles another.
"""

from __future__ import annotations

import pickle
from abc import ABC, abstractmethod
from itertools import islice
from typing import Any, Callable, Iterable, Sequence

import cloudpickle
import numpy as np
from gymnasium.vector import AutoresetMode

from shoal.errors import UnpicklableError, WaitTimeoutError
from shoal.vector.buffers import Buffers, BufferSpec
from shoal.vector.commands import Command, Op
from shoal.vector.engine import Engine

EngineFactory = Callable[[range, Buffers, AutoresetMode], Engine]
"""Builds the engine for one group: ``factory(env_ids, buffers, autoreset_mode)``; must pickle with cloudpickle."""


class Transport(ABC):
    """Carries commands to groups of envs and results back.

    Args:
        factory: builds each group's engine (in whichever process hosts it).
        groups: the env ids of each group.
        spec: the buffers to allocate; :attr:`buffers` are this process's views of them.
        autoreset_mode: passed to every engine.
        hosts: the groups each host runs (consecutive group indices); default: one group per host.
    """

    buffers: Buffers
    _answers: dict[int, tuple[bool, Any]]  # group -> its answer, read and not yet collected (each backend keeps it)

    def __init__(
        self,
        factory: EngineFactory,
        groups: Sequence[range],
        spec: BufferSpec,
        autoreset_mode: AutoresetMode,
        hosts: Sequence[Sequence[int]] | None = None,
    ) -> None:
        self.groups = list(groups)
        self.hosts = [list(h) for h in hosts] if hosts is not None else [[g] for g in range(len(self.groups))]
        self.host_of = {g: h for h, members in enumerate(self.hosts) for g in members}
        self.group_ids = [np.arange(r.start, r.stop) for r in self.groups]  # each group's env ids, as an array

    def span(self, groups: Sequence[int]) -> range:
        """The env ids of consecutive ``groups`` (a host's, a node's)."""
        return range(self.groups[groups[0]].start, self.groups[groups[-1]].stop)

    @abstractmethod
    def dispatch(self, commands: dict[int, Command]) -> None:
        """Start ``commands[g]`` on each group ``g`` given; returns without waiting where the backend can."""

    own_rows: slice | None = None
    """The rows of the envs whose engines run in the calling process (serial: all; multiprocessing inline: group
    0's), whose actions a synchronous step may hand those engines directly (:meth:`step`'s ``own_actions``; for
    engines that never write into their actions: ``actions_in_place`` on the factory)."""

    def step(self, groups: Sequence[int], own_actions: np.ndarray | None = None) -> None:
        """Start one step of each of ``groups``, their actions being in the buffers: :meth:`dispatch` of
        :data:`~shoal.vector.commands.Op.STEP` commands, which a backend may carry a faster way (every step does).

        ``own_actions`` (only when ``groups`` are all of them): the actions of the envs at :attr:`own_rows`, which
        the buffers then do not hold; the engines in this process read them there."""
        if own_actions is not None:
            raise NotImplementedError(f"{type(self).__name__} steps no engine in the calling process")
        self.dispatch({g: Command(Op.STEP, self.group_ids[g]) for g in groups})

    reports_arrivals = False
    """Whether :meth:`gather` calls its ``arrived`` with each group whose answer came while it waits for others."""

    def collect(
        self,
        groups: Sequence[int],
        timeout: float | None = None,
        keep: bool = False,
        arrived: Callable[[int], None] | None = None,
    ) -> list[tuple[int, Any]]:
        """Wait for the dispatched command of each of ``groups``; ``(group, result)`` in the order given.

        Raises the first error a group reported (an :class:`~shoal.errors.EnvError` naming the env), after every
        group asked for has answered, so the backend stays in step. Past ``timeout`` seconds (None: no limit),
        raises :class:`~shoal.errors.WaitTimeoutError` and keeps what it read, so a later call can finish.
        ``keep``: the answers stay stored until :meth:`release`, as :meth:`collect_any`'s do. ``arrived``: called
        with each group as its answer comes (its results are in the buffers), in the order they come, where the
        backend :attr:`reports_arrivals` (else never): the caller can use those results while others still step.
        """
        return raise_first(self.gather(groups, timeout, keep, arrived))

    def collect_any(self, count: int, timeout: float | None = None) -> list[tuple[int, Any]]:
        """Wait until ``count`` of the groups in flight have answered; ``(group, result)`` in the order they did.
        ``timeout`` and errors as in :meth:`collect`. The answers stay stored until :meth:`release` (waiting again
        before it gives the same ones): an interrupt between their taking and their keeping cannot lose them."""
        return raise_first(self.gather_any(count, timeout))

    def release(self, groups: Iterable[int]) -> None:
        """Forget the stored answers of ``groups`` (those :meth:`collect_any` or ``keep`` gave); idempotent."""
        for group in groups:
            self._answers.pop(group, None)

    def _stored(self, groups: Sequence[int], keep: bool) -> list[tuple[int, tuple[bool, Any]]]:
        """The stored answers of ``groups`` (each backend's :meth:`gather` once they have come), forgotten unless
        ``keep``."""
        take = self._answers.__getitem__ if keep else self._answers.pop
        return [(group, take(group)) for group in groups]

    def _first_stored(self, count: int) -> list[tuple[int, tuple[bool, Any]]]:
        """The first ``count`` stored answers, in the order they came (:meth:`gather_any` once they have come);
        they stay stored until :meth:`release`."""
        return list(islice(self._answers.items(), count))

    @abstractmethod
    def owes(self) -> bool:
        """Whether some group still owes an answer, or has one read and not collected."""

    @abstractmethod
    def drain(self) -> None:
        """Wait for every answer owed and drop it with those read and not collected (after an interrupt cut a call
        short: see ``VectorEnv._check_idle``). A dead host's groups count as answered, as in :meth:`collect`."""

    @abstractmethod
    def gather(
        self,
        groups: Sequence[int],
        timeout: float | None = None,
        keep: bool = False,
        arrived: Callable[[int], None] | None = None,
    ) -> list[tuple[int, tuple[bool, Any]]]:
        """:meth:`collect` without raising: each group's answer as ``(ok, value)`` (``value``: the error if not ok)."""

    @abstractmethod
    def gather_any(self, count: int, timeout: float | None = None) -> list[tuple[int, tuple[bool, Any]]]:
        """:meth:`collect_any` without raising, as :meth:`gather` (the answers stay stored until :meth:`release`)."""

    @abstractmethod
    def close(self, terminate: bool = False) -> None:
        """Release engines and processes (``terminate``: without letting them finish); idempotent; never hangs."""

    shared = False
    """Whether other processes share this backend (workers, their pipes and shared memory, Ray actors): a child
    forked from the process that made it must leave it alone (:meth:`disown`). The serial backend's envs and
    buffers are the child's own copies."""

    def disown(self) -> None:
        """In a child forked from the process that made this backend: let go of it without a word to anything the
        two processes share, which stays the parent's (called once, right after the fork)."""


def make_transport(
    backend: str,
    factory: EngineFactory,
    groups: list[range],
    spec: BufferSpec,
    autoreset_mode: AutoresetMode,
    hosts: list[list[int]],
    *,
    context: str | None,
    daemon: bool,
    inline: bool,
    address: str | None,
    spin_us: float | None,
) -> Transport:
    """The transport of ``backend`` for ``groups`` hosted as ``hosts`` (each imported when first asked for): the
    serial one where no worker is left (``backend="serial"``, or ``inline`` with one host, the calling process);
    ``spin_us``: how long a multiprocessing waiter spins (None: its own choice; 0 on a busy machine, where a spinning
    waiter takes a core the others want)."""
    if backend == "serial" or (inline and len(hosts) == 1):
        from shoal.vector.serial import SerialTransport

        return SerialTransport(factory, groups, spec, autoreset_mode)
    if backend == "ray":
        from shoal.vector.ray_transport import RayTransport

        return RayTransport(factory, groups, spec, autoreset_mode, hosts, address=address)
    from shoal.vector.multiproc import MultiprocessingTransport

    return MultiprocessingTransport(
        factory, groups, spec, autoreset_mode, hosts, context=context, daemon=daemon, inline=inline, spin_us=spin_us
    )


def pickled(value: Any, what: str) -> bytes:
    """``value`` pickled to cross to another process (pickle, else cloudpickle for lambdas and closures), or an
    :class:`~shoal.errors.UnpicklableError` saying that ``what`` cannot be sent."""
    try:
        return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:
        try:
            return cloudpickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:
            raise UnpicklableError(
                f"{what} cannot be pickled to send it to the worker processes ({type(exc).__name__}: {exc}); pass "
                f"picklable values (module-level functions, functools.partial, plain data), or use backend='serial'"
            ) from exc


def answer_of(run: Callable[..., Any], *arguments: Any) -> tuple[bool, Any]:
    """The answer of a group stepped in the calling process, as a worker's comes: ``(True, run(*arguments))``, or
    ``(False, error)`` for an exception it raised (an interrupt is not an answer: it propagates)."""
    try:
        return True, run(*arguments)
    except Exception as exc:
        return False, exc


def command_text(command: Command) -> str:
    """What a command carries, for an error message."""
    op, _, payload = command
    if op is Op.CALL:
        return f"the arguments of call({payload[0]!r})"
    if op is Op.SET_ATTR:
        return f"the value of set_attr({payload[0]!r})"
    if op is Op.RESET:
        return "reset(options=...)"
    return f"the {op.name.lower()} command's payload"


def timed_out(timeout: float | None) -> WaitTimeoutError:
    """The error for a wait that ran past ``timeout``."""
    return WaitTimeoutError(
        f"the call to `wait` has timed out after {timeout} second(s); the envs are still working: wait again to "
        f"collect the results, or close() the vector env"
    )


def messages(commands: dict[int, Command]) -> dict[int, bytes | None]:
    """Each command pickled to cross to a host, all before any is sent (one that cannot be leaves no host out of
    step); None for a plain step, which needs no message (its actions are in the buffers)."""
    return {
        group: None if command.op is Op.STEP and command.payload is None else pickled(command, command_text(command))
        for group, command in commands.items()
    }


def raise_first(answers: list[tuple[int, tuple[bool, Any]]]) -> list[tuple[int, Any]]:
    """Unwrap ``(group, (ok, value))`` answers, raising the first error among them."""
    for _, (ok, value) in answers:
        if not ok:
            raise value
    return [(group, value) for group, (_, value) in answers]
