"""Nothing hangs, leaks or writes into memory it no longer owns: messages of any size in both directions, vector envs
dropped without close(), an interpreter exiting with envs open, and *_wait(timeout=...) as in Gymnasium."""

from __future__ import annotations

import contextlib
import functools
import gc
import multiprocessing as mp
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any, Callable

import gymnasium as gym
import numpy as np
import psutil
import pytest
from fakes import HOSTINGS, BigInfoEnv, LooseSpaceEnv, SlowEnv, assert_current, made_in_worker

import shoal
from shoal.errors import AlreadyPendingCallError, NotResetError, WaitTimeoutError
from shoal.vector.processes import frozen_heap


def test_large_call_results_and_render_on_every_backend(backend):
    """A 4 MB result per env (two envs per worker: 8 MB in one answer) and full-size RGB frames."""
    with shoal.make(functools.partial(LooseSpaceEnv, "text", "text"), 4, **backend) as envs:
        envs.reset(seed=0)
        results = envs.call("big", 4)
        assert [r.nbytes for r in results] == [4 * 2**20] * 4 and all((r == 0).all() for r in results)
        envs.set_attr("payload", [np.full(2**20, i, np.float64) for i in range(4)])  # 8 MB the other way
        assert [float(p[-1]) for p in envs.get_attr("payload")] == [0.0, 1.0, 2.0, 3.0]
    pytest.importorskip("pygame")
    fns = [functools.partial(gym.make, "CartPole-v1", render_mode="rgb_array")] * 3
    with shoal.make(fns, **backend) as envs:
        refs = [fn() for fn in fns]
        envs.reset(seed=4)
        for i, ref in enumerate(refs):
            ref.reset(seed=4 + i)
        frames = envs.render()
        assert len(frames) == 3
        for frame, ref in zip(frames, refs):
            np.testing.assert_array_equal(frame, ref.render())
            assert frame.shape == (400, 600, 3)
            ref.close()


@pytest.mark.timeout(60)
def test_large_messages_crossing_in_asynchronous_mode():
    """A partial reset carrying 1 MB of options goes to a worker while its other group answers with 1 MB of infos."""
    with shoal.make(BigInfoEnv, 4, num_workers=2, batch_size=2, context="fork") as envs:
        obs, info = envs.reset(seed=0)
        options_blob = np.ones(2**17)
        returned = set(info["env_id"].tolist())
        for t in range(20):
            envs.send(np.ones(2, np.int64))
            obs, rew, term, trunc, info = envs.recv()
            stepped = info.get("_blob", np.zeros(2, bool))
            # an env's first return is its reset (the envs the first reset did not return come later, in any order)
            assert all(s or i not in returned for i, s in zip(info["env_id"].tolist(), stepped))
            returned |= set(info["env_id"].tolist())
            assert all(float(blob[0]) == o[0] for blob, o, s in zip(info.get("blob", []), obs, stepped) if s)
            mask = np.zeros(4, bool)
            mask[info["env_id"]] = True
            obs, info = envs.reset(options={"reset_mask": mask, "blob": options_blob})
            assert (info["echo"] == options_blob.sum()).all()


@pytest.mark.parametrize("batch_size", [None, 2], ids=["sync", "async"])
def test_dropped_env_stops_its_workers_and_never_writes_again(batch_size):
    envs = shoal.make(functools.partial(SlowEnv, 0.3), 4, num_workers=2, batch_size=batch_size, inline=False)
    envs.reset(seed=0)
    envs.send(np.zeros(envs.batch_size, np.int64))  # workers busy with a step (and, async, with queued groups)
    workers = [psutil.Process(p.pid) for p in envs._transport._procs.values()]
    memory = memoryview(envs._transport.memory).cast("B")  # held here: where a worker left running would write
    del envs
    gc.collect()
    left = bytes(memory)  # as the dropped env left it (a worker in its step would still write its rows)
    start = time.monotonic()
    _, alive = psutil.wait_procs(workers, timeout=1.0)
    assert not alive, f"workers outlived their dropped vector env: {alive}"
    assert time.monotonic() - start < 1.0
    time.sleep(0.1)
    assert bytes(memory) == left, "a worker wrote into the memory of its dropped vector env"


def _scribble(stop: Any) -> None:
    """In a forked child: write 0x55 over every block the parent's shared heap (``multiprocessing``'s, which
    ``RawArray`` carves) had free when it forked, until ``stop`` is set: a process that outlives the arrays it wrote
    into, as PufferLib's terminated workers do."""
    from multiprocessing import heap

    free = [block for blocks in heap.BufferWrapper._heap._len_to_seq.values() for block in blocks]
    while not stop.is_set():
        for arena, begin, end in free:
            arena.buffer[begin:end] = b"\x55" * (end - begin)
        time.sleep(0.001)


@pytest.mark.timeout(60)
def test_memory_another_library_freed_while_its_processes_write_there_is_never_a_vector_envs():
    """A process still writing into shared arrays its parent freed (PufferLib's Multiprocessing terminates its
    workers without joining them; with Ray's SIGTERM handler installed they wrote for up to ~50 ms more) never
    reaches a vector env made afterwards: its counters, mailboxes and buffers are memory of its own
    (:mod:`shoal.vector.arena`; carved from ``RawArray``'s heap, they were scribbled over here, and workers stepped
    commands nobody posted)."""
    ctx = mp.get_context("fork")
    freed = ctx.RawArray("b", 1 << 20)  # a large free block: room for all a vector env allocates
    del freed
    gc.collect()
    stop = ctx.Event()
    scribbler = ctx.Process(target=_scribble, args=(stop,), daemon=True)
    with frozen_heap():  # (its garbage collector never finalizes what it inherited: Ray's handles, say)
        scribbler.start()
    try:
        time.sleep(0.05)  # scribbling
        fns = [functools.partial(gym.make, "CartPole-v1")] * 4
        ref = gym.vector.SyncVectorEnv(fns)
        with contextlib.closing(ref), shoal.make(fns, num_workers=2, inline=False) as envs:
            for t, (theirs, ours) in enumerate(zip(_rollout(ref, 60), _rollout(envs, 60))):
                for x, y in zip(theirs, ours):
                    np.testing.assert_array_equal(x, y, err_msg=f"step {t}")
    finally:
        stop.set()
        scribbler.join(5)
        if scribbler.is_alive():
            scribbler.kill()
            scribbler.join()


