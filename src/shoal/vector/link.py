"""How the multiprocessing backend's parent and a worker signal each other: counters in shared memory, and a pipe
for payloads.

Per host (worker process), in one :class:`~shoal.vector._counters.Counters` block shared by all processes:
``posted`` (commands the parent posted), ``done`` (commands the worker answered), ``asleep`` (the worker sleeps
while this is non-zero: until ``posted`` reaches it), one command slot per group it hosts (which of its groups to
step, or a command of another kind for one of them whose payload is in shared memory: see
:func:`shoal.vector._worker.shared_kind`; :data:`ON_PIPE`: the command is a pickled message on the pipe;
:data:`IN_MAILBOX` or below: a message of ``IN_MAILBOX - code`` bytes in the slot's mailbox) and one answer slot
per group (:data:`ON_PIPE` and :data:`IN_MAILBOX` alike; 0: nothing to report, the results are in shared memory; a
positive code: what the worker's loop says it means).
Shared by all hosts: ``events`` (every answer bumps it) and ``parent_asleep`` (the parent sleeps until ``events``
reaches it). A host never has more commands in flight than groups, so the slots form a ring that is never overrun.

A step is then: the parent writes the group into its slot and bumps ``posted``; the worker, waiting on ``posted``,
steps the group, writes the answer slot and bumps ``done`` and ``events``; the parent, waiting on ``events``, reads
them. No pickle, and no system call while both sides are awake: about 1 us where a pipe round trip costs ~12 us on
a small VM.

A command or answer with a message of at most :data:`MAILBOX_BYTES` (a reset's seeds, a call; infos that do not fit
the info table, a call's result, an error) is written into its slot's mailbox, a region of shared memory beside the
counters, and needs no system call either. On the pipe, the write and read of one such message took ~3.9 us (a
process sending to itself, 2 cores), more than pickling it and reading it back: CartPole x 8 in
``RecordEpisodeStatistics``, whose infos at episode ends are sparse and nested, paid ~5 us a batch for its infos by
default against ~1.4 in Gymnasium's ``SyncVectorEnv``, and a partial reset (``reset_mask``) of one env in a worker
took ~35 us against ~17 for one in the calling process.

A waiter spins on its counter for up to its :class:`Spin` budget, then writes into its ``asleep`` counter the value
the watched counter must reach for it to go on (the parent waiting for two answers is woken once, by the second) and
sleeps on the watched counter (:meth:`~shoal.vector._counters.Counters.sleep`); the other side, after bumping the
counter to that value, wakes it (:meth:`~shoal.vector._counters.Counters.wake`). Every counter operation is
sequentially consistent, so of "bump, then read the sleeper's mark" and "write the mark, then read the counter" one
always sees the other's write, and the sleep itself returns at once if the counter moved after it was read: no
wake-up is lost. A sleeper looks every :data:`PEER_CHECK_S` for a pipe closed by a dead peer: its wait ends with
:class:`PeerClosed`.

Spinning pays only while the other side runs on another CPU. When the scheduler puts the parent and a worker on one
CPU, each spin burns its whole budget while the side it waits for cannot run (CartPole x 8 with one worker, 3 runs:
69-75 us a batch on two CPUs; pinned to one, 649-687 us with a fixed 300 us spin), so spinning stops when it does
not pay and is tried again when waits turn short (:class:`Spin`: 83-118 us pinned to one).
"""

from __future__ import annotations

import struct
import time
from typing import Any, Callable, Sequence

from shoal.vector._counters import Counters
from shoal.vector.channel import Channel, Poller

EVENTS, PARENT_ASLEEP = 0, 1
ON_PIPE = -1
IN_MAILBOX = -2
"""A slot's code at or below this: the message is in the slot's mailbox, ``IN_MAILBOX - code`` bytes."""
MAILBOX_BYTES = 2048
"""The largest message a command or answer carries in shared memory (a mailbox per slot); a larger one goes on the
pipe."""
_TAG = struct.Struct("!q")  # the number of the answer a message on the pipe belongs to, before the message
PEER_CHECK_S = 0.1
"""How often a sleeping waiter looks for a dead peer (one whose pipe is closed)."""
_SHARED = 2  # counters before the first host's


def counters_needed(hosts: int, ring: int) -> int:
    """How many counters ``hosts`` links of ``ring`` slots each use."""
    return _SHARED + hosts * (3 + 2 * ring)


def mailbox_bytes(hosts: int, ring: int) -> int:
    """The shared memory of the mailboxes of ``hosts`` links of ``ring`` slots each way."""
    return hosts * 2 * ring * MAILBOX_BYTES


