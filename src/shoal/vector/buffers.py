"""The per-step arrays of a vector env, laid out once in one block of memory.

Observations, actions, rewards, terminations, truncations and the engine's own per-env arrays (``extras``: Atari
lives, frame numbers, ...) are views into a single buffer. In the serial backend that buffer is an ordinary bytearray;
in the multiprocessing backend it is shared memory that every worker maps, so an env writes its results in place and
nothing per step is pickled.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from shoal.spaces import Layout

_ALIGN = 64  # cache-line alignment for every array, so workers writing neighbouring arrays do not share lines


def _aligned(offset: int) -> int:
    return (offset + _ALIGN - 1) // _ALIGN * _ALIGN


@dataclass(frozen=True)
class BufferSpec:
    """What to allocate for ``num_envs`` envs; picklable, so workers rebuild the same views over shared memory."""

    num_envs: int
    obs: Layout
    action: Layout
    extras: dict[str, tuple[np.dtype, tuple[int, ...]]] = field(default_factory=dict)

    def _arrays(self) -> list[tuple[str, Any]]:
        fixed: list[tuple[str, Any]] = [
            ("obs", self.obs),
            ("actions", self.action),
            ("rewards", (np.dtype(np.float64), ())),
            ("terminations", (np.dtype(np.bool_), ())),
            ("truncations", (np.dtype(np.bool_), ())),
            ("needs_reset", (np.dtype(np.bool_), ())),
            ("steps_taken", (np.dtype(np.int32), ())),
        ]
        return fixed + [(name, (np.dtype(dt), tuple(shape))) for name, (dt, shape) in self.extras.items()]

    @property
    def nbytes(self) -> int:
        offset = 0
        for _, kind in self._arrays():
            offset = _aligned(offset) + self._size(kind)
        return _aligned(offset)

    def _size(self, kind: Any) -> int:
        if isinstance(kind, Layout):
            return kind.nbytes * self.num_envs
        dtype, shape = kind
        return int(dtype.itemsize * np.prod(shape, dtype=np.int64)) * self.num_envs

    def view(self, memory: Any) -> Buffers:
        """Views of every array over ``memory`` (at least :attr:`nbytes` long)."""
        arrays: dict[str, np.ndarray] = {}
        offset = 0
        for name, kind in self._arrays():
            offset = _aligned(offset)
            if isinstance(kind, Layout):
                arrays[name] = kind.view(memory, self.num_envs, offset)
            else:
                dtype, shape = kind
                arrays[name] = np.ndarray((self.num_envs, *shape), dtype, buffer=memory, offset=offset)
            offset += self._size(kind)
        extras = {name: arrays.pop(name) for name in self.extras}
        return Buffers(spec=self, extras=extras, **arrays)

    def allocate(self) -> Buffers:
        """Views over a new private (not shared) block."""
        return self.view(bytearray(max(self.nbytes, 1)))


@dataclass
class Buffers:
    """Views of the per-step arrays; row ``i`` belongs to env ``i``."""

    spec: BufferSpec
    obs: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    terminations: np.ndarray
    truncations: np.ndarray
    needs_reset: np.ndarray
    steps_taken: np.ndarray
    extras: dict[str, np.ndarray]