def _rollout(envs: Any, steps: int) -> Any:
    """The observations, rewards and flags of ``steps`` seeded random steps of ``envs``, as they come."""
    rng = np.random.default_rng(0)
    obs, _ = envs.reset(seed=3)
    yield (obs,)
    for _ in range(steps):
        obs, rewards, terminations, truncations, _ = envs.step(rng.integers(0, 2, envs.num_envs))
        yield obs, rewards, terminations, truncations


def test_interpreter_exits_with_envs_left_open():
    """Non-daemon workers and an env never closed: the interpreter still exits promptly, leaving no process."""
    code = textwrap.dedent(
        """
        import numpy as np, shoal
        envs = shoal.make("CartPole-v1", 4, num_workers=2, daemon=False, inline=False)
        envs.reset(seed=0)
        envs.send(np.zeros(4, np.int64))
        print(*[p.pid for p in envs._transport._procs.values()])
        """
    )
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - start < 20
    pids = [int(p) for p in done.stdout.split()]
    assert len(pids) == 2
    _, alive = psutil.wait_procs([psutil.Process(p) for p in pids if psutil.pid_exists(p)], timeout=3)
    assert not alive


_KILLED_MID_MESSAGE = {
    # the parent dies before the worker answers a call with 16 MB: nobody reads the answer, and the pipe fills
    "answer": """
        threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGKILL)).start()
        envs.call("big", 0.6, 1 << 24)
    """,
    # the parent dies 4 KiB into a 16 MB command (set_attr's values): the worker waits for the rest of it
    "command": """
        from shoal.vector import channel
        write_from = channel.write_from
        def cut(fd, data, progress):
            if len(data) > 1 << 20:
                write_from(fd, memoryview(data)[:4096], progress)
                os.kill(os.getpid(), signal.SIGKILL)
            return write_from(fd, data, progress)
        channel.write_from = cut
        envs.set_attr("payload", [np.zeros(1 << 21)] * 2)
    """,
}


@pytest.mark.parametrize("what", list(_KILLED_MID_MESSAGE))
def test_workers_leave_when_their_parent_is_killed_in_the_middle_of_a_message(what, tmp_path):
    """A parent killed (SIGKILL) while a message between it and a worker is half-way: the worker, whose pipe shows
    no end of file (it and its forked sibling hold the parent's end too), notices that its parent is gone and
    exits, instead of waiting for the rest of the message, or for room for its answer, forever."""
    code = textwrap.dedent(
        """
        import os, signal, sys, threading
        import numpy as np, shoal
        sys.path.insert(0, {tests!r})
        from fakes import SlowEnv
        envs = shoal.make(SlowEnv, 2, num_workers=2, inline=False, context="fork")
        envs.reset(seed=0)
        print(*[p.pid for p in envs._transport._procs.values()], flush=True)
        """
    ).format(tests=str(Path(__file__).parent)) + textwrap.dedent(_KILLED_MID_MESSAGE[what])
    with open(tmp_path / "out", "w+") as out:  # a file, not a pipe: a worker left behind holds it open
        done = subprocess.run([sys.executable, "-c", code], stdout=out, stderr=subprocess.STDOUT, timeout=60)
        out.seek(0)
        printed = out.read()
    assert done.returncode == -signal.SIGKILL, printed
    workers = [psutil.Process(int(p)) for p in printed.split()]
    assert len(workers) == 2
    deadline = time.monotonic() + 5.0  # a worker checks on its parent every second while a message waits
    while time.monotonic() < deadline and any(_running(w) for w in workers):
        time.sleep(0.05)
    left = [w.pid for w in workers if _running(w)]
    for w in workers:
        with contextlib.suppress(psutil.NoSuchProcess):
            w.kill()
    assert not left, f"workers {left} outlived their parent by 5 s"


