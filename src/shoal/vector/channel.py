"""The pipe between the multiprocessing backend's parent and a worker: payloads and wake-ups (see
:mod:`shoal.vector.link`), each written, and usually read, with one system call.

A :class:`Channel` wraps one end of ``multiprocessing.Pipe()`` (so it is created, and handed to a spawned worker,
the way multiprocessing does it) but moves messages with ``os.write``/``os.read`` on its descriptor and waits with a
``poll`` object registered once (``Connection.poll`` builds a selector per call, ~4 us here). Messages are framed
like ``Connection``'s: a 4-byte big-endian length, then the bytes.
"""

from __future__ import annotations

import os
import select
import struct
from typing import Any, Iterable

_HEADER = struct.Struct("!i")
_READ_SIZE = 4096  # what one read asks for: every message of a step, and most others, whole
WAKE = b"\x04"
"""A message that only wakes the reader (see :mod:`shoal.vector.link`); :meth:`Channel.recv` skips it."""
_WAKE_FRAME = _HEADER.pack(len(WAKE)) + WAKE


class Poller:
    """Waits until some of a fixed set of descriptors are readable (or closed): ``poll`` where the platform has it
    (no limit on descriptor numbers), else ``select``."""

    def __init__(self, fds: Iterable[int]) -> None:
        self.fds = list(fds)
        self._poll = select.poll() if hasattr(select, "poll") else None
        if self._poll is not None:
            for fd in self.fds:
                self._poll.register(fd, select.POLLIN)

    def ready(self, timeout: float | None) -> list[int]:
        """The readable descriptors, after waiting up to ``timeout`` seconds (None: until one is)."""
        if self._poll is None:
            return select.select(self.fds, [], [], timeout)[0]
        return [fd for fd, _ in self._poll.poll(None if timeout is None else timeout * 1000)]


class Channel:
    """One end of a pipe: framed messages, skipping :data:`WAKE` messages, which only wake a reader."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn  # owns the descriptor: closing it closes the channel
        self.fd = conn.fileno()
        self.poller = Poller([self.fd])
        self._inbox = b""  # read from the pipe, not yet returned

    def send(self, message: bytes) -> None:
        data = _HEADER.pack(len(message)) + message
        sent = os.write(self.fd, data)
        if sent < len(data):  # a long message into a full pipe
            rest = memoryview(data)[sent:]
            while rest:
                rest = rest[os.write(self.fd, rest) :]

    def recv(self) -> bytes:
        """The next message other than :data:`WAKE`, blocking until it comes; :class:`EOFError` when the other end
        is closed.

        Reads whatever the pipe holds in one call (a message and its header together), keeping the rest for the
        next message.
        """
        while True:
            data = self._inbox
            if len(data) < _HEADER.size:
                data = self._fill(data, _HEADER.size)
            end = _HEADER.size + _HEADER.unpack_from(data)[0]
            if len(data) < end:
                data = self._fill(data, end)
            self._inbox = data[end:]
            if data[_HEADER.size : end] != WAKE:
                return data[_HEADER.size : end]

    def discard_wakes(self) -> None:
        """Read what the pipe holds (one read: call it when the pipe is readable) and drop the :data:`WAKE`
        messages in front; a message that is not one stays for :meth:`recv`. :class:`EOFError` at end of file."""
        self._inbox = self._fill(self._inbox, len(self._inbox) + 1)
        while self._inbox.startswith(_WAKE_FRAME):
            self._inbox = self._inbox[len(_WAKE_FRAME) :]

    def _fill(self, data: bytes, size: int) -> bytes:
        """``data`` and what the pipe holds, blocking until that is at least ``size`` bytes."""
        while len(data) < size:
            chunk = os.read(self.fd, max(size - len(data), _READ_SIZE))
            if not chunk:
                raise EOFError("the other end of the pipe is closed")
            data += chunk
        return data

    def close(self) -> None:
        self.conn.close()
