"""The call guard (shoal/vector/_guard.c): a signal landing anywhere never leaves it held, a guarded method keeps its
name and signature, and other threads are refused."""

from __future__ import annotations

import functools
import gc
import signal
import sys
import threading
import time

import numpy as np
import pytest
from fakes.faults import HOSTINGS, SlowEnv, assert_current

import shoal


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
