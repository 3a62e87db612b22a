"""The per-step arrays of a vector env, laid out once in one block of memory.

Observations, actions, rewards, terminations, truncations and the engine's own per-env arrays (``extras``: Atari
lives, frame numbers, ...) are views into a single buffer. In the serial backend that buffer is an ordinary bytearray;
in the multiprocessing backend it is shared memory that every worker maps, so an env writes its results in place and
nothing per step is pickled.

Observations have :data:`OBS_SLOTS` slots of ``num_envs`` rows each (``obs`` holds them one after the other). Env
``i``'s observation is in slot ``obs_slot[i]``; a command writes its new observation into slot ``obs_target[i]``
(set by the caller before it sends), reading the previous one (an Atari frame stack) from where it was. Slot 0 is
the numpy path's; the PyTorch ops hand the other slots out as tensors (:mod:`shoal.torch_ops`), so a step's
observations reach a tensor with no copy beyond the one into this buffer, and a tensor still held is never written.

With ``finals`` (same-step autoreset with worker processes), ``final_obs`` holds the final observations of the envs
whose episode ended in their last step, and ``ended`` which envs those are: a worker leaves them there instead of
pickling them (:func:`shoal.vector._worker.park_finals`). With ``info_table`` (worker processes hosting Gymnasium
envs), ``info_words`` and ``info_schemas`` carry a step's numeric infos (:mod:`shoal.vector.info_table`). With
``sequence_rows`` (worker processes, an action space of one array per env), ``sequence_actions`` holds that many
actions per env, where a worker reads the action sequences of a group (its region: ``sequence_rows`` rows per env of
it, from its first env's), with ``sequence_lengths`` and ``sequence_gamma`` (read at each group's first env), instead
of a pickled command (:func:`shoal.vector._worker.put_sequences`). With ``reset_flags`` (worker processes),
``resetting`` says which envs of a group a reset with neither seeds nor options resets, likewise
(:func:`shoal.vector._worker.shared_kind`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from shoal.spaces import Layout
from shoal.vector.info_table import SCHEMA_BYTES, SLOTS

OBS_SLOTS = 3
"""Observation slots in every vector env's buffers: the numpy path's, and two to hand out as tensors."""

SEQUENCE_ROWS = 64
"""The most actions per env the shared sequence area holds (longer sequences go pickled)."""
SEQUENCE_BYTES = 4 << 20
"""The most memory the sequence area takes: with many envs it holds fewer actions per env (none where not one
fits)."""
_ALIGN = 64  # cache-line alignment for every array, so workers writing neighbouring arrays do not share lines


def sequence_rows(num_envs: int, action: Layout) -> int:
    """How many actions per env a sequence area for ``num_envs`` envs of actions ``action`` holds: at most
    :data:`SEQUENCE_ROWS`, within :data:`SEQUENCE_BYTES`; 0 where an action is not one array (a Dict, loose leaves)."""
    if action.structured or action.loose:
        return 0
    return min(SEQUENCE_ROWS, SEQUENCE_BYTES // max(1, num_envs * action.nbytes))


def _aligned(offset: int) -> int:
    return (offset + _ALIGN - 1) // _ALIGN * _ALIGN


@dataclass(frozen=True)
class BufferSpec:
    """What to allocate for ``num_envs`` envs; picklable, so workers rebuild the same views over shared memory."""

    num_envs: int
    obs: Layout
    action: Layout
    extras: dict[str, tuple[np.dtype, tuple[int, ...]]] = field(default_factory=dict)
    finals: bool = False
    """Lay out ``final_obs`` and ``ended`` too (see the module docstring)."""
    info_table: bool = False
    """Lay out ``info_words`` and ``info_schemas`` too (see the module docstring)."""
    sequence_rows: int = 0
    """Actions per env in ``sequence_actions``; 0: no sequence area (see the module docstring)."""
    reset_flags: bool = False
    """Lay out ``resetting`` too (see the module docstring)."""

    def _arrays(self) -> list[tuple[str, Any]]:
        fixed: list[tuple[str, Any]] = [
            ("obs", self.obs),
            ("actions", self.action),
            ("rewards", (np.dtype(np.float64), ())),
            ("terminations", (np.dtype(np.bool_), ())),
            ("truncations", (np.dtype(np.bool_), ())),
            ("needs_reset", (np.dtype(np.bool_), ())),
            ("steps_taken", (np.dtype(np.int32), ())),
            ("obs_slot", (np.dtype(np.int64), ())),
            ("obs_target", (np.dtype(np.int64), ())),
            ("slots_on", (np.dtype(np.bool_), ())),
        ]
        if self.finals:
            fixed += [("final_obs", self.obs), ("ended", (np.dtype(np.bool_), ()))]
        if self.info_table:
            fixed += [("info_words", (np.dtype(np.uint64), (SLOTS,))),
                      ("info_schemas", (np.dtype(np.uint8), (SCHEMA_BYTES,)))]
        if self.sequence_rows:
            fixed += [("sequence_actions", self.action), ("sequence_lengths", (np.dtype(np.int64), ())),
                      ("sequence_gamma", (np.dtype(np.float64), ()))]
        if self.reset_flags:
            fixed.append(("resetting", (np.dtype(np.bool_), ())))
        return fixed + [(name, (np.dtype(dt), tuple(shape))) for name, (dt, shape) in self.extras.items()]

    @property
    def nbytes(self) -> int:
        offset = 0
        for name, kind in self._arrays():
            offset = _aligned(offset) + self._size(name, kind)
        return _aligned(offset)

    def _rows(self, name: str) -> int:
        rows = {"obs": self.num_envs * OBS_SLOTS, "slots_on": 1, "sequence_actions": self.num_envs * self.sequence_rows}
        return rows.get(name, self.num_envs)

    def _size(self, name: str, kind: Any) -> int:
        if isinstance(kind, Layout):
            return kind.nbytes * self._rows(name)
        dtype, shape = kind
        return int(dtype.itemsize * np.prod(shape, dtype=np.int64)) * self._rows(name)

    def view(self, memory: Any) -> Buffers:
        """Views of every array over ``memory`` (at least :attr:`nbytes` long)."""
        arrays: dict[str, np.ndarray] = {}
        offset = 0
        for name, kind in self._arrays():
            offset = _aligned(offset)
            if isinstance(kind, Layout):
                arrays[name] = kind.view(memory, self._rows(name), offset)
            else:
                dtype, shape = kind
                arrays[name] = np.ndarray((self._rows(name), *shape), dtype, buffer=memory, offset=offset)
            offset += self._size(name, kind)
        extras = {name: arrays.pop(name) for name in self.extras}
        return Buffers(spec=self, extras=extras, **arrays)

    def allocate(self) -> Buffers:
        """Views over a new private (not shared) block."""
        return self.view(bytearray(max(self.nbytes, 1)))


@dataclass
class Buffers:
    """Views of the per-step arrays; row ``i`` belongs to env ``i`` (in ``obs``: row ``slot * num_envs + i``)."""

    spec: BufferSpec
    obs: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    terminations: np.ndarray
    truncations: np.ndarray
    needs_reset: np.ndarray
    steps_taken: np.ndarray
    obs_slot: np.ndarray
    obs_target: np.ndarray
    slots_on: np.ndarray  # one flag: observations may be outside slot 0 (the torch ops are in use); else rows = ids
    extras: dict[str, np.ndarray]
    final_obs: np.ndarray | None = None  # one record per env, with ``spec.finals``
    ended: np.ndarray | None = None  # one flag per env, with ``spec.finals``
    info_words: np.ndarray | None = None  # SLOTS words per env, with ``spec.info_table``
    info_schemas: np.ndarray | None = None  # SCHEMA_BYTES per env, with ``spec.info_table``
    sequence_actions: np.ndarray | None = None  # ``spec.sequence_rows`` actions per env
    sequence_lengths: np.ndarray | None = None  # one length per env, with ``sequence_actions``
    sequence_gamma: np.ndarray | None = None  # one discount per env (a group's first env's counts), likewise
    resetting: np.ndarray | None = None  # one flag per env, with ``spec.reset_flags``

    def slot(self, k: int) -> np.ndarray:
        """Observation slot ``k``: ``num_envs`` rows."""
        n = self.spec.num_envs
        return self.obs[k * n : (k + 1) * n]

    def slot_of(self, rows: Any) -> int | None:
        """The one slot holding the observations of the envs at ``rows`` (a slice or ids), or None if several do."""
        if not self.slots_on[0]:
            return 0
        slots = self.obs_slot[rows]
        k = int(slots[0])
        return k if (slots == k).all() else None

    def obs_rows(self, ids: Any) -> Any:
        """The ``obs`` rows holding the current observations of envs ``ids``."""
        return self.obs_slot[ids] * self.spec.num_envs + ids if self.slots_on[0] else ids

    def target_rows(self, ids: Any) -> Any:
        """The ``obs`` rows the next observations of envs ``ids`` go to."""
        return self.obs_target[ids] * self.spec.num_envs + ids if self.slots_on[0] else ids

    def settle(self, ids: Any) -> None:
        """Envs ``ids`` wrote their new observations into their target slots: that is where they are now."""
        if self.slots_on[0]:
            self.obs_slot[ids] = self.obs_target[ids]

    def carry(self, ids: np.ndarray) -> None:
        """Copy the observations of envs ``ids`` (which do not step) into their target slots."""
        if not self.slots_on[0]:
            return
        moving = ids[self.obs_slot[ids] != self.obs_target[ids]]
        if len(moving):
            self.obs[self.target_rows(moving)] = self.obs[self.obs_rows(moving)]
            self.settle(moving)


def item_writers(*arrays: np.ndarray) -> tuple[Any, ...]:
    """Memoryviews of the 1-D ``arrays`` (float64 or bool) to write one item at a time: ~0.05 us a value against
    ~0.3 us for numpy's item assignment, which an engine pays for each env's reward and flags every step. They
    convert as numpy does what the engines' checks pass (a real number: its float; a flag: its truth) and refuse
    with TypeError what numpy would coerce (a string of digits, None as a reward: numpy stores NaN)."""
    return tuple(memoryview(array) for array in arrays)  # type: ignore[arg-type]
