"""Frame stacks on the wire: a Ray node whose rows travel (a node on another machine) sends, for each env whose
observation is the one it sent last shifted by a frame plus a new frame (a frame stack, as Atari's), only the new
frame; the vector env rebuilds the row from the one it read last. Atari's 4-frame stacks then cost a quarter of the
bytes: Breakout x 16 sends ~110 KiB a batch instead of ~441 KiB, which a 1 Gb/s link takes ~3.6 ms to carry.

The node decides by comparing each row with the one it sent that env last, so what arrives is right whatever the env
did: a reset, a sequence of several steps, an observation that is not a stack at all go whole. Only observations that
could be stacks take part (:func:`stacked`): one array per env, at least 2-D (frames along its first axis), of at
least :data:`MIN_ROW` bytes; a node that finds no shifted row in :data:`GIVE_UP` replies in a row sends raw rows
from then on.

The reader keeps each env's frames in a ring. A shifted row's new frame takes the place of its oldest, and then one
store marks the ring as rebuilt from that reply: reading the reply again (after an interrupt) writes the same frame
in the same place, and a reply already read is not applied twice. Measured on this 2-core host (Breakout x 16, a
node read over its connection, the loopback shaped with ``tc`` to 125 Mb/s, a 1 Gb/s link scaled to what 2 cores
step): 2,190 steps/s against 551 raw; at 1.25 Gb/s and unshaped, where the link does not bind, the same as raw
(0.76-0.83x multiprocessing against 0.77-0.83x).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from shoal.vector.buffers import BufferSpec

MIN_ROW = 1024
"""The smallest observation row (bytes) sent as frames: below it, the comparison would cost more than it saves."""


def stacked(spec: BufferSpec) -> bool:
    """Whether the observations of ``spec`` go on the wire as frames (see the module docstring)."""
    obs = spec.obs
    if obs.structured or obs.loose or len(obs.item_shape) < 2:
        return False
    return int(np.prod(obs.item_shape)) * obs.item_dtype.itemsize >= MIN_ROW


FRAMES, RAW = b"F", b"R"
"""The first byte of a reply's observations: as frames, or raw rows (a node whose rows are no stacks)."""
GIVE_UP = 8
"""Replies in a row without one shifted row after which a node sends its rows raw for good (observations that are
not stacks: images, say; the comparison and the reader's extra copy would buy nothing)."""


class Sender:
    """A node's side: the rows it sent each env last (zeros before the first: the reader starts from the same, so
    a first stack of zero frames under a new one, ale-py's padding, is a shifted one too)."""

    def __init__(self, spec: BufferSpec, envs: range) -> None:
        """``envs``: the env ids whose rows it sends (a node's)."""
        self.first = envs.start
        self.sent = np.zeros((len(envs), *spec.obs.item_shape), spec.obs.item_dtype)  # as the reader's start
        self.misses = 0  # replies in a row without a shifted row
        size = spec.obs.item_dtype.itemsize  # rows are compared bit for bit (floats: -0.0 is not 0.0, NaN is NaN)
        self._bits = np.dtype(f"u{size}") if size in (1, 2, 4, 8) else np.dtype(np.uint8)

    def encode(self, obs: np.ndarray, ranges: list[range]) -> list[Any]:
        """The wire form of rows ``ranges`` of ``obs`` (one row per env): :data:`FRAMES`, a byte per env (1: shifted,
        only its new frame follows; 0: whole), the new frames, then the whole rows, each in env order; or
        :data:`RAW` and the rows."""
        if self.misses >= GIVE_UP:
            return [RAW, *(obs[ids.start : ids.stop] for ids in ranges)]
        kinds, frames, wholes = [], [], []
        for ids in ranges:
            rows, sent = obs[ids.start : ids.stop], self.sent[ids.start - self.first : ids.stop - self.first]
            count = ids.stop - ids.start
            bits, before = rows.view(self._bits), sent.view(self._bits)
            shifted = (bits[:, :-1] == before[:, 1:]).reshape(count, -1).all(axis=1)
            kinds.append(shifted.view(np.uint8))
            frames.append(rows[shifted, -1])
            wholes.append(rows[~shifted])
            sent[:] = rows
        self.misses = 0 if any(len(f) for f in frames) else self.misses + 1
        return [FRAMES, *kinds, *frames, *wholes]