def _running(process: psutil.Process) -> bool:
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.mark.parametrize("batch_size", [None, 2], ids=["sync", "async"])
@pytest.mark.parametrize("backend", ["multiprocessing", pytest.param("ray", marks=pytest.mark.ray)])
def test_step_reset_call_timeouts_keep_the_env_usable(batch_size, backend):
    fn = functools.partial(SlowEnv, 0.15, reset_delay=0.3)
    with shoal.make(fn, 4, num_workers=2, batch_size=batch_size, inline=False, backend=backend) as envs, shoal.make(
        fn, 4, backend="serial"
    ) as ref:
        envs.reset_async(seed=1)
        with pytest.raises(WaitTimeoutError, match=r"`wait` has timed out after 0.05 second") as caught:
            envs.reset_wait(timeout=0.05)
        assert isinstance(caught.value, mp.TimeoutError)
        with pytest.raises(AlreadyPendingCallError, match=r"pending call to `reset`"):
            envs.step(np.zeros(envs.batch_size, np.int64))
        obs, info = envs.reset_wait()
        ref_obs, _ = ref.reset(seed=1)
        ids = info.get("env_id", np.arange(4))
        np.testing.assert_array_equal(obs, ref_obs[ids])

        actions = np.arange(4) % 5
        if batch_size:  # the envs reset but not handed out come back first, without stepping: step them too
            envs.step(actions[ids])
            envs.step_async(actions[np.setdiff1d(np.arange(4), ids)])
        else:
            envs.step_async(actions)
        with pytest.raises(mp.TimeoutError):
            envs.step_wait(timeout=0.01)
        obs, rew, *_, info = envs.step_wait(timeout=10)  # the same step, collected
        ref_obs, ref_rew, *_ = ref.step(actions)
        got = info.get("env_id", np.arange(4))
        np.testing.assert_array_equal(obs, ref_obs[got])
        np.testing.assert_array_equal(rew, ref_rew[got])

        envs.call_async("nap", 0.3)
        with pytest.raises(WaitTimeoutError):
            envs.call_wait(timeout=0.05)
        assert len(envs.call_wait(timeout=10)) == 4
        envs.step(np.zeros(envs.batch_size, np.int64))  # still usable


def test_drop_in_async_returns_at_once_and_times_out():
    """Gymnasium's AsyncVectorEnv contract: reset_async/step_async return before the envs finish."""
    envs = shoal.vector.AsyncVectorEnv([functools.partial(SlowEnv, 0.3, reset_delay=0.3)] * 2)
    start = time.monotonic()
    envs.reset_async(seed=0)
    assert time.monotonic() - start < 0.2
    with pytest.raises(mp.TimeoutError):
        envs.reset_wait(timeout=0.05)
    envs.reset_wait()
    envs.close()


@contextlib.contextmanager
def ctrl_c_after(seconds: float):
    """Ctrl-C as a user's is felt: a KeyboardInterrupt raised in the main thread ``seconds`` from now (through a
    signal sent to that thread, so a blocking wait is interrupted the way SIGINT interrupts it)."""
    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGUSR1, interrupt)
    timer = threading.Timer(seconds, signal.pthread_kill, (threading.main_thread().ident, signal.SIGUSR1))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            yield
    finally:
        timer.cancel()
        signal.signal(signal.SIGUSR1, previous)


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "hosting", [pytest.param(k, marks=pytest.mark.ray) if k == "ray" else k for k in HOSTINGS]
)
def test_ctrl_c_during_a_step_never_leaves_a_stale_answer(hosting):
    """Ctrl-C in the middle of a reset, a step or a call (while this process steps its envs or waits for the
    workers'), then going on, as in a notebook: every later step and reset returns what the envs hold then.
    Before, the interrupted step's answer was taken for the next step's (and the next's for the one after), for
    good, resets included."""
    fn = functools.partial(SlowEnv, 0.2, reset_delay=0.2)
    with shoal.make(fn, 4, **HOSTINGS[hosting]) as envs, shoal.make(fn, 4, backend="serial") as ref:
        with ctrl_c_after(0.05):
            envs.reset(seed=1)
        envs.reset(seed=0)
        with ctrl_c_after(0.05):
            envs.step(np.full(4, 1))
        for k in range(2, 5):
            actions = np.full(4, k)
            obs, *_ = envs.step(actions)
            assert_current(envs, obs, actions)
        with ctrl_c_after(0.05):
            envs.step(np.full(4, 1))
        obs, _ = envs.reset(seed=3)
        np.testing.assert_array_equal(obs, ref.reset(seed=3)[0])
        with ctrl_c_after(0.05):
            envs.call("nap", 0.3)
        actions = np.arange(4)
        obs, *_ = envs.step(actions)
        assert_current(envs, obs, actions)


def interrupt_at(code, offset: int) -> Callable[[], None]:
    """Raise KeyboardInterrupt in the next run of ``code`` in this thread just before its bytecode at ``offset``, as
    a Ctrl-C there would; once only. Returns the function that stops it (whether it fired or not).

    From Python 3.12 with ``sys.monitoring`` (PEP 669): there a ``sys.settrace`` function that turns on opcode events
    in a frame stops getting them once the code has run untraced in between (seen on 3.13 and 3.14), which
    :func:`interrupt_everywhere` does after every interrupt."""
    if not hasattr(sys, "monitoring"):
        return _interrupt_by_settrace(code, offset)
    monitoring, thread = sys.monitoring, threading.get_ident()
    tool = monitoring.DEBUGGER_ID
    monitoring.use_tool_id(tool, "shoal's interrupt tests")

    def stop() -> None:
        monitoring.set_local_events(tool, code, 0)
        monitoring.register_callback(tool, monitoring.events.INSTRUCTION, None)
        monitoring.free_tool_id(tool)

    def instruction(where, at) -> Any:
        if where is code and at == offset and threading.get_ident() == thread:
            monitoring.set_local_events(tool, code, 0)
            raise KeyboardInterrupt
        return None

    monitoring.register_callback(tool, monitoring.events.INSTRUCTION, instruction)
    monitoring.set_local_events(tool, code, monitoring.events.INSTRUCTION)
    return stop


def _interrupt_by_settrace(code, offset: int) -> Callable[[], None]:
    """:func:`interrupt_at` before Python 3.12: a trace function that raises is unset, and its error is raised in the
    traced frame."""
    def local(frame, event, arg):
        if event == "opcode" and frame.f_lasti == offset:
            raise KeyboardInterrupt
        return local

    def calls(frame, event, arg):
        if frame.f_code is code:
            frame.f_trace_opcodes = True
            return local
        return None

    sys.settrace(calls)
    return lambda: sys.settrace(None)


