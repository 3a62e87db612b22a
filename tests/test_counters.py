"""The atomic counters in shared memory (shoal.vector._counters, C) that workers and the caller signal through: loads,
stores and adds, a wait that spins then sleeps until woken, moved or timed out, across processes."""

from __future__ import annotations

import multiprocessing as mp
import threading
import time

import pytest

from shoal.vector._counters import Counters


def test_counters_load_store_add():
    counters = Counters(mp.RawArray("b", Counters.nbytes(3)), 3)
    assert [counters.load(i) for i in range(3)] == [0, 0, 0]
    counters.store(1, 41)
    assert counters.add(1, 1) == 42
    assert [counters.load(i) for i in range(3)] == [0, 42, 0]
    counters.store(2, -(2**62))
    assert counters.load(2) == -(2**62)


def test_counters_wait_returns_the_new_value_or_gives_up():
    counters = Counters(mp.RawArray("b", Counters.nbytes(1)), 1)
    counters.store(0, 7)
    assert counters.wait(0, 3, 10.0) == 7  # differs already: at once
    start = time.perf_counter()
    assert counters.wait(0, 7, 0.02) == 7  # never changes: gives up
    assert 0.02 <= time.perf_counter() - start < 2.0
    # The spin releases the GIL, so a thread of this process can make the change it waits for.
    threading.Timer(0.01, counters.store, (0, 8)).start()
    assert counters.wait(0, 7, 10.0) == 8


def test_counters_sleep_until_woken_or_moved_or_timed_out():
    counters = Counters(mp.RawArray("b", Counters.nbytes(2)), 2)
    counters.store(0, 7)
    start = time.perf_counter()
    counters.sleep(0, 3, 10.0)  # the counter is not 3: no sleep at all
    counters.sleep(0, 7, 0.0)  # no time to sleep
    assert time.perf_counter() - start < 1.0
    counters.sleep(0, 7, 0.05)  # nobody wakes it: the time runs out
    assert time.perf_counter() - start >= 0.05

    def bump_and_wake():
        counters.add(0, 1)
        counters.wake(0)

    timer = threading.Timer(0.05, bump_and_wake)
    start = time.perf_counter()
    timer.start()
    counters.sleep(0, 7, 20.0)  # woken (the sleep releases the GIL, so the timer thread can run)
    assert counters.load(0) == 8
    assert time.perf_counter() - start < 10.0
    timer.join()
    with pytest.raises(TypeError, match=r"sleep\(index, old, seconds\) takes 3 arguments, got 2"):
        counters.sleep(0, 7)
    with pytest.raises(IndexError, match=r"counter 2 out of range"):
        counters.wake(2)


def _bump_after(memory, count, delay):
    time.sleep(delay)
    Counters(memory, count).add(0, 5)


def test_counters_are_shared_between_processes():
    memory = mp.RawArray("b", Counters.nbytes(1))
    counters = Counters(memory, 1)
    child = mp.get_context("spawn").Process(target=_bump_after, args=(memory, 1, 0.05))
    child.start()
    assert counters.wait(0, 0, 30.0) == 5
    child.join()


def test_counters_reject_bad_arguments():
    memory = mp.RawArray("b", Counters.nbytes(2))
    with pytest.raises(ValueError, match=r"3 counters need 192 bytes aligned to 8, got 128 bytes"):
        Counters(memory, 3)
    with pytest.raises(ValueError, match=r"count must be >= 0, got -1"):
        Counters(memory, -1)
    with pytest.raises(BufferError, match=r"not writable"):
        Counters(bytes(256), 1)
    counters = Counters(memory, 2)
    with pytest.raises(IndexError, match=r"counter 2 out of range \[0, 2\)"):
        counters.load(2)
    with pytest.raises(IndexError, match=r"counter -1 out of range \[0, 2\)"):
        counters.store(-1, 0)
    with pytest.raises(TypeError, match=r"wait\(index, old, seconds\) takes 3 arguments, got 2"):
        counters.wait(0, 0)
