"""Ctrl-C anywhere loses nothing: a KeyboardInterrupt in a reset, a step or a call (while this process steps its envs
or waits for the workers'), and before every bytecode of their own code, leaves every env usable and every later
result current."""

from __future__ import annotations

import contextlib
import functools
import signal
import sys
import threading
from typing import Any, Callable

import numpy as np
import pytest
from fakes.faults import HOSTINGS, SlowEnv, assert_current

import shoal
from shoal.errors import AlreadyPendingCallError, NotResetError


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
    traced frame. The trace function that was set before (a debugger's, coverage's) is set again when it stops."""
    def local(frame, event, arg):
        if event == "opcode" and frame.f_lasti == offset:
            raise KeyboardInterrupt
        return local

    def calls(frame, event, arg):
        if frame.f_code is code:
            frame.f_trace_opcodes = True
            return local
        return None

    previous = sys.gettrace()  # a debugger's or coverage's, which it gets back
    sys.settrace(calls)
    return lambda: sys.settrace(previous)


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