def interrupt_everywhere(functions, run, check) -> dict[str, int]:
    """For each bytecode of each of ``functions``: ``run()`` with an interrupt raised there, then ``check()`` (any
    error it raises is reported with the place of the interrupt). How many interrupts fired in each function
    (bytecodes of paths ``run`` does not take never fire). A method that the call guard runs (``state.guarded``,
    ``state.whole``: a ``Guarded``, in C, with no bytecode of its own) is tried in its own body. Every bytecode, as on
    Python 3.14, where a real Ctrl-C can land right after any call returns, a with statement's ``__enter__`` included
    (see shoal/vector/_guard.c): none of these functions has a with statement whose ``__exit__`` matters."""
    import dis

    from shoal.vector._guard import Guarded

    fired: dict[str, int] = {}
    for function in functions:
        if isinstance(function, Guarded):
            function = function.__wrapped__
        code = function.__code__
        name = function.__qualname__
        fired[name] = 0
        for instruction in dis.get_instructions(code):
            stop = interrupt_at(code, instruction.offset)
            try:
                run()
            except KeyboardInterrupt:
                fired[name] += 1
            finally:
                stop()
            try:
                check()
            except Exception as exc:
                where = f"after an interrupt in {name} before {instruction.opname} at {instruction.offset}"
                raise AssertionError(f"{where}: {exc!r}") from exc
    return fired


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    "info", [False, True, "pickled", "large"], ids=["no-info", "info", "pickled-info", "large-info"])
@pytest.mark.parametrize("hosting", ["serial", "inline", "workers", pytest.param("ray", marks=pytest.mark.ray)])
def test_ctrl_c_at_any_bytecode_of_a_steps_send_and_receive_leaves_the_env_current(hosting, info):
    """A real Ctrl-C lands between two bytecodes anywhere; the other tests catch it in the waits. Here it is raised
    before each bytecode of a synchronous step's own code in turn (step, send and its dispatch, recv and its
    receive, the transport's posting and gathering; a worker's infos read from its info table, its answer's mailbox
    or off the pipe), and the next steps must return what the envs hold then."""
    from shoal.vector._worker import decode
    from shoal.vector.base import VectorEnv
    from shoal.vector.channel import Channel
    from shoal.vector.info_table import InfoTable
    from shoal.vector.link import Link

    with shoal.make(functools.partial(SlowEnv, 0.0, info=info), 4, **HOSTINGS[hosting]) as envs:
        envs.reset(seed=0)
        transport = type(envs._transport)
        gathering = transport.collect if "collect" in vars(transport) else transport.gather  # (serial: no gather)
        functions = [VectorEnv.step, VectorEnv.send, VectorEnv._dispatch_step, VectorEnv.recv,
                     VectorEnv._recv_parts, VectorEnv._receive, VectorEnv._sendable, transport.step,
                     gathering]
        if hosting == "ray":  # every step is a message each way: queued, owed and written; peeked, read, skipped
            functions += [transport._send, Channel.queue, Channel.flush, transport._wait, transport._read,
                          Channel.peek, Channel.skip]
        elif hosting != "serial":  # (numeric infos through the table, small answers in mailboxes, large on the pipe)
            functions += [Link.post_steps, transport._read, Link.take_answer, Channel.peek, Channel.skip]
            functions += [InfoTable.read] if info is True else [decode] if info == "pickled" else []
        k = iter(range(1, 1 << 30))

        def check():
            assert envs._guard.owner is None, "the interrupted call left the call guard held"
            for _ in range(2):
                actions = (np.arange(4) + next(k)) % 5
                obs, *_, infos = envs.step(actions)
                assert_current(envs, obs, actions)
                if info:  # each stepped env's own step count (an answer read for another step has another)
                    stepped = infos.get("_t", np.zeros(4, bool))
                    assert (stepped == (obs[:, 0] > 0)).all()
                    np.testing.assert_array_equal(infos.get("t", np.zeros(4))[stepped], obs[stepped, 0])

        fired = interrupt_everywhere(functions, lambda: envs.step(np.full(4, next(k) % 5)), check)
    silent = sorted(name for name, count in fired.items() if count < 3)  # the pipe carries only the large infos
    on_pipe = info == "large" or hosting in ("serial", "ray")  # (serial: no pipe; ray: every step on it)
    assert silent == ([] if on_pipe else ["Channel.peek", "Channel.skip"]), fired


