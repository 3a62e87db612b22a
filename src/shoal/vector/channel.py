"""The pipe between the multiprocessing backend's parent and a worker: payloads (see :mod:`shoal.vector.link`), each
written, and usually read, with one system call. The Ray backend's vector env talks to each node's actor over a
socket the same way (the actor's end a plain ``Connection``, whose framing is the same).

A :class:`Channel` wraps one end of ``multiprocessing.Pipe()`` (so it is created, and handed to a spawned worker,
the way multiprocessing does it) but moves messages with its own writes and reads on its descriptor. Messages are
framed like ``Connection``'s: a 4-byte big-endian length, then the bytes. A :class:`Poller` tells whose other end
is closed (the peer died or exited).

Messages of any size: both ends are non-blocking, and while a message a side sends does not fit in the pipe it
reads what the other side is sending meanwhile into its inbox, so two large messages crossing each other cannot
block both sides. A peer that stops reading without closing its end (a Ray node whose machine is gone; a worker's
parent killed while a forked sibling holds its end open) would hold such a send, or a read of a message that stops
coming halfway, forever: the ``stalled`` check runs every ``stall_s`` while one waits, and may end it by raising.

Interrupts: a message is queued whole (one store), then written by :func:`~shoal.vector._pipe.write_from`, which
counts what it wrote exactly, so a Ctrl-C anywhere leaves a message either not begun or written up to a known byte:
:meth:`Channel.flush` finishes it, or :meth:`Channel.drop` forgets one not begun, never leaving the peer a part.
Reading is the same: :func:`~shoal.vector._pipe.read_into` appends every read to the inbox before control returns
to Python, and :meth:`Channel.peek` leaves a message in the inbox until :meth:`Channel.skip` drops it.
"""

from __future__ import annotations

import os
import select
import struct
from array import array
from typing import Any, Callable, Iterable

from shoal.vector._pipe import read_into, write_from

_HEADER = struct.Struct("!i")
_READ_SIZE = 4096  # what one read asks for: every message of a step, and most others, whole
_CLOSED = select.POLLHUP | select.POLLERR | select.POLLNVAL


class Poller:
    """Looks at a fixed set of descriptors (registered once: ``Connection.poll`` builds a selector per call, ~4 us
    here)."""

    def __init__(self, fds: Iterable[int]) -> None:
        self._poll = select.poll()
        for fd in fds:
            self._poll.register(fd, select.POLLIN)

    def closed(self) -> list[int]:
        """The descriptors whose other end is closed, now (no waiting)."""
        return [fd for fd, events in self._poll.poll(0) if events & _CLOSED]

    def readable(self) -> list[int]:
        """The descriptors with bytes to read, now (no waiting)."""
        return [fd for fd, events in self._poll.poll(0) if events & select.POLLIN]


