"""The pipe between a worker and the caller (shoal.vector.channel, reading and writing through shoal.vector._pipe):
messages framed, a closed peer reported, and a read an interrupt cut short losing nothing."""

from __future__ import annotations

import multiprocessing as mp
import os
import threading

import pytest

from shoal.vector.channel import Channel


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