@pytest.mark.timeout(300)
@pytest.mark.parametrize("hosting", ["serial", "inline", "workers", pytest.param("ray", marks=pytest.mark.ray)])
def test_ctrl_c_at_any_bytecode_of_a_reset_or_a_call_leaves_the_env_current(hosting):
    """As above, for reset() (its two halves) and call() (its halves, the parking of what steps): after each
    interrupt, a seeded reset equals a reference's and a step returns what the envs hold."""
    from shoal.vector.base import VectorEnv
    from shoal.vector.channel import Channel
    from shoal.vector.link import Link

    fn = functools.partial(SlowEnv, 0.0)
    with shoal.make(fn, 4, **HOSTINGS[hosting]) as envs, shoal.make(fn, 4, backend="serial") as ref:
        envs.reset(seed=0)
        expected, _ = ref.reset(seed=3)

        def check():
            assert envs._guard.owner is None, "the interrupted call left the call guard held"
            obs, _ = envs.reset(seed=3)
            np.testing.assert_array_equal(obs, expected)
            actions = np.arange(4) % 5
            obs, *_ = envs.step(actions)
            assert_current(envs, obs, actions)

        resets = [VectorEnv.reset, VectorEnv.reset_async, VectorEnv.reset_wait,
                  VectorEnv._reset_wait_parts]
        calls = [VectorEnv.call, VectorEnv._run_everywhere, VectorEnv.call_wait,
                 VectorEnv._quiesce_for_call]
        if hosting == "ray":  # the commands' way to a node: queued, owed, written
            transport = type(envs._transport)
            resets += [transport.dispatch, transport._send, Channel.queue, Channel.flush]
        elif hosting != "serial":  # the command's way to a worker: posted (its message into the slot's mailbox)
            resets += [Link.post]
        fired = interrupt_everywhere(resets, lambda: envs.reset(seed=1), check)
        fired.update(interrupt_everywhere(calls, lambda: envs.call("nap", 0.0), check))
        if hosting in ("inline", "workers"):  # a command past a mailbox: posted, its message queued and written on
            # the pipe (a cut between the post and the message, or inside the message, left the worker waiting for
            # it: a hang)
            large = {"pad": "x" * 4096}
            on_pipe = interrupt_everywhere([Link.post, Channel.queue, Channel.flush],
                                           lambda: envs.reset(seed=1, options=large), check)
            fired.update({f"{name} (on the pipe)": count for name, count in on_pipe.items()})
    assert min(fired.values()) >= 3, fired


@pytest.mark.timeout(300)
@pytest.mark.parametrize("part", ["send", "recv", "call"])
@pytest.mark.parametrize(
    "hosting", ["serial", "workers", pytest.param("ray", marks=pytest.mark.ray)]  # (inline has no async mode)
)
def test_ctrl_c_at_any_bytecode_of_an_asynchronous_step_loses_no_env(hosting, part):
    """Asynchronous mode, an interrupt before any bytecode of a ``send``, a ``recv`` or a call made while batches are
    in flight. After one in ``recv``, ``recv`` again collects the batch (the same one, if the first had taken it) and
    stepping goes on with no env lost and none stale; after one in ``send``, which envs are stepping is not known, and
    a full ``reset()`` brings every env back; after one in a call, the next call or step simply goes on. (Before, an
    interrupt just after a batch's answers were taken and before it was held lost its groups: ``recv`` never
    returned them again, and calls and even the full reset failed looking for their answers. A call lost the
    batches in flight that it was parking, or left its own answers to be taken by the next ``recv`` as a step's.)"""
    from shoal.vector.base import VectorEnv
    from shoal.vector.state import AsyncState
    from shoal.vector.transport import Transport

    def after(t):  # SlowEnv's step count one step on: episodes end at multiples of 7, and the next step resets
        return np.where((t > 0) & (t % 7 == 0), 0, t + 1)

    fn = functools.partial(SlowEnv, 0.0, info=True)
    with shoal.make(fn, 6, batch_size=4, **HOSTINGS[hosting]) as envs:  # (a call parks less than a batch:
        # the next recv reads the transport too)
        envs.reset(seed=0)
        transport = type(envs._transport)
        k = iter(range(1, 1 << 30))

        def check():
            assert envs._guard.owner is None, "the interrupted call left the call guard held"
            if envs._state is AsyncState.WAITING_STEP:
                envs.recv()
            if part == "send":
                envs.reset(seed=3)
            shown = None
            if part == "call":  # step on first, as a training loop would (the next call would tidy up before it)
                envs.send(np.full(4, next(k) % 5))
                obs, *_, info = envs.recv()
                shown = info["env_id"], obs[:, 0]
                assert len(set(shown[0].tolist())) == 4, f"a batch of the same env twice: {shown[0]}"
            t = np.array(envs.get_attr("t"), np.float64)  # (the envs in flight have answered: their counts are due)
            if shown is not None:
                np.testing.assert_array_equal(t[shown[0]], shown[1], err_msg=f"a stale step of envs {shown[0]}")
            due = t.copy()  # what each env's next answer shows: its count now, or one step on for the batch held
            due[envs._held_ids] = after(t[envs._held_ids])
            seen = set()
            for _ in range(8):
                envs.send(np.full(4, next(k) % 5))
                obs, *_, info = envs.recv()
                ids = info["env_id"]
                np.testing.assert_array_equal(obs[:, 0], due[ids], err_msg=f"a stale or lost step of envs {ids}")
                due[ids] = after(due[ids])
                seen |= set(ids.tolist())
            assert seen == set(range(6)), f"envs that never came back: {sorted(set(range(6)) - seen)}"

        def run():
            envs.send(np.full(4, next(k) % 5))
            envs.recv()
            if part == "call":  # the other batch is in flight: parked first, and handed out by the next recv
                envs.get_attr("t")
                envs.get_attr_envs([1, 5], "t")

        if part == "send":
            functions = [transport.step]
            own = [VectorEnv.send, VectorEnv._dispatch_step]
        elif part == "recv":
            functions = [transport.gather_any, Transport._first_stored]
            own = [VectorEnv.recv, VectorEnv._recv_parts, VectorEnv._receive, VectorEnv._hand_out]
        else:
            functions = [Transport.collect, transport.gather, Transport._stored, Transport.release]
            own = [VectorEnv.get_attr, VectorEnv._run_everywhere, VectorEnv._quiesce_for_call,
                   VectorEnv._park_in_flight, VectorEnv.call_wait, VectorEnv._on_envs,
                   VectorEnv._run_now]
        if hosting != "ray":  # (the vector env's own part is the same over any transport, and Ray's is slow)
            functions += own
        fired = interrupt_everywhere(functions, run, check)
    assert min(fired.values()) >= 3, fired