def link_memory(memory: Any, at: int, count: int, mail_at: int | None) -> tuple[Counters, memoryview | None]:
    """The links' counters (``count`` of them, from byte ``at`` of the shared block ``memory``) and their
    mailboxes (from byte ``mail_at``; None: no mailboxes)."""
    raw = memoryview(memory).cast("B")
    counters = Counters(raw[at : at + Counters.nbytes(count)], count)
    return counters, None if mail_at is None else raw[mail_at:]


class Spin:
    """A waiter's spin budget: spin ``most`` seconds, unless spinning has stopped paying.

    Spinning stops after :attr:`MISSES` spins in a row that ran out (the other side shares this CPU and cannot run
    while this one spins, or its work is long: the caller's model, a slow env; either way sleeping costs no more).
    It is tried again (one trial spin) once a wait that slept ended within ``most`` (:meth:`slept`: a spin might
    have caught it), and at the latest after :attr:`TRIAL_MOST` waits without a spin (a slept wait's length includes
    the wake-up, so on a host slow to wake a sleeper, waits a spin would catch may never look short). Each trial that
    runs out doubles the short waits the next one needs, up to :attr:`TRIAL_MOST` (pinned to one CPU with its
    worker, a fixed 300 us spin took CartPole x 8 from ~70 to ~670 us a batch: each side spun while the other could
    not run). A spin that ends in time keeps it spinning. ``Spin(0)`` never spins.

    Why not halve the budget after each spin that runs out (the version before, from 100 us): the two sides of a
    synchronous batch take turns being the slower one (Breakout x 2 on 2 processes: a fifth of the worker's waits
    were over 100 us), so the budget kept running down to nothing, and the worker was asleep at 19-52% of the posts
    (0.1-1.9% with this one at 300 us): 0.73-0.87x the best asynchronous configuration against 0.87-0.90x (five
    runs of 40 interleaved rounds, benchmarks/bench_spin.py).
    """

    MISSES = 2
    TRIAL_MOST = 128
    __slots__ = ("most", "_misses", "_short", "_needed", "_unspun")

    def __init__(self, most: float) -> None:
        self.most = most
        self._misses = 0  # spins in a row that ran out
        self._short = 0  # short waits slept since spinning stopped, or since the last trial
        self._needed = 1  # short waits that earn the next trial
        self._unspun = 0  # waits without a spin since spinning stopped, or since the last trial

    def next(self) -> float:
        """How long the next wait spins."""
        if self._misses < self.MISSES or self._short >= self._needed or self._unspun >= self.TRIAL_MOST:
            return self.most
        self._unspun += 1
        return 0.0

    def ended(self, in_time: bool) -> None:
        """A spin ended: the other side moved the counter ``in_time``, or the spin ran out."""
        if in_time:
            self._misses, self._short, self._needed, self._unspun = 0, 0, 1, 0
        elif self._misses < self.MISSES:
            self._misses += 1
        else:  # a trial ran out
            self._short, self._unspun, self._needed = 0, 0, min(2 * self._needed, self.TRIAL_MOST)

    def slept(self, seconds: float) -> None:
        """A wait that did not spin took ``seconds`` in all."""
        if seconds < self.most:
            self._short += 1


class PeerClosed(EOFError):
    """The other end of channel ``index`` (of those waited on) closed its pipe: the process died or exited."""

    def __init__(self, index: int) -> None:
        super().__init__(f"the other end of pipe {index} is closed")
        self.index = index


