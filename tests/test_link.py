"""The multiprocessing backend's signalling, piece by piece: the atomic counters (C) with their spin and sleep/wake,
the pipe framing, the link protocol between two real processes (answers in order, payloads on the pipe, no lost
wake-up whether the sides spin or sleep, a dead peer ends a wait), and what a worker leaves in shared memory."""

from __future__ import annotations

import multiprocessing as mp
import os
import pickle
import random
import sys
import threading
import time

import numpy as np
import pytest
from gymnasium import spaces

from shoal.spaces import Layout
from shoal.vector._counters import Counters
from shoal.errors import EnvOutputError
from shoal.vector._worker import FINALS, OK, Replies, decode, finals_of, park_finals, parked_finals
from shoal.vector.buffers import BufferSpec
from shoal.vector.infos import Finals
from shoal.vector import link as link_module
from shoal.vector.channel import Channel
from shoal.vector.link import (
    EVENTS, MAILBOX_BYTES, ON_PIPE, PARENT_ASLEEP, Link, PeerClosed, Spin, counters_needed, mailbox_bytes, wait,
)

# -- counters ------------------------------------------------------------------------------------------------------


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


# -- the pipe ------------------------------------------------------------------------------------------------------


def test_channel_frames_messages_and_reports_a_closed_peer():
    a, b = mp.Pipe()
    left, right = Channel(a), Channel(b)
    big = os.urandom(300_000)  # more than a pipe holds: the writer must wait for the reader
    writer = threading.Thread(target=lambda: [left.send(m) for m in (b"one", b"", big, b"two")])
    writer.start()
    assert [right.recv() for _ in range(4)] == [b"one", b"", big, b"two"]
    writer.join()
    left.send(b"last")
    assert right.poller.closed() == []
    left.close()
    assert right.poller.closed() == [right.fd]
    assert right.recv() == b"last"  # what was sent before the close is still read
    with pytest.raises(EOFError, match="closed"):
        right.recv()
    right.close()


def test_read_into_appends_what_the_descriptor_holds_until_the_inbox_holds_size():
    """The read a channel fills its inbox with: straight into the bytearray, each read asking for what is still
    missing (at least ``least``), stopping at ``size`` or when the descriptor is empty, EOFError at a closed end."""
    from shoal.vector._pipe import read_into

    r, w = os.pipe()
    os.set_blocking(r, False)
    inbox = bytearray(b"ab")
    assert read_into(r, inbox, 10, 4) == 0 and inbox == b"ab"  # nothing there: the inbox is as it was
    os.write(w, b"0123456789xyz")
    assert read_into(r, inbox, 6, 4) == 4 and inbox == b"ab0123"  # asked for max(6 - 2, 4): stops at size
    assert read_into(r, inbox, 6, 4) == 0  # holds size already: reads nothing
    assert read_into(r, inbox, 100, 4) == 9 and inbox == b"ab0123456789xyz"  # all there is, then empty
    big = os.urandom(3 << 20)  # many times what a pipe holds: written while the reader reads
    writer = threading.Thread(target=lambda: os.write(w, big) and os.write(w, b"!"))
    writer.start()
    start = len(inbox)
    while len(inbox) < start + len(big):  # (least=1: no read asks for more than the rest of big)
        read_into(r, inbox, start + len(big), 1)
    writer.join()
    assert bytes(inbox[start:]) == big
    os.close(w)
    before = len(inbox)
    with pytest.raises(EOFError, match="closed"):  # closed before size came: what came stays in the inbox
        read_into(r, inbox, before + 10, 4)
    assert inbox[before:] == b"!"
    with pytest.raises(TypeError, match="bytearray"):
        read_into(r, b"", 10, 4)
    os.close(r)