def signal_sender(stop: threading.Event) -> threading.Thread:
    """A thread (not started) that sends the main thread SIGUSR1 every ~10 µs until `stop` is set."""

    def signals() -> None:
        while not stop.is_set():
            signal.pthread_kill(threading.main_thread().ident, signal.SIGUSR1)
            time.sleep(1e-5)

    return threading.Thread(target=signals, daemon=True)


@pytest.mark.timeout(60)
def test_no_signal_landing_anywhere_in_a_tight_loop_of_guarded_calls_leaves_the_guard_held():
    """The call guard's window, where it can be hit: calls that do nothing, run by the guard in a loop (as
    ``CallGuard.run``, and as methods made by ``state.guarded`` and ``state.whole``), while a thread signals every
    ~10 us and the handler raises at the first point CPython runs it after each arming (thousands of times, at every
    point of the loop, the guard's call and return included). None may leave the guard held, a call that raises
    inside it gives it back too, and a ``whole`` method notes each error that ends it. (On Python 3.14.10, the guard
    as a context manager, ``with guard:`` around the same call, was left held after 90,723 of 160,857 such
    interrupts: 3.14 checks for signals right after ``__enter__`` returns, before the with block's protection;
    CPython issue 148874.)"""
    from shoal.vector._guard import CallGuard
    from shoal.vector.state import guarded, refuse_concurrent, whole

    class Landed(Exception):
        pass

    class Owner:
        def __init__(self):
            self._guard = CallGuard(refuse_concurrent)
            self.noted = []

        def _note_interrupt(self, exc):
            self.noted.append(type(exc))

        @guarded
        def add(self, k, *, by=1):
            return k + by

        @whole
        def fails(self):
            raise ValueError("inside")

    owner = Owner()
    guard = owner._guard
    armed = [False]

    def land(signum, frame):
        if armed[0]:
            armed[0] = False
            raise Landed

    def nothing(k, *, by=1):
        return k + by

    def fails():
        raise ValueError("inside")

    stop = threading.Event()

    previous = signal.signal(signal.SIGUSR1, land)
    sender = signal_sender(stop)
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    landed = held = total = failed = 0
    deadline = time.monotonic() + 3.0
    collecting = gc.isenabled()
    gc.disable()  # no collection in the loop: the handler would run inside another library's gc callback (hypothesis
    # registers one), where an exception is unraisable, not the guard's window
    try:
        sender.start()
        while time.monotonic() < deadline:
            try:
                armed[0] = True
                for k in range(500):
                    total = guard.run(nothing, total, by=1)
                    total = owner.add(total, by=1)
                    with pytest.raises(ValueError, match="inside"):
                        guard.run(fails)
                    with pytest.raises(ValueError, match="inside"):
                        owner.fails()
                    failed += 1
            except Landed:
                landed += 1
                if guard.owner is not None:
                    held += 1
                    guard.forget()
    finally:
        stop.set()
        armed[0] = False
        sender.join()
        signal.signal(signal.SIGUSR1, previous)
        sys.setswitchinterval(switch)
        if collecting:
            gc.enable()
    assert landed >= 1000, landed
    assert held == 0, f"{held} of {landed} interrupts left the guard held"
    # every ValueError out of fails() was noted (and a Landed that ended it inside, noted too)
    assert owner.noted.count(ValueError) >= failed and set(owner.noted) <= {ValueError, Landed}, owner.noted[:10]
    assert guard.run(guard.run, lambda: guard.owner) == threading.get_ident()  # re-entrant, and given back after
    assert guard.owner is None


def test_a_guarded_method_keeps_its_name_and_signature_notes_its_error_inside_the_guard_and_refuses_other_threads():
    """``state.guarded`` and ``state.whole`` make methods that the guard runs in C (``_guard.Guarded``): they look
    like the method (name, doc, signature, a bound method), the note runs while the guard is still held, an error
    out of the note is raised with the method's as its context, and another thread's call is refused while one is
    inside."""
    import inspect

    from shoal.errors import ConcurrentCallError
    from shoal.vector._guard import CallGuard
    from shoal.vector.state import guarded, refuse_concurrent, whole

    class Owner:
        def __init__(self):
            self._guard = CallGuard(refuse_concurrent)
            self.notes = []

        def _note_interrupt(self, exc):
            self.notes.append((exc, self._guard.owner))
            if str(exc) == "note fails too":
                raise RuntimeError("in the note")

        @guarded
        def add(self, k: int, *, by: int = 1) -> int:
            """Add by to k."""
            return k + by

        @whole
        def fails(self, message):
            raise ValueError(message)

        @guarded
        def elsewhere(self):
            out = []
            thread = threading.Thread(target=lambda: out.append(pytest.raises(ConcurrentCallError, self.add, 1)))
            thread.start()
            thread.join()
            return out[0]

    owner = Owner()
    assert (Owner.add.__name__, Owner.add.__qualname__.split(".")[-1], Owner.add.__doc__) == ("add", "add",
                                                                                              "Add by to k.")
    assert str(inspect.signature(owner.add)) == "(k: 'int', *, by: 'int' = 1) -> 'int'"
    assert owner.add(2, by=3) == 5 and Owner.add(owner, 2) == 3 and owner.add.__self__ is owner
    with pytest.raises(ValueError, match="plain") as raised:
        owner.fails("plain")
    assert owner.notes[-1] == (raised.value, threading.get_ident())  # noted while the guard was held
    assert raised.value.__traceback__ is not None and guard_free(owner)
    with pytest.raises(RuntimeError, match="in the note") as raised:
        owner.fails("note fails too")
    assert isinstance(raised.value.__context__, ValueError) and guard_free(owner)
    assert "ConcurrentCallError" in str(owner.elsewhere()) and guard_free(owner)
    with pytest.raises(TypeError, match="needs a CallGuard as _guard, not int"):
        guarded(Owner.add.__wrapped__)(type("Bare", (), {"_guard": 3})(), 1)


