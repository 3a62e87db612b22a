"""The pipe between the multiprocessing backend's parent and a worker: payloads (see :mod:`shoal.vector.link`), each
written, and usually read, with one system call. The Ray backend's vector env talks to each node's actor over a
socket the same way (its end draining; the actor's a plain ``Connection``, whose framing is the same).

A :class:`Channel` wraps one end of ``multiprocessing.Pipe()`` (so it is created, and handed to a spawned worker,
the way multiprocessing does it) but moves messages with ``os.write``/``os.read`` on its descriptor. Messages are
framed like ``Connection``'s: a 4-byte big-endian length, then the bytes. A :class:`Poller` tells whose other end
is closed (the peer died or exited).

Messages of any size: the parent's end is non-blocking, and while a message it sends does not fit in the pipe it
reads what the worker is sending meanwhile into its inbox (``draining``), so two large messages crossing each
other cannot block both sides; the worker's end blocks, which is safe because the parent always drains. A peer
that stops reading without closing its end (a Ray node whose machine is gone) would hold such a send forever: the
sender's ``stalled`` check runs every ``stall_s`` while it waits, and may end it by raising; the same for a
message that stops coming halfway.
"""

from __future__ import annotations

import os
import select
import struct
from typing import Any, Callable, Iterable

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
        conn: one end of ``multiprocessing.Pipe()`` (or a ``Connection`` over a socket); the channel owns it.
        draining: make the descriptor non-blocking and, while a send waits for room, read incoming messages into
            the inbox (the parent's end; see the module docstring).
    """

    def __init__(self, conn: Any, draining: bool = False) -> None:
        self.conn = conn  # owns the descriptor: closing it closes the channel
        self.fd = conn.fileno()
        self.poller = Poller([self.fd])
        self._inbox = bytearray()  # read from the pipe, not yet returned
        self._draining = draining
        if draining:
            os.set_blocking(self.fd, False)
            self._both = select.poll()
            self._both.register(self.fd, select.POLLIN | select.POLLOUT)

    def send(
        self, message: bytes, stalled: Callable[[], None] | None = None, stall_s: float = 1.0, prefix: bytes = b""
    ) -> None:
        """Send ``prefix + message`` whole (joined in the one copy the framing makes anyway). On a draining end,
        while it waits for room, ``stalled()`` runs every ``stall_s`` seconds with no news from the peer (it raises
        to give up: the message is then partly sent, and the channel is of no further use)."""
        data = b"".join((_HEADER.pack(len(prefix) + len(message)), prefix, message))
        if not self._draining:
            sent = os.write(self.fd, data)
            if sent < len(data):  # a long message into a full pipe
                rest = memoryview(data)[sent:]
                while rest:
                    rest = rest[os.write(self.fd, rest) :]
            return
        rest = memoryview(data)
        while rest:
            try:
                rest = rest[os.write(self.fd, rest) :]
                continue
            except BlockingIOError:
                pass
            ready = self._both.poll(None if stalled is None else stall_s * 1000)
            if not ready and stalled is not None:  # no room, and nothing from the peer: is it still there?
                stalled()
            for _, events in ready:  # no room: wait for room, reading what comes meanwhile
                if events & select.POLLIN:
                    self._inbox += self._read_some()
                elif events & _CLOSED:
                    raise BrokenPipeError("the other end of the pipe is closed")

    def ready(self) -> bool:
        """Whether a message has begun to come (read into the inbox while sending, or waiting to be read): then
        :meth:`recv` does not wait for the other end to start one."""
        return self.buffered or bool(self.poller.readable())

    @property
    def buffered(self) -> bool:
        """Bytes of a message are in the inbox (read while sending): waiting on the descriptor would miss them."""
        return bool(self._inbox)

    def _read_some(self) -> bytes:
        try:
            chunk = os.read(self.fd, 1 << 20)
        except BlockingIOError:
            return b""
        if not chunk:
            raise EOFError("the other end of the pipe is closed")
        return chunk

    def recv(self, stalled: Callable[[], None] | None = None, stall_s: float = 1.0) -> bytes:
        """The next message, blocking until it comes; :class:`EOFError` when the other end is closed.

        Reads whatever the pipe holds in one call (a message and its header together), keeping the rest for the
        next message. ``stalled`` as in :meth:`send`, while a non-blocking end waits for the rest of a message.
        """
        message = self.peek(0, stalled, stall_s)
        self.skip()
        return message

    def peek(self, start: int = 0, stalled: Callable[[], None] | None = None, stall_s: float = 1.0) -> bytes:
        """The next message from its byte ``start`` on, blocking until it has all come, and left in the inbox
        (:meth:`skip` drops it): cut short by an interrupt, or repeated, it reads the same message."""
        if len(self._inbox) < _HEADER.size:
            self._fill(_HEADER.size, stalled, stall_s)
        end = _HEADER.size + _HEADER.unpack_from(self._inbox)[0]
        if len(self._inbox) < end:
            self._fill(end, stalled, stall_s)
        with memoryview(self._inbox) as view:
            return bytes(view[_HEADER.size + start : end])

    def prefix(self, form: struct.Struct) -> tuple:
        """The start of the message :meth:`peek` read, unpacked as ``form``."""
        return form.unpack_from(self._inbox, _HEADER.size)

    def skip(self) -> None:
        """Drop the message :meth:`peek` read (one deletion: an interrupt cannot cut it in half)."""
        del self._inbox[: _HEADER.size + _HEADER.unpack_from(self._inbox)[0]]

    def _fill(self, size: int, stalled: Callable[[], None] | None, stall_s: float) -> None:
        """Read into the inbox, blocking until it holds at least ``size`` bytes. (A bytearray: a large message
        comes in many reads from a socket, and appending to bytes would copy all of it each time.)"""
        while len(self._inbox) < size:
            try:
                chunk = os.read(self.fd, max(size - len(self._inbox), _READ_SIZE))
            except BlockingIOError:  # the non-blocking end, before the message has come: wait for it
                if not select.select([self.fd], [], [], None if stalled is None else stall_s)[0] and stalled:
                    stalled()
                continue
            if not chunk:
                raise EOFError("the other end of the pipe is closed")
            self._inbox += chunk

    def close(self) -> None:
        self.conn.close()