class Receiver:
    """The vector env's side: each env's last row as a ring of its frames, and where its newest frame is.

    A shifted row costs the write of its new frame into the ring; every row read out is one gather of its frames in
    order, straight into the rows asked for."""

    def __init__(self, spec: BufferSpec) -> None:
        shape: tuple[int, ...] = tuple(spec.obs.item_shape)  # (frames, *a frame's shape): see stacked()
        self.depth = shape[0]
        # env i's frames: ring rows i * depth .. i * depth + depth - 1 (zeros at first, as the node's start)
        self.ring = np.zeros((spec.num_envs * self.depth, *shape[1:]), spec.obs.item_dtype)
        # depth * the reply its row was last rebuilt from + the ring row of its newest frame; -1: none yet (the ring
        # then holds zeros in order, the newest frame last)
        self.state = np.full(spec.num_envs, -1, np.int64)
        self._frame = self.ring[0].nbytes

    def decode(self, data: memoryview, number: int, ranges: list[range], out: np.ndarray) -> memoryview:
        """Rebuild the rows of envs ``ranges`` from reply ``number``'s ``data`` (:meth:`Sender.encode`'s form)
        into ``out`` (one row per env, in order); the rest of ``data``."""
        depth, frame = self.depth, self._frame
        ids = np.concatenate([np.arange(r.start, r.stop) for r in ranges])
        count = len(ids)
        if data[:1] == RAW:  # (the node has given up on frames: the ring is not read again)
            size = count * depth * frame
            out[:] = np.frombuffer(data, self.ring.dtype, size // self.ring.itemsize, 1).reshape(out.shape)
            return data[1 + size :]
        data = data[1:]
        shifted = np.frombuffer(data, np.bool_, count)
        moved = int(np.count_nonzero(shifted))
        frames = np.frombuffer(data, self.ring.dtype, moved * frame // self.ring.itemsize, count)
        offset = count + moved * frame
        wholes = np.frombuffer(data, self.ring.dtype, (count - moved) * depth * frame // self.ring.itemsize, offset)
        offset += (count - moved) * depth * frame
        state = self.state[ids]
        newest = np.where(state < 0, depth - 1, state % depth)
        fresh = (state < 0) | (state // depth != number)  # not rebuilt from this reply yet
        if fresh.any():
            # a shifted row's new frame takes its oldest frame's place: written again (after an interrupt before
            # the store below), it is the same frame in the same place; a whole row fills its ring in order
            moving, whole = fresh & shifted, fresh & ~shifted
            newest[moving] = (newest[moving] + 1) % depth
            newest[whole] = depth - 1
            shape = self.ring.shape[1:]
            new, full = frames.reshape(-1, *shape), wholes.reshape(-1, depth, *shape)
            if count - int(np.count_nonzero(fresh)):  # (read before, in part: only what is not rebuilt yet)
                new, full = new[moving[shifted]], full[whole[~shifted]]
            self.ring[ids[moving] * depth + newest[moving]] = new
            if whole.any():
                self.ring[(ids[whole] * depth)[:, None] + np.arange(depth)] = full
            self.state[ids[fresh]] = depth * number + newest[fresh]  # one store: rebuilt from this reply
        order = (ids * depth)[:, None] + (newest[:, None] + 1 + np.arange(depth)) % depth
        np.take(self.ring, order, axis=0, out=out, mode="clip")  # (count, depth, *frame): straight into the rows
        return data[offset:]
