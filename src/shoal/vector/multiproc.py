"""The multiprocessing backend: groups of envs in worker processes, every per-step array in shared memory.

* Memory: one ``RawArray`` holds all buffers. Unlike ``multiprocessing.shared_memory``, its backing file is unlinked
  the moment it is created (an anonymous mapping under fork), so nothing can outlive the processes, even when the
  parent is killed with SIGKILL; and it works under fork, spawn and forkserver alike, on Linux and macOS.
* Signalling: one pipe per worker carries one byte per step each way; infos, errors and call results, which are
  rare, ride the same pipe pickled. Waiting is a bounded spin, then a blocking read: when there are no more
  processes than cores, a waiter polls its pipe for up to ``spin_us`` (a short wait then skips the sleep/wake-up
  round trip, ~50 us on a small VM), then sleeps, so a long wait (a model running) costs nothing. With more
  processes than cores nobody spins: a spinning waiter would take a core from the envs (PufferLib 3.0 runs slower
  with 2 workers than with 1 on 2 cores for that reason).
* In synchronous mode the calling process hosts one group itself (``inline``): it signals the workers, steps its own
  envs while they step theirs, then waits. Two cores are then used by two processes, with no idle parent.
* Faults: a worker that dies closes its pipe, so the parent's wait ends at once with :class:`WorkerDiedError`.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import pickle
from multiprocessing.connection import wait
from typing import Any, Sequence

import cloudpickle
from gymnasium.vector import AutoresetMode

from shoal.errors import EnvError, WorkerDiedError
from shoal.vector import _worker
from shoal.vector.buffers import BufferSpec
from shoal.vector.engine import Command, Op
from shoal.vector.transport import EngineFactory, Transport, raise_first

_CLOSE_GRACE_S = 2.0
_DEFAULT_SPIN_US = 100.0


class MultiprocessingTransport(Transport):
    """Groups of envs in worker processes (group 0 in the calling process when ``inline``).

    Args:
        context: ``"fork"``, ``"spawn"``, ``"forkserver"`` or None for the platform default.
        daemon: start workers as daemons (they cannot start processes of their own).
        inline: host group 0 in the calling process.
        spin_us: how long a waiter polls before it sleeps; default: 100 when processes <= cores, else 0.
    """

    def __init__(
        self,
        factory: EngineFactory,
        groups: Sequence[range],
        spec: BufferSpec,
        autoreset_mode: AutoresetMode,
        *,
        context: str | None = None,
        daemon: bool = True,
        inline: bool = False,
        spin_us: float | None = None,
    ) -> None:
        super().__init__(factory, groups, spec, autoreset_mode)
        processes = len(self.groups) + (0 if inline else 1)
        if spin_us is None:
            spin_us = _DEFAULT_SPIN_US if processes <= (os.cpu_count() or 1) else 0.0
        self._spin_s = spin_us / 1e6
        ctx = mp.get_context(context)
        self._memory = ctx.RawArray("b", max(spec.nbytes, 1))
        self.buffers = spec.view(self._memory)
        self._inline = inline
        self._engine = None
        self._procs: dict[int, Any] = {}
        self._conns: dict[int, Any] = {}
        self._in_flight: list[int] = []
        self._inline_answer: tuple[bool, Any] | None = None
        factory_bytes = cloudpickle.dumps(factory)
        try:
            for group, ids in enumerate(self.groups):
                if inline and group == 0:
                    continue
                parent_end, child_end = ctx.Pipe(duplex=True)
                proc = ctx.Process(
                    target=_worker.run,
                    args=(child_end, self._memory, spec, factory_bytes, ids, autoreset_mode, self._spin_s),
                    name=f"shoal-worker-{group}",
                    daemon=daemon,
                )
                proc.start()
                child_end.close()
                self._procs[group], self._conns[group] = proc, parent_end
            if inline:
                self._engine = factory(self.groups[0], self.buffers, autoreset_mode)
            for group in self._conns:
                answer = self._receive(group)
                if answer != (True, _worker.READY):
                    raise_first([(group, answer)])
        except BaseException:
            self.close()
            raise

    # -- moving data -----------------------------------------------------------------------------------------------

    def dispatch(self, commands: dict[int, Command]) -> None:
        for group, command in commands.items():
            if group in self._conns:
                self._send(group, command)
        if self._inline and 0 in commands:  # step our own share while the workers step theirs
            try:
                self._inline_answer = (True, self._engine.execute(commands[0]))
            except Exception as exc:
                self._inline_answer = (False, exc)
            self._in_flight.append(0)

    def collect(self, groups: Sequence[int]) -> list[tuple[int, Any]]:
        answers = []
        for group in groups:
            self._in_flight.remove(group)
            answers.append((group, self._answer(group)))
        return raise_first(answers)

    def collect_any(self, count: int) -> list[tuple[int, Any]]:
        order: list[int] = []
        if self._inline and 0 in self._in_flight:
            order.append(0)
        while len(order) < count:
            remote = [self._conns[g] for g in self._in_flight if g in self._conns and g not in order]
            ready = set(wait(remote))
            answered = [g for g in self._in_flight if g in self._conns and self._conns[g] in ready]
            # A dead worker's pipe is ready too (EOF): report it first, or healthy workers would starve it.
            answered.sort(key=lambda g: self._procs[g].is_alive())
            order += answered[: count - len(order)]
        return self.collect(order[:count])

    def _send(self, group: int, command: Command) -> None:
        message = _worker.STEP if command.op is Op.STEP else pickle.dumps(command, protocol=pickle.HIGHEST_PROTOCOL)
        try:
            self._conns[group].send_bytes(message)
        except (BrokenPipeError, ConnectionResetError, EOFError):
            raise self._died(group) from None
        self._in_flight.append(group)

    def _answer(self, group: int) -> tuple[bool, Any]:
        if group not in self._conns:
            answer, self._inline_answer = self._inline_answer, None
            assert answer is not None
            return answer
        return self._receive(group)

    def _receive(self, group: int) -> tuple[bool, Any]:
        conn = self._conns[group]
        try:
            _worker.wait_readable(conn, self._spin_s, None)
            message = conn.recv_bytes()
        except (EOFError, ConnectionResetError, OSError):
            return (False, self._died(group))
        return _worker.decode(message)

    def _died(self, group: int) -> EnvError:
        proc = self._procs[group]
        proc.join(timeout=1.0)
        ids = self.groups[group]
        return WorkerDiedError(
            f"worker {group} (pid {proc.pid}, hosting envs {ids.start}..{ids.stop - 1}) died with exit code "
            f"{proc.exitcode}{' (killed by signal ' + str(-proc.exitcode) + ')' if (proc.exitcode or 0) < 0 else ''}; "
            f"close() this vector env and make a new one",
            env_id=ids.start,
        )

    # -- shutdown --------------------------------------------------------------------------------------------------

    def close(self) -> None:
        for conn in self._conns.values():
            try:
                conn.send_bytes(_worker.CLOSE)
            except OSError:  # already dead: nothing to tell it
                continue
        for proc in self._procs.values():
            proc.join(timeout=_CLOSE_GRACE_S)
            if proc.is_alive():
                proc.terminate()
                proc.join(timeout=_CLOSE_GRACE_S)
            if proc.is_alive():
                proc.kill()
                proc.join()
        for conn in self._conns.values():
            conn.close()
        self._procs, self._conns, self._in_flight = {}, {}, []
        engine, self._engine = self._engine, None
        if engine is not None:
            engine.close()
