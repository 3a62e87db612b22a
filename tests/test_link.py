"""The multiprocessing backend's link between the caller and a worker, between two real processes: answers in order,
payloads in a mailbox or on the pipe, no lost wake-up whether the sides spin or sleep, a spin that stops when it does
not pay, and a dead peer ends a wait. Its parts: test_counters.py, test_channel.py, test_messages.py."""

from __future__ import annotations

import multiprocessing as mp
import os
import random
import threading
import time

import pytest

from shoal.vector._counters import Counters
from shoal.vector import link as link_module
from shoal.vector.channel import Channel
from shoal.vector.link import (
    EVENTS, MAILBOX_BYTES, ON_PIPE, PARENT_ASLEEP, Link, PeerClosed, Spin, counters_needed, mailbox_bytes, wait,
)

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