class Link:
    """The parent's or a worker's end of one host's link: its pipe and its counters.

    Args:
        channel: this side's end of the host's pipe.
        counters: the shared counter block (:func:`counters_needed` of them).
        host: the host's index.
        ring: slots per direction (the number of groups the host runs).
        mailboxes: the shared mailbox memory (:func:`mailbox_bytes` of it), or None: every message on the pipe.
    """

    def __init__(self, channel: Channel, counters: Counters, host: int, ring: int, mailboxes: Any = None) -> None:
        self.channel, self.counters, self.ring = channel, counters, ring
        span = ring * MAILBOX_BYTES  # the host's command mailboxes, then its answer mailboxes
        self._command_mail: memoryview | None = None
        self._answer_mail: memoryview | None = None
        if mailboxes is not None:
            mail = memoryview(mailboxes).cast("B")[2 * host * span : 2 * (host + 1) * span]
            self._command_mail, self._answer_mail = mail[:span], mail[span:]
        base = _SHARED + host * (3 + 2 * ring)
        self._posted, self._done, self._asleep = base, base + 1, base + 2
        self._commands, self._answers = base + 3, base + 3 + ring
        self.sent = 0  # parent: commands posted; worker: answers given
        self.taken = 0  # parent: answers taken; worker: commands taken

    # -- the parent's side -----------------------------------------------------------------------------------------

    def post(
        self, group: int, message: bytes = b"", stalled: Callable[[], None] | None = None, stall_s: float = 1.0
    ) -> None:
        """Post a command: step the host's group ``group`` (its index among the host's groups), or, with
        ``group == ON_PIPE``, the pickled command ``message`` (``stalled`` as in :meth:`Channel.flush`).

        A message of at most :data:`MAILBOX_BYTES` is written into the slot's mailbox before the post. A larger one
        is queued, tagged with its command's number, before the post and written after it (a message larger than the
        pipe is written while the worker reads it): wherever an interrupt lands, the next post or :meth:`resync`
        finishes a message whose command was posted and drops one whose command was not, so the worker never waits
        for a message that does not come, nor reads one meant for another command."""
        if group == ON_PIPE:
            self._settle_message(stalled, stall_s)
            code = _mail(self._command_mail, self.sent % self.ring, message)
            if code is not None:
                self.post_steps((code,))
                return
            self.channel.queue(message, tag=self.sent)
        self.post_steps((group,))
        if group == ON_PIPE:
            self.channel.flush(stalled, stall_s)

    def post_steps(self, groups: Sequence[int]) -> None:
        """Post one command per group of ``groups`` (indices among the host's groups): step it. The worker sees
        them all at once (one store of ``posted``) and is woken at most once."""
        counters, commands, ring, sent = self.counters, self._commands, self.ring, self.sent
        for group in groups:
            counters.store(commands + sent % ring, group)
            sent += 1
        self.sent = sent
        counters.store(self._posted, sent)
        mark = counters.load(self._asleep)
        if mark and sent >= mark:
            counters.wake(self._posted)

    def resync(self) -> None:
        """After an interrupt (Ctrl-C) cut a post short: what the worker was told, the shared count, is what was
        posted (commands written past it were not); the worker is woken, in case the cut came between a post and
        its wake-up (a wake-up of a worker that is not asleep does nothing); and a message the cut left unsent is
        finished, or dropped if its command was not posted."""
        self.sent = int(self.counters.load(self._posted))
        self.counters.wake(self._posted)
        self._settle_message()

    def _settle_message(self, stalled: Callable[[], None] | None = None, stall_s: float = 1.0) -> None:
        queued = self.channel.queued
        if queued is None:
            return
        if queued[0] < self.counters.load(self._posted):  # its command was posted: the worker is reading it
            self.channel.flush(stalled, stall_s)
        else:
            self.channel.drop()

    def available(self) -> int:
        """How many answers are waiting to be taken."""
        return self.counters.load(self._done) - self.taken

    def take_answer(self) -> bytes | int:
        """The next answer (call it when :meth:`available`): a message, or the code of an answer without one (0:
        nothing to report).

        A message comes tagged with its answer's number, and leaves the pipe only after the count has moved past
        it: an interrupt (Ctrl-C) anywhere in here leaves either the same answer to take again or a message
        already counted, which the next call skips, never the pipe one message out of step."""
        index = self.taken
        code = self.counters.load(self._answers + index % self.ring)
        if code <= IN_MAILBOX:
            message = _mailed(self._answer_mail, index % self.ring, code)
            self.taken = index + 1
            return message
        if code != ON_PIPE:
            self.taken = index + 1
            return code
        channel = self.channel
        while True:
            message = channel.peek(_TAG.size)
            if channel.prefix(_TAG)[0] >= index:
                break
            channel.skip()  # counted before an interrupt cut this call short: it was taken
        self.taken = index + 1
        channel.skip()
        return message

    # -- the worker's side -----------------------------------------------------------------------------------------

    def wait_command(self, spin: Spin, timeout: float | None) -> bool:
        """Wait until a command is posted (spin as ``spin`` says, then sleep up to ``timeout``); whether one was."""
        counters, posted = self.counters, self._posted
        return wait(counters, posted, self._asleep, lambda: int(counters.load(posted) == self.taken), [self.channel],
                    spin, timeout)

    def take_command(self) -> int | bytes:
        """The next command (call :meth:`wait_command` first): the group to step (or a command of another kind for it:
        :func:`shoal.vector._worker.shared_kind`), or a pickled message."""
        slot = self.taken % self.ring
        group = self.counters.load(self._commands + slot)
        self.taken += 1
        if group <= IN_MAILBOX:
            return _mailed(self._command_mail, slot, group)
        return self.channel.recv() if group == ON_PIPE else group

    def answer(self, message: bytes, code: int = 0) -> None:
        """Answer the oldest unanswered command: ``message``, or with ``message`` empty the answer ``code`` (0:
        nothing to report; positive: a meaning the worker's loop and its parent agree on). A message of at most
        :data:`MAILBOX_BYTES` goes into the slot's mailbox, written before the slot's code is posted (each counter
        store is a full barrier), a larger one on the pipe."""
        counters, slot = self.counters, self.sent % self.ring
        if message:
            mailed = _mail(self._answer_mail, slot, message)
            code, message = (ON_PIPE, message) if mailed is None else (mailed, b"")
        counters.store(self._answers + slot, code)
        self.sent += 1
        counters.store(self._done, self.sent)
        events = counters.add(EVENTS, 1)
        mark = counters.load(PARENT_ASLEEP)
        if mark and events >= mark:
            counters.wake(EVENTS)
        if message:  # after the answer is posted: the parent reads the pipe while a large message is written
            self.channel.send(message, prefix=_TAG.pack(self.sent - 1))


