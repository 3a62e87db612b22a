"""What one large reply costs the end that reads it: shoal's Channel against multiprocessing's own Connection.

    python benchmarks/channel_read.py [--kib 441] [--replies 2000] [--rounds 3]

A forked process plays a Ray node: it answers each one-byte request, over a local TCP connection with
``TCP_NODELAY`` (as ``shoal.vector.ray_node`` sets it), with a reply of ``--kib`` KiB (the default: a batch of
Breakout x 16's observations, 84x84 gray, stack 4). The reader sends the request and reads the reply whole, with
shoal's :class:`~shoal.vector.channel.Channel` (the Ray vector env's end; the reply is then copied out of it, as
``read_reply`` does) or with ``multiprocessing.connection.Connection.recv_bytes``, in turns, ``--rounds`` times.
Printed: microseconds per round trip, the reader's CPU per reply and its minor page faults per reply (medians over
the rounds). In this small process the memory of each reply, once dropped, goes back to the system and the next one
is faulted in again (~190 faults for 441 KiB); a long-running process with a populated heap, such as a Ray vector
env's, takes ~1 a batch, so there the faults, and most of the CPU they cost here, do not occur.
"""

from __future__ import annotations

import argparse
import os
import resource
import socket
import time
from multiprocessing.connection import Connection

import numpy as np

from shoal.vector.channel import Channel


def serve(server: socket.socket, size: int, replies: int) -> None:
    sock, _ = server.accept()
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    conn = Connection(sock.detach())
    reply = os.urandom(size)
    for _ in range(replies):
        conn.recv_bytes()
        conn.send_bytes(reply)
    conn.close()


def measure(reader: str, size: int, replies: int) -> tuple[float, float, float]:
    """(µs per round trip, µs of the reader's CPU per reply, its minor page faults per reply) of ``replies`` replies
    of ``size`` bytes."""
    server = socket.create_server(("127.0.0.1", 0))
    pid = os.fork()
    if pid == 0:
        serve(server, size, replies)
        os._exit(0)
    sock = socket.create_connection(server.getsockname()[:2])
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    conn = Connection(sock.detach())
    channel = Channel(conn) if reader == "channel" else None
    out = np.empty(size, np.uint8)
    wall, cpu, faults = time.perf_counter(), time.thread_time(), resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
    for _ in range(replies):
        if channel is not None:
            channel.send(b"x")
            out[:] = np.frombuffer(channel.peek(), np.uint8)
            channel.skip()
        else:
            conn.send_bytes(b"x")
            out[:] = np.frombuffer(conn.recv_bytes(), np.uint8)
    wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
    faults = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt - faults
    os.waitpid(pid, 0)
    (channel or conn).close()
    server.close()
    return wall / replies * 1e6, cpu / replies * 1e6, faults / replies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kib", type=int, default=441)
    parser.add_argument("--replies", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    results: dict[str, list[tuple[float, float, float]]] = {"channel": [], "connection": []}
    for _ in range(args.rounds):
        for reader, got in results.items():
            got.append(measure(reader, args.kib * 1024, args.replies))
    for reader, got in results.items():
        wall, cpu, faults = np.median(np.array(got), axis=0)
        print(f"{reader:10s} {wall:7.0f} us a round trip   reader's CPU {cpu:6.0f} us, {faults:4.0f} page faults "
              f"a reply   ({args.kib} KiB replies)")


if __name__ == "__main__":
    main()