class Channel:
    """One end of a pipe (or a socket): framed messages.

    Args:
        conn: one end of ``multiprocessing.Pipe()`` (or a ``Connection`` over a socket); the channel owns it and
            makes its descriptor non-blocking.
        stalled, stall_s: the check a wait runs every ``stall_s`` seconds with no news from the peer, when the call
            waiting passes none (see the module docstring; None: wait as long as it takes).
    """

    def __init__(self, conn: Any, stalled: Callable[[], None] | None = None, stall_s: float = 1.0) -> None:
        self.conn = conn  # owns the descriptor: closing it closes the channel
        self.fd = conn.fileno()
        self.poller = Poller([self.fd])
        self._inbox = bytearray()  # read from the pipe, not yet returned
        self._outbox: tuple[bytes, array, Any] | None = None  # (framed message, bytes written, tag): being sent
        self._stalled, self._stall_s = stalled, stall_s
        os.set_blocking(self.fd, False)
        self._both = select.poll()
        self._both.register(self.fd, select.POLLIN | select.POLLOUT)

    def send(
        self, message: bytes, stalled: Callable[[], None] | None = None, stall_s: float | None = None,
        prefix: bytes = b"", tag: Any = None,
    ) -> None:
        """Send ``prefix + message`` whole: :meth:`queue` it, then :meth:`flush`."""
        self.queue(message, prefix, tag)
        self.flush(stalled, stall_s)

    def queue(self, message: bytes, prefix: bytes = b"", tag: Any = None) -> None:
        """Make ``prefix + message`` (joined in the one copy the framing makes anyway) the message to send, with
        ``tag`` to say what it is (:attr:`queued`); none of it is written until :meth:`flush`. One message at a
        time: a message an interrupt left unsent must be flushed or dropped first."""
        if self._outbox is not None:
            raise RuntimeError(f"a message (tag {self._outbox[2]!r}) is still being sent: flush or drop it first")
        data = b"".join((_HEADER.pack(len(prefix) + len(message)), prefix, message))
        self._outbox = (data, array("q", [0]), tag)  # one store: an interrupt leaves it queued whole, or not

    @property
    def queued(self) -> tuple[Any, int] | None:
        """The queued message's tag and how many of its bytes are written; None when nothing is queued."""
        out = self._outbox
        return None if out is None else (out[2], out[1][0])

    def drop(self) -> None:
        """Forget the queued message; only one none of whose bytes are written (the peer would get a part)."""
        out = self._outbox
        if out is not None and out[1][0]:
            raise RuntimeError(f"cannot drop a message (tag {out[2]!r}) already partly sent")
        self._outbox = None

    def abandon(self) -> None:
        """Forget the queued message, written or not: the peer is gone (nothing it reads is a part)."""
        self._outbox = None

    def flush(self, stalled: Callable[[], None] | None = None, stall_s: float | None = None) -> None:
        """Write the rest of the queued message (if any). While it waits for room it reads what the peer sends
        into the inbox, and runs ``stalled()`` (default: the channel's) every ``stall_s`` seconds with no news
        from the peer; if that raises, or an interrupt comes, the message stays queued, written up to a known
        byte, for a later flush."""
        out = self._outbox
        if out is None:
            return
        stalled, stall_s = self._check(stalled, stall_s)
        data, progress = out[0], out[1]
        while progress[0] < len(data):
            if write_from(self.fd, data, progress):
                continue
            ready = self._both.poll(None if stalled is None else stall_s * 1000)
            if not ready and stalled is not None:  # no room, and nothing from the peer: is it still there?
                stalled()
            for _, events in ready:  # no room: wait for room, reading what comes meanwhile
                if events & select.POLLIN:  # up to 1 MiB of what is there
                    read_into(self.fd, self._inbox, len(self._inbox) + 1, 1 << 20)
                elif events & _CLOSED:
                    raise BrokenPipeError("the other end of the pipe is closed")
        self._outbox = None

    def _check(self, stalled: Callable[[], None] | None, stall_s: float | None) -> tuple[Any, float]:
        """The stall check a wait runs, and every how many seconds: the caller's, else the channel's."""
        if stalled is None:
            return self._stalled, self._stall_s
        return stalled, self._stall_s if stall_s is None else stall_s

    def ready(self) -> bool:
        """Whether a message has begun to come (read into the inbox while sending, or waiting to be read): then
        :meth:`recv` does not wait for the other end to start one."""
        return self.buffered or bool(self.poller.readable())

    @property
    def buffered(self) -> bool:
        """Bytes of a message are in the inbox (read while sending): waiting on the descriptor would miss them."""
        return bool(self._inbox)

    def recv(self, stalled: Callable[[], None] | None = None, stall_s: float | None = None) -> bytes:
        """The next message, blocking until it comes; :class:`EOFError` when the other end is closed.

        Reads whatever the pipe holds in one call (a message and its header together), keeping the rest for the
        next message. ``stalled`` as in :meth:`flush`, while it waits for a message or its rest.
        """
        message = self.peek(0, stalled, stall_s)
        self.skip()
        return message

    def peek(self, start: int = 0, stalled: Callable[[], None] | None = None, stall_s: float | None = None) -> bytes:
        """The next message from its byte ``start`` on, blocking until it has all come, and left in the inbox
        (:meth:`skip` drops it): cut short by an interrupt, or repeated, it reads the same message."""
        if len(self._inbox) < _HEADER.size:
            self._fill(_HEADER.size, stalled, stall_s)
        end = _HEADER.size + _HEADER.unpack_from(self._inbox)[0]
        if len(self._inbox) < end:
            self._fill(end, stalled, stall_s)
        # (a view for one copy, not a bytearray slice's two; a temporary, not a `with`'s, so that no interrupt leaves
        # the inbox exported, which would refuse skip()'s resize: on Python 3.14 one right after a with statement's
        # __enter__ skips its __exit__, see shoal/vector/_guard.c)
        return bytes(memoryview(self._inbox)[_HEADER.size + start : end])

    def whole(self) -> bool:
        """Whether the inbox holds a whole message (one :meth:`peek` read and an interrupt left there, say)."""
        inbox = self._inbox
        return len(inbox) >= _HEADER.size and len(inbox) >= _HEADER.size + _HEADER.unpack_from(inbox)[0]

    def prefix(self, form: struct.Struct) -> tuple:
        """The start of the message :meth:`peek` read, unpacked as ``form``."""
        return form.unpack_from(self._inbox, _HEADER.size)

    def skip(self) -> None:
        """Drop the message :meth:`peek` read (one deletion: an interrupt cannot cut it in half)."""
        del self._inbox[: _HEADER.size + _HEADER.unpack_from(self._inbox)[0]]

    def _fill(self, size: int, stalled: Callable[[], None] | None, stall_s: float | None) -> None:
        """Read into the inbox, blocking until it holds at least ``size`` bytes (:func:`~shoal.vector._pipe.read_into`
        reads straight into its tail: a large message comes in several reads from a socket)."""
        stalled, stall_s = self._check(stalled, stall_s)
        while len(self._inbox) < size:
            if read_into(self.fd, self._inbox, size, _READ_SIZE):
                continue
            # nothing there yet: wait for it
            if not select.select([self.fd], [], [], None if stalled is None else stall_s)[0] and stalled:
                stalled()

    def close(self) -> None:
        self.conn.close()