def test_a_read_an_interrupt_cut_short_loses_nothing(monkeypatch):
    """Ctrl-C right after a read returned (where Python checks for signals, and `inbox += os.read(...)` would lose
    what was read) leaves what came in the inbox: the next peek returns the message whole."""
    from shoal.vector import channel as channel_module

    a, b = mp.Pipe()
    sender, reader = Channel(a), Channel(b)
    big = os.urandom(1 << 20)  # more than the pipe holds: it comes in several reads
    writer = threading.Thread(target=lambda: sender.send(big))
    writer.start()
    read_into = channel_module.read_into
    reads = []

    def interrupted(fd, inbox, size, least):
        reads.append(read_into(fd, inbox, size, least))
        if reads[-1]:
            raise KeyboardInterrupt

    monkeypatch.setattr(channel_module, "read_into", interrupted)
    while not reader.whole():  # every read that brings something is interrupted
        with pytest.raises(KeyboardInterrupt):
            reader.peek()
    monkeypatch.undo()
    assert len([r for r in reads if r]) >= 2  # (the first read asks for the header's 4 bytes, or 4096)
    assert reader.recv() == big
    writer.join()
    sender.close()
    reader.close()


# -- the link between two processes ----------------------------------------------------------------------------------


def test_a_peeked_message_stays_until_skipped_and_a_prefix_travels_with_it():
    import struct

    a, b = mp.Pipe()
    left, right = Channel(a), Channel(b)
    left.send(b"payload", prefix=struct.pack("!q", 7))
    left.send(b"next")
    assert right.peek(8) == b"payload" and right.peek(8) == b"payload"  # read again: the same message
    assert right.prefix(struct.Struct("!q")) == (7,)
    right.skip()
    assert right.recv() == b"next"
    left.close()
    right.close()


def test_a_message_an_interrupt_cut_short_is_finished_by_the_next_flush(monkeypatch):
    """Ctrl-C right after a write returned (where Python would lose its count) leaves the message queued with the
    bytes written counted exactly: the next flush sends the rest and the peer reads it whole. A message is dropped
    only if none of it went, and no other is queued while it is."""
    from shoal.vector import channel as channel_module

    a, b = mp.Pipe()
    sender, reader = Channel(a), Channel(b)
    big = os.urandom(1 << 20)  # more than the pipe holds
    write_from = channel_module.write_from

    def interrupted(fd, data, progress):
        write_from(fd, data, progress)
        raise KeyboardInterrupt

    monkeypatch.setattr(channel_module, "write_from", interrupted)
    with pytest.raises(KeyboardInterrupt):
        sender.send(big, tag="reset")
    monkeypatch.undo()
    tag, written = sender.queued
    assert tag == "reset" and 0 < written < len(big)
    with pytest.raises(RuntimeError, match="already partly sent"):
        sender.drop()
    with pytest.raises(RuntimeError, match="still being sent"):
        sender.queue(b"another")
    got = []
    thread = threading.Thread(target=lambda: got.append(reader.recv()))
    thread.start()
    sender.flush()
    thread.join()
    assert got == [big] and sender.queued is None
    sender.queue(b"never posted", tag=8)
    sender.drop()  # none of it written: gone
    sender.send(b"next")
    assert reader.recv() == b"next"
    reader.close()
    with pytest.raises(BrokenPipeError):  # the peer is gone: the message stays queued, part of it written or not
        sender.send(big)
    sender.abandon()  # what a transport does with a dead peer's channel, so the next send fails the same way
    with pytest.raises(BrokenPipeError):
        sender.send(b"after")
    sender.close()


def test_an_end_waiting_on_a_silent_peer_asks_whether_to_go_on():
    # The peer's end stays open and silent (a Ray node whose machine is gone): without the check, a send would wait
    # for room, and a receive for the rest of a message, forever. The check runs each stall period and gives up by
    # raising.
    a, b = mp.Pipe()
    sender = Channel(a)
    checks = []

    def stalled():
        checks.append(time.monotonic())
        if len(checks) == 3:
            raise BrokenPipeError("gone")

    start = time.monotonic()
    with pytest.raises(BrokenPipeError, match="gone"):
        sender.send(os.urandom(1 << 20), stalled, stall_s=0.05)
    assert len(checks) == 3 and 0.1 <= time.monotonic() - start < 5
    b.close()
    sender.close()

    a, b = mp.Pipe()  # a message that stops coming halfway, its sender's end open: the reader gives up the same way
    reader, checks = Channel(a), []
    os.write(b.fileno(), (1 << 20).to_bytes(4, "big") + b"x" * 1000)
    with pytest.raises(BrokenPipeError, match="gone"):
        reader.recv(stalled, stall_s=0.05)
    assert len(checks) == 3
    b.close()
    reader.close()

    a, b = mp.Pipe()  # a peer that reads, slowly: the check runs while it does not and the message arrives whole
    sender, reader = Channel(a), Channel(b)
    big, got, calls = os.urandom(1 << 20), [], []
    thread = threading.Thread(target=lambda: (time.sleep(0.3), got.append(reader.recv())))
    thread.start()
    sender.send(big, lambda: calls.append(1), stall_s=0.05)
    thread.join()
    assert got == [big] and calls  # it waited, checked, and went on
    sender.close()
    reader.close()