def _mail(mailboxes: memoryview | None, slot: int, message: bytes) -> int | None:
    """Write ``message`` into mailbox ``slot`` of ``mailboxes`` if it fits one: the slot's code saying so, else
    None (it goes on the pipe)."""
    if mailboxes is None or len(message) > MAILBOX_BYTES:
        return None
    at = slot * MAILBOX_BYTES
    mailboxes[at : at + len(message)] = message
    return IN_MAILBOX - len(message)


def _mailed(mailboxes: memoryview | None, slot: int, code: int) -> bytes:
    """The message mailbox ``slot`` of ``mailboxes`` holds, the slot's code being ``code`` (:data:`IN_MAILBOX` or
    below)."""
    assert mailboxes is not None  # (only a link with mailboxes writes such a code)
    at = slot * MAILBOX_BYTES
    return mailboxes[at : at + IN_MAILBOX - code].tobytes()


def wait(
    counters: Counters,
    watched: int,
    asleep: int,
    missing: Callable[[], int],
    channels: Sequence[Channel],
    spin: Spin,
    timeout: float | None,
    poller: Poller | None = None,
) -> bool:
    """Wait until ``missing()`` is 0: how many more bumps of counter ``watched`` the caller waits for. Spin on it for
    up to ``spin.next()`` (telling ``spin`` how that went, or how long a wait that did not spin took), then sleep on
    it with counter ``asleep`` saying at which value to be woken, up to ``timeout`` seconds in all (None: forever).
    Whether nothing is missing.

    Raises :class:`PeerClosed` when the other end of one of the ``channels`` (``poller``: one built over them
    already) is found closed, which a sleeper looks for every :data:`PEER_CHECK_S`.
    """
    start = now = time.monotonic()
    deadline = None if timeout is None else now + timeout
    check_at = now + PEER_CHECK_S
    spun = slept = False
    while True:
        seen = counters.load(watched)  # before missing(): bumps it has not counted can only wake us early
        short = missing()
        if not short:
            if slept and not spun:
                spin.slept(time.monotonic() - start)
            return True
        spin_s = spin.next()
        if spin_s > 0:
            spun = True
            in_time = counters.wait(watched, seen, spin_s) != seen
            spin.ended(in_time)
            if in_time:
                continue
        slept = True
        counters.store(asleep, seen + short)
        try:
            if not missing():
                continue
            now = time.monotonic()
            if now >= check_at:
                _check_peers(channels, poller)
                check_at = now + PEER_CHECK_S
            if deadline is not None and now >= deadline:
                return False
            counters.sleep(watched, seen, (check_at if deadline is None else min(check_at, deadline)) - now)
        finally:
            counters.store(asleep, 0)


def _check_peers(channels: Sequence[Channel], poller: Poller | None) -> None:
    """Raise :class:`PeerClosed` for the first of ``channels`` whose other end is closed."""
    closed = closed_channels(channels, poller)
    if closed:
        raise PeerClosed(closed[0])


def closed_channels(channels: Sequence[Channel], poller: Poller | None = None) -> list[int]:
    """The indices of ``channels`` whose other end is closed (``poller``: one built over them already)."""
    if poller is None:
        poller = channels[0].poller if len(channels) == 1 else Poller(c.fd for c in channels)
    closed = set(poller.closed())
    return [index for index, channel in enumerate(channels) if channel.fd in closed]