def guard_free(owner) -> bool:
    return owner._guard.owner is None


@pytest.mark.timeout(120)
@pytest.mark.parametrize("hosting", ["serial", "workers"])
def test_ctrl_c_delivered_as_a_signal_never_leaves_the_call_guard_held(hosting):
    """Ctrl-C as CPython delivers it: a thread signals the main thread every ~10 us while it steps, resets and
    calls, and the handler raises KeyboardInterrupt at the first point CPython runs it after a random moment of
    each call. After each, no call holds the vector env's call guard (a guard left held would refuse every other
    thread for good) and the env steps on, current. (The guard calls the method itself, in C, so that no interrupt
    can land between its taking and what gives it back: see shoal/vector/_guard.c. A lock taken in Python, or a
    with statement on Python 3.14, has that window, too short in a step to be hit in a test's time: the next test
    hits it.)"""
    rng = np.random.default_rng(0)
    fire_at = [float("inf")]

    def interrupt(signum, frame):
        if time.perf_counter() >= fire_at[0]:
            fire_at[0] = float("inf")
            raise KeyboardInterrupt

    stop = threading.Event()

    previous = signal.signal(signal.SIGUSR1, interrupt)
    sender = signal_sender(stop)
    interrupted = 0
    # numpy's error state, put back after: an interrupt inside numpy's own np.errstate (Gymnasium's seeding enters one
    # on every reset) can leave it changed (over="ignore") for the rest of the process, and later tests of numpy's
    # overflow warning then saw none
    errors = np.geterr()
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # the threads take turns at almost every point where CPython checks for signals
    collecting = gc.isenabled()
    gc.disable()  # as in the tight-loop test above: an interrupt inside a gc callback would be unraisable
    try:
        with shoal.make(functools.partial(SlowEnv, 0.0), 4, **HOSTINGS[hosting]) as envs:
            envs.reset(seed=0)
            sender.start()
            for k in range(3000):
                try:
                    fire_at[0] = time.perf_counter() + rng.uniform(0, 3e-4)
                    if k % 50 == 0:
                        envs.reset(seed=k)
                    elif k % 50 == 1:
                        envs.get_attr("t")
                    else:
                        envs.step(np.full(4, k % 5))
                    fire_at[0] = float("inf")
                except KeyboardInterrupt:
                    interrupted += 1
                    assert envs._guard.owner is None, f"an interrupt in call {k} left the call guard held"
            stop.set()
            sender.join()
            fire_at[0] = float("inf")
            actions = np.arange(4)
            obs, *_ = envs.step(actions)
            assert_current(envs, obs, actions)
    finally:
        stop.set()
        signal.signal(signal.SIGUSR1, previous)
        sys.setswitchinterval(switch)
        np.seterr(**errors)
        if collecting:
            gc.enable()
    assert interrupted >= 100, interrupted


@pytest.mark.timeout(60)
def test_ctrl_c_during_step_wait_leaves_the_step_pending():
    """As in Gymnasium's AsyncVectorEnv (and as after a timeout): step_wait() again collects the interrupted step;
    in asynchronous mode a send is refused until then, and a full reset drops what is in flight."""
    fn = functools.partial(SlowEnv, 0.2)
    with shoal.make(fn, 4, num_workers=2, inline=False) as envs:
        envs.reset(seed=0)
        actions = np.array([1, 2, 3, 4])
        envs.step_async(actions)
        with ctrl_c_after(0.05):
            envs.step_wait()
        obs, *_ = envs.step_wait()
        assert_current(envs, obs, actions)
    with shoal.make(fn, 4, num_workers=2, batch_size=2) as envs:
        envs.reset(seed=0)
        envs.step(np.array([1, 2]))  # the two envs the reset did not hand out come back at once: now all four step
        envs.send(np.array([1, 2]))
        with ctrl_c_after(0.05):
            envs.recv()
        with pytest.raises(AlreadyPendingCallError, match=r"pending call to `step`"):
            envs.send(np.array([1, 2]))
        obs, *_, info = envs.recv()
        assert obs.shape == (2, 2)
        envs.send(np.array([3, 3]))
        with ctrl_c_after(0.05):
            envs.recv()
        obs, info = envs.reset(seed=5)
        assert (obs[:, 0] == 0).all() and len(set(info["env_id"].tolist())) == 2

        def go_on():
            for _ in range(4):
                envs.send(np.array([2, 2]))
                obs, *_, info = envs.recv()
                t = np.array(envs.get_attr("t"), np.float64)[info["env_id"]]
                np.testing.assert_array_equal(obs[:, 0], t)

        go_on()
        envs.call_async("nap", 0.3)  # a call the user started stays pending when its wait is interrupted
        with ctrl_c_after(0.05):
            envs.call_wait()
        with pytest.raises(AlreadyPendingCallError, match=r"pending call to `call`"):
            envs.send(np.array([2, 2]))
        assert len(envs.call_wait()) == 4
        with ctrl_c_after(0.05):  # a whole call() is not: the next call or send drops it
            envs.call("nap", 0.3)
        go_on()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("batch_size", [None, 2], ids=["sync", "async"])