# sizes of the payloads answered: in a mailbox up to MAILBOX_BYTES, on the pipe past it (and past the pipe's buffer)
_SIZES = (1, 100, MAILBOX_BYTES - 1, MAILBOX_BYTES, MAILBOX_BYTES + 1, 70_000)


def _payload(number):
    """The payload answering command ``number``: it names the command, in one of :data:`_SIZES`."""
    head = f"step {number} ".encode()
    size = max(len(head), _SIZES[number % len(_SIZES)])
    return (head * (size // len(head) + 1))[:size]


def _echo_worker(conn, memory, count, ring, spin_s, jitter_s, mailboxes):
    """Answers step commands with nothing (group 0), a payload naming the command (group 1) or the code 7 (group 2),
    and pipe commands with the message reversed; stops at b"stop". Sleeps a random while now and then, so that the
    parent's posts and waits meet a worker that is working, spinning or asleep."""
    link = Link(Channel(conn), Counters(memory, count), 0, ring, mailboxes)
    rng = random.Random(1)
    number = 0
    spin = Spin(spin_s)
    while True:
        assert link.wait_command(spin, 30.0), "no command within 30 s"
        command = link.take_command()
        if command == b"stop":
            return
        if rng.random() < 0.3:
            time.sleep(rng.random() * jitter_s)
        if isinstance(command, int):
            if command == 2:
                link.answer(b"", 7)
            else:
                link.answer(b"" if command == 0 else _payload(number))
        else:
            link.answer(command[::-1])
        number += 1


@pytest.mark.parametrize("mail", [False, True], ids=["pipe", "mailboxes"])
@pytest.mark.parametrize("spin_s", [0.0, 50e-6], ids=["sleeping", "spinning"])
def test_link_answers_every_command_in_order_without_lost_wake_ups(spin_s, mail, monkeypatch):
    # A sleeper looks for a dead peer every PEER_CHECK_S, and would then notice a missed bump too: with that far
    # longer than the waits' 5 s, a lost wake-up makes a wait run out (the worker is forked with the same value).
    monkeypatch.setattr(link_module, "PEER_CHECK_S", 60.0)
    ring = 2
    count = counters_needed(1, ring)
    memory = mp.RawArray("b", Counters.nbytes(count))
    counters = Counters(memory, count)
    mailboxes = mp.RawArray("b", mailbox_bytes(1, ring)) if mail else None
    parent_end, child_end = mp.Pipe()
    worker = mp.get_context("fork").Process(
        target=_echo_worker, args=(child_end, memory, count, ring, spin_s, 200e-6, mailboxes))
    worker.start()
    link = Link(Channel(parent_end), counters, 0, ring, mailboxes)
    rng = random.Random(2)
    expected: list[bytes | int] = []
    spin = Spin(spin_s)  # adapting across the waits, as the backend's does
    try:
        for number in range(1500):
            kind = rng.choice(["step", "payload step", "coded step", "message"])
            if kind == "message":
                link.post(ON_PIPE, _payload(number + 3))  # (its size not that of its answer)
                expected.append(_payload(number + 3)[::-1])
            elif kind == "coded step":
                link.post(2)
                expected.append(7)
            else:
                link.post(0 if kind == "step" else 1)
                expected.append(0 if kind == "step" else _payload(number))
            if len(expected) == ring or rng.random() < 0.5:  # at most `ring` in flight, as the backend keeps it
                if rng.random() < 0.3:
                    time.sleep(rng.random() * 200e-6)
                # Wait for all of them at once (the parent is woken by the last) or for one at a time. A lost
                # wake-up would leave the wait to run out: it must not.
                need = len(expected) if rng.random() < 0.5 else 1
                while expected:
                    missing = lambda: max(0, min(need, len(expected)) - link.available())  # noqa: E731
                    assert wait(counters, EVENTS, PARENT_ASLEEP, missing, [link.channel], spin, 5.0)
                    assert link.take_answer() == expected.pop(0)
        assert counters.load(PARENT_ASLEEP) == 0
        _stop(worker, link)
    finally:
        if worker.is_alive():
            worker.kill()
        link.channel.close()


@pytest.mark.parametrize("host", [0, 2])
def test_a_message_that_fits_a_mailbox_travels_in_shared_memory_and_a_larger_one_on_the_pipe(host):
    """A command's or an answer's message of at most MAILBOX_BYTES is written into its slot's mailbox (no byte on the
    pipe), a larger one goes on the pipe; either way, and between steps and codes, each is taken in order, whole.
    Each host's slots are its own: another host's commands and answers leave them alone."""
    ring, hosts = 3, 3
    count = counters_needed(hosts, ring)
    memory, mailboxes = mp.RawArray("b", Counters.nbytes(count)), mp.RawArray("b", mailbox_bytes(hosts, ring))
    counters = Counters(memory, count)
    parent_end, child_end = mp.Pipe()
    parent = Link(Channel(parent_end), counters, host, ring, mailboxes)
    worker = Link(Channel(child_end), counters, host, ring, mailboxes)
    neighbour = Link(Channel(mp.Pipe()[1]), counters, (host + 1) % hosts, ring, mailboxes)
    rng = random.Random(3)
    for number in range(60):
        size, command_size = rng.choice(_SIZES + (0,)), rng.choice(_SIZES + (-1,))
        message, command = os.urandom(size), os.urandom(max(command_size, 0))
        if command_size < 0:
            parent.post(1)
        else:
            parent.post(ON_PIPE, command)
        assert child_end.poll() == (command_size > MAILBOX_BYTES), command_size
        neighbour.post(ON_PIPE, os.urandom(MAILBOX_BYTES))  # (its own slots)
        assert worker.take_command() == (1 if command_size < 0 else command)
        worker.answer(message, 5)
        neighbour.answer(os.urandom(MAILBOX_BYTES))  # (its own slots: a step it was never posted)
        assert parent_end.poll() == (size > MAILBOX_BYTES), size  # the pipe holds the message only past a mailbox
        assert parent.available() == 1
        assert parent.take_answer() == (message if size else 5)
        assert not parent_end.poll() and not child_end.poll()


def _stop(worker, link):
    """Tell an echo or timed worker to stop (b"stop" on the pipe); it must exit cleanly."""
    link.post(ON_PIPE, b"stop")
    worker.join(10)
    assert worker.exitcode == 0


def _exit_at_once(conn, memory, count):
    Link(Channel(conn), Counters(memory, count), 0, 1)
    os._exit(3)


def test_a_dead_peer_ends_the_wait():
    count = counters_needed(1, 1)
    memory = mp.RawArray("b", Counters.nbytes(count))
    counters = Counters(memory, count)
    parent_end, child_end = mp.Pipe()
    worker = mp.Process(target=_exit_at_once, args=(child_end, memory, count))
    worker.start()
    child_end.close()  # the worker's exit then closes the last write end
    link = Link(Channel(parent_end), counters, 0, 1)
    link.post(0)
    start = time.monotonic()
    with pytest.raises(PeerClosed, match="pipe 0 is closed"):
        wait(counters, EVENTS, PARENT_ASLEEP, lambda: int(not link.available()), [link.channel], Spin(100e-6), 30.0)
    assert time.monotonic() - start < 5.0
    worker.join()
    link.channel.close()


def test_the_spin_stops_when_spinning_does_not_pay_and_tries_again_after_short_waits():
    """Two spins in a row that run out stop it (pinned to one CPU with its worker, a fixed 300 us spin took
    CartPole x 8 from ~70 to ~670 us a batch: each side spun while the other could not run); a wait slept that
    ended within the budget earns one trial spin, and each trial that runs out doubles the short waits the next one
    needs, up to TRIAL_MOST, and TRIAL_MOST waits without a spin earn one whatever their length; a spin that ends in
    time keeps it spinning. One spin that runs out does not stop it."""
    most = 100e-6
    spin = Spin(most)
    assert spin.next() == most
    spin.ended(False)
    assert spin.next() == most  # one spin that ran out: still spinning
    spin.ended(True)
    spin.ended(False)
    assert spin.next() == most  # the count is of spins in a row
    spin.ended(False)
    assert spin.next() == 0.0  # two in a row: stopped
    spin.slept(10 * most)  # a long wait (the caller's model): sleeping was right
    assert spin.next() == 0.0
    needed = []
    for _ in range(9):  # trials that run out, each after as many short waits as it needs
        short = 0
        while spin.next() == 0.0:
            spin.slept(most / 2)
            short += 1
            assert short <= Spin.TRIAL_MOST
        needed.append(short)
        spin.ended(False)
    assert needed == [1, 2, 4, 8, 16, 32, 64, 128, 128]
    assert spin.next() == 0.0
    while spin.next() == 0.0:
        spin.slept(most / 2)
    spin.ended(True)  # the trial paid: spinning again, and one miss does not stop it
    spin.ended(False)
    assert [spin.next() for _ in range(3)] == [most] * 3
    spin.ended(False)
    spin.slept(most / 2)
    assert spin.next() == most  # after a success, the first short wait earns a trial again
    slow_to_wake = Spin(most)  # no slept wait ever looks short: a trial all the same, every TRIAL_MOST waits
    slow_to_wake.ended(False)
    slow_to_wake.ended(False)
    for _ in range(2):
        unspun = 0
        while slow_to_wake.next() == 0.0:
            slow_to_wake.slept(10 * most)
            unspun += 1
        assert unspun == Spin.TRIAL_MOST
        slow_to_wake.ended(False)
    never = Spin(0.0)  # processes outnumber cores: nobody spins, trials included
    for _ in range(100):
        never.slept(0.0)
    assert [never.next() for _ in range(100)] == [0.0] * 100


class _Told(Spin):
    """A spin that records what the waits told it."""

    __slots__ = ("told",)

    def __init__(self, most: float) -> None:
        super().__init__(most)
        self.told: list[tuple[str, object]] = []

    def ended(self, in_time: bool) -> None:
        self.told.append(("ended", in_time))
        super().ended(in_time)

    def slept(self, seconds: float) -> None:
        self.told.append(("slept", seconds))
        super().slept(seconds)


def test_a_wait_tells_its_spin_how_the_spin_went_or_how_long_a_sleep_took():
    counters = Counters(mp.RawArray("b", Counters.nbytes(2)), 2)
    parent_end, child_end = mp.Pipe()
    channels = [Channel(parent_end)]

    bumped_after: list[float] = []  # seconds from the start of each wait to its bump

    def wait_for_bump(spin, delay):
        seen = counters.load(0)

        def bump():
            # timed by the bump itself: a timer may fire a little before its delay is up (48.9 ms of 50 was seen)
            bumped_after.append(time.monotonic() - start)
            counters.add(0, 1)
            counters.wake(0)

        timer = threading.Timer(delay, bump)
        timer.start()
        start = time.monotonic()  # (the bump reads it: it comes `delay` later)
        assert wait(counters, 0, 1, lambda: int(counters.load(0) == seen), channels, spin, 10.0)
        took = time.monotonic() - start
        timer.join()
        return took

    spinning = _Told(5.0)  # a spin far longer than the wait: it ends in time, and nothing is said of sleeping
    wait_for_bump(spinning, 0.02)
    assert spinning.told == [("ended", True)]
    stopped = _Told(1e-3)
    stopped.ended(False)
    stopped.ended(False)
    stopped.told.clear()
    took = wait_for_bump(stopped, 0.05)  # no spin: it sleeps, and says how long the whole wait took
    assert [what for what, _ in stopped.told] == ["slept"]
    assert bumped_after[-1] <= stopped.told[0][1] <= took  # the wait cannot end before the bump
    assert bumped_after[-1] > 0.04  # (and the bump came late enough for a 1 ms spin to have run out)
    assert stopped.next() == 0.0  # 50 ms is no short wait for a 1 ms spin
    missed = _Told(1e-3)  # spins, runs out, then sleeps: the spin's miss is what counts, not the sleep
    wait_for_bump(missed, 0.05)
    assert missed.told[0] == ("ended", False)  # (a sleep cut short by a signal may spin once more: another miss)
    assert all(told == ("ended", False) for told in missed.told)
    parent_end.close()
    child_end.close()


def _timed_worker(conn, memory, count, spin_s, cpu):
    """Answers step commands until b"stop", then leaves the CPU time it used in ``cpu`` (seconds)."""
    link = Link(Channel(conn), Counters(memory, count), 0, 1)
    spin = Spin(spin_s)
    start = time.process_time()
    while True:
        assert link.wait_command(spin, 30.0), "no command within 30 s"
        if link.take_command() == b"stop":
            cpu.value = time.process_time() - start
            return
        link.answer(b"")


def test_a_worker_whose_caller_is_slow_between_steps_stops_spinning():
    """While the calling process runs its model between steps (10 ms here), a waiting worker does not keep a core
    spinning: over 50 such steps with a 2 ms spin it uses a fraction of the 100 ms that spinning every time would."""
    count = counters_needed(1, 1)
    memory = mp.RawArray("b", Counters.nbytes(count))
    counters = Counters(memory, count)
    cpu = mp.RawValue("d", -1.0)
    parent_end, child_end = mp.Pipe()
    worker = mp.get_context("fork").Process(target=_timed_worker, args=(child_end, memory, count, 2e-3, cpu))
    worker.start()
    link = Link(Channel(parent_end), counters, 0, 1)
    try:
        for _ in range(50):
            link.post(0)
            assert wait(counters, EVENTS, PARENT_ASLEEP, lambda: int(not link.available()), [link.channel],
                        Spin(0.0), 10.0)
            link.take_answer()
            time.sleep(0.01)  # the model
        _stop(worker, link)
    finally:
        if worker.is_alive():
            worker.kill()
        link.channel.close()
    assert 0.0 <= cpu.value < 0.04


def test_a_worker_leaves_same_step_final_observations_in_shared_memory():
    """What a worker does with an engine's same-step Finals (shoal.vector._worker): observations that fit the
    records wait in the buffers, and a step whose only info is which envs ended sends nothing but a code."""
    spec = BufferSpec(4, Layout(spaces.Box(-9, 9, (2,), np.float32)), Layout(spaces.Discrete(2)), finals=True)
    buffers = spec.allocate()
    group = np.arange(2, 4)
    a, b = np.array([1, 2], np.float32), np.array([3, 4], np.float32)
    value, code = park_finals([Finals(np.array([3]), [b], [{}])], buffers, group)
    assert value is None and code == FINALS
    (rebuilt,) = finals_of(buffers, group)
    assert rebuilt.ids.tolist() == [3] and rebuilt.obs.tolist() == [[3, 4]] and rebuilt.obs.dtype == np.float32
    b[:] = 0  # the env reuses its array: what was parked stays
    assert finals_of(buffers, group)[0].obs.tolist() == [[3, 4]]
    # with infos the entries still travel, without their observations, which the parent reads back
    value, code = park_finals([Finals(np.array([2, 3]), [a, b], [{"x": 1}, {}]), (3, {"reset": True})], buffers, group)
    assert code == 0 and value[0].obs is None and value[1] == (3, {"reset": True})
    restored = parked_finals(pickle.loads(pickle.dumps(value)), buffers)
    assert restored[0].obs.tolist() == [[1, 2], [0, 0]] and restored[0].infos == [{"x": 1}, {}]
    # a value the records would not give back as it came (float64 in a float32 space) is sent as it is
    odd = [np.array([5, 6], np.float64)]
    value, code = park_finals([Finals(np.array([2]), odd, [])], buffers, group)
    assert code == 0 and value[0].obs is odd


def test_a_workers_answers_each_unpickle_on_their_own_through_one_pickler():
    """The worker's one pickler forgets each answer's objects (a later answer refers to none of them), gives its
    large answer's buffer back, and is whole again after an answer that cannot be pickled."""
    replies = Replies()
    shared = {"episode": {"r": 9.0, "l": 9, "t": 0.5}}
    first = [(3, shared), (4, np.float32(2.5))]
    second = [(5, shared), (6, "x" * 10)]  # the same dict again: its memo entry must not be referred to
    answers = [replies(first, [3, 4]), replies(second, [5, 6])]
    assert [decode(answer) for answer in answers] == [(True, first), (True, second)]
    assert answers[1] == pickle.dumps((True, second), protocol=pickle.HIGHEST_PROTOCOL)
    assert type(decode(answers[0])[1][1][1]) is np.float32
    big = replies([(0, np.zeros(1 << 20))], [0])
    assert len(big) > 1 << 23 and len(replies([(0, 1.0)], [0])) < 100
    assert sys.getsizeof(replies._out) < 1 << 12  # (its room given back: it held 8 MiB after the large one)
    with pytest.raises(EnvOutputError, match="env 8 returned an info that cannot be pickled"):
        replies([(7, {"a": 1.0}), (8, {"lock": threading.Lock()})], [7, 8])
    assert decode(replies(second, [5, 6])) == (True, second)
    assert replies(None) == replies([]) == OK


def test_a_command_crosses_with_its_op_ids_and_payload():
    """A command pickles as its op's number, its ids' bytes and its payload (cloudpickle's too, for a lambda in a
    call's arguments), and comes back equal: the same op member, ids of the same dtype and values (a strided view's
    too), writeable; the payload as pickle gives it."""
    from shoal.vector.commands import Command, Op
    from shoal.vector.transport import pickled

    ids = np.arange(3, 11, dtype=np.intp)
    commands = [
        Command(Op.RESET, ids[:1], ([None], None)),
        Command(Op.RESET, ids[::3], ([1, None, 2**40], {"x": np.float32(1.5)})),
        Command(Op.STEP, ids, np.arange(8) % 2),
        Command(Op.CALL, ids.astype(np.int32), ("scaled", (lambda v: v * 2,), {})),
        Command(Op.GET_ATTR, ids[:0], "t"),
        Command(Op.SET_ATTR, ids, ("tag", list("abcdefgh"))),
    ]
    for command in commands:
        back = pickle.loads(pickled(command, "a command"))
        assert type(back) is Command and back.op is command.op
        assert back.ids.dtype == command.ids.dtype and back.ids.tolist() == command.ids.tolist()
        assert back.ids.flags.writeable
        if command.op is Op.CALL:
            assert back.payload[1][0](21) == 42
        elif command.op is Op.STEP:
            assert back.payload.tolist() == command.payload.tolist()
        else:
            assert repr(back.payload) == repr(command.payload)


def test_action_sequences_cross_with_their_types_shapes_and_values():
    """Sequences pickle as their arrays' types, shapes and bytes and come back equal and writeable: a part split off
    a larger batch (a view with offsets rebased), actions of several axes, float actions, none at all."""
    from shoal.vector.commands import Command, Op, Sequences
    from shoal.vector.transport import pickled

    rng = np.random.default_rng(3)
    whole = Sequences(rng.integers(0, 5, 11), np.array([0, 4, 4, 9, 11]), 0.9)
    cases = [
        whole,
        whole.split([0, 2])[1],  # envs 2 and 3: values[4:11], offsets [0, 5, 7]
        Sequences(rng.integers(0, 3, (6, 2)).astype(np.int32), np.array([0, 1, 6]), 1.0),
        Sequences(rng.standard_normal((3, 2, 2)).astype(np.float32), np.array([0, 3]), 0.0),
        Sequences(np.zeros((0, 3), np.float32), np.array([0, 0, 0]), 0.5),
        Sequences(np.arange(5), np.array([0, 2, 5], np.int32), 0.25),  # (offsets of another integer type)
    ]
    for seqs in cases:
        back = pickle.loads(pickled(Command(Op.SEQUENCES, np.arange(len(seqs.offsets) - 1), seqs), "a command"))
        got = back.payload
        assert type(got) is Sequences and got.gamma == seqs.gamma
        assert got.values.dtype == seqs.values.dtype and got.values.shape == seqs.values.shape
        assert got.values.tolist() == seqs.values.tolist()
        assert got.offsets.dtype == np.int64 and got.offsets.tolist() == seqs.offsets.tolist()
        assert got.values.flags.writeable and got.offsets.flags.writeable