def test_ctrl_c_right_after_the_workers_were_told_to_step(batch_size, monkeypatch):
    """An interrupt landing inside send, after the workers got the step (fault injected there: a real Ctrl-C hits
    that window too seldom to test). Synchronous: the next step drops that step's answers. Asynchronous: which envs
    are stepping is unknown, so new work is refused until a full reset, and after it every batch is current."""
    fn = functools.partial(SlowEnv, 0.02)
    with shoal.make(fn, 4, num_workers=2, batch_size=batch_size, inline=False) as envs:
        _, info = envs.reset(seed=0)
        post = envs._transport.step

        def post_then_interrupt(groups, own_actions=None):
            post(groups, own_actions)
            raise KeyboardInterrupt

        monkeypatch.setattr(envs._transport, "step", post_then_interrupt)
        with pytest.raises(KeyboardInterrupt):
            envs.step(np.full(envs.batch_size, 1))
        monkeypatch.undo()
        if batch_size:
            with pytest.raises(NotResetError, match=r"send: an interrupt .* reset\(\) to go on"):
                envs.step(np.full(2, 2))
            envs.reset(seed=0)
        for k in range(2, 5):
            actions = np.full(envs.batch_size, k)
            obs, *_, info = envs.step(actions)
            ids = info.get("env_id", np.arange(4))
            t = np.array(envs.get_attr("t"), np.float64)[ids]
            np.testing.assert_array_equal(obs[:, 0], t)
            if not batch_size:  # (an asynchronous batch may be envs sent the step before, with its actions)
                np.testing.assert_array_equal(obs[t > 0, 1], actions[t > 0])


class _Finalized:
    """Garbage whose finalizer writes down which process ran it."""

    def __init__(self, path: Path) -> None:
        self.path, self.cycle = path, self  # a cycle: only a garbage collection frees it

    def __del__(self) -> None:
        with open(self.path, "a") as f:
            f.write(f"{os.getpid()}\n")


def test_forked_workers_never_finalize_garbage_they_inherit(tmp_path):
    """A Ray ActorHandle finalized in a forked worker hung that worker on a lock of Ray's threads, which did not
    survive the fork, and Ray in the parent then hung in ray.nodes() or aborted (seen in CI): the parent's heap is
    frozen while workers fork, so only the parent finalizes its garbage."""
    path = tmp_path / "finalized"
    gc.disable()  # the garbage must still be there, uncollected, when the workers fork
    try:
        _Finalized(path)
        fns = [functools.partial(made_in_worker, os.getpid(), collect=True)] * 2
        with shoal.make(fns, backend="multiprocessing", num_workers=2, context="fork", inline=False) as envs:
            envs.reset(seed=0)
            envs.step(np.zeros(2, np.int64))
        assert gc.get_freeze_count() == 0  # the parent's heap is its collector's again
    finally:
        gc.enable()
    assert not path.exists(), f"finalized in a worker (pid {path.read_text().split()}), not in the parent"
    gc.collect()
    assert path.read_text().split() == [str(os.getpid())]


def test_a_forked_child_leaves_its_parents_workers_alone():
    """A child forked from a process with vector envs open (os.fork, then a normal exit, which runs the atexit
    handlers it inherited: multiprocessing's terminated the parent's daemon workers, shoal's closed them) leaves
    them to the parent, which steps on. In the child those envs are closed, with an error naming the parent; a
    serial vector env made before the fork is the child's own copy and steps there."""
    code = """
        import multiprocessing, os, sys
        import numpy as np
        import shoal
        from shoal.errors import ClosedError
        shared = shoal.make("CartPole-v1", 4, backend="multiprocessing", num_workers=2, inline=False)
        own = shoal.make("CartPole-v1", 2, backend="serial")
        shared.reset(seed=0)
        own.reset(seed=0)
        pid = os.fork()
        if pid == 0:
            try:
                shared.step(np.zeros(4, np.int64))
                sys.exit(3)
            except ClosedError as exc:
                assert f"belongs to process {os.getppid()}" in str(exc), exc
            own.step(np.zeros(2, np.int64))
            shared.close()
            sys.exit(0)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0, status
        for _ in range(20):
            shared.step(np.zeros(4, np.int64))
        shared.close()
        own.close()
        assert not multiprocessing.active_children()
        print("the parent stepped on")
    """
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "the parent stepped on" in done.stdout, done.stdout + done.stderr


def test_a_heap_the_caller_froze_stays_frozen():
    gc.freeze()
    try:
        fns = [functools.partial(made_in_worker, os.getpid(), collect=True)] * 2
        with shoal.make(fns, backend="multiprocessing", num_workers=2, context="fork") as envs:
            envs.reset(seed=0)
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()


def test_a_worker_slow_to_make_its_envs_is_named_in_a_warning_and_waited_for(monkeypatch):
    """A worker's start has no time limit (making an env may take minutes), but one that is slow is named: a forked
    worker can deadlock on a lock it inherited held, and the caller would otherwise wait without a word."""
    from shoal.vector import processes

    monkeypatch.setattr(processes, "START_WARN_S", 0.3)
    fns = [functools.partial(made_in_worker, os.getpid(), delay=d) for d in (0.0, 0.0, 1.0, 1.0)]
    slow = r"worker 1 \(pid \d+, hosting envs 2\.\.3\) has not made its envs after 0\.3 s; still waiting"
    with pytest.warns(RuntimeWarning, match=slow) as got:  # fork: a worker under forkserver (Python 3.14's default)
        # or spawn takes ~0.3 s to import shoal before it makes its envs, which would name worker 0 too
        envs = shoal.make(fns, backend="multiprocessing", num_workers=2, inline=False, context="fork")
    with envs:
        assert sum("has not made" in str(w.message) for w in got) == 1  # once, and only for worker 1
        envs.reset(seed=0)
        envs.step(np.zeros(4, np.int64))  # it waited, and the envs work
