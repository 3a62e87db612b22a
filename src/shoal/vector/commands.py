"""What a vector env and its engines say to each other: commands (:class:`Op`, :class:`Command`, with their
payloads :class:`Sequences` and :class:`NoSeeds`) and what comes back (:data:`InfoEntries`, :class:`LooseObs`).

Each pickles small (``__reduce__``): a backend with worker processes or Ray actors carries them as bytes, and a
partial reset of one env or a call of action sequences pays their pickling every time.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import IntEnum
from itertools import repeat
from typing import Any, Iterator, NamedTuple

import numpy as np

from shoal.vector.infos import Entry

InfoEntries = list[Entry]
"""``(env_id, info)`` pairs in env order; in same-step mode, the :class:`~shoal.vector.infos.Finals` of the envs
that ended where the first of them is (an ended env's pair is then its reset's info); from an engine that hosts
vector envs, the :class:`~shoal.vector.infos.Block` of each one's infos after them."""


class Op(IntEnum):
    """What a command asks an engine to do."""

    STEP = 1
    SEQUENCES = 2
    RESET = 3
    CALL = 4
    GET_ATTR = 5
    SET_ATTR = 6


class Command(NamedTuple):
    """One request to an engine. ``ids`` are global env ids, all hosted by that engine."""

    op: Op
    ids: np.ndarray
    payload: Any = None

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as the op's number, the ids' type code and bytes, and the payload: pickled as it is, a reset's
        command for one env took ~5.9 us to pickle and ~4 to read back (~3.9 and ~2.2 for the one-element array, ~1.1
        and ~0.9 for the enum), each partial reset of an env in a worker (``reset_mask``)."""
        ids = self.ids
        return _command, (int(self.op), ids.dtype.char, ids.tobytes(), self.payload)


def _command(op: int, code: str, ids: bytes, payload: Any) -> Command:
    """A :class:`Command` as :meth:`Command.__reduce__` pickled it."""
    return Command(_OPS[op], np.frombuffer(ids, code).copy(), payload)


_OPS = {int(op): op for op in Op}


class NoSeeds(Sequence):
    """``[None] * n`` without the list: the seeds of an autoreset (every env goes on with its random stream).

    Made, iterated and counted in constant time per call or per item in C: for a batch-native env's thousands of
    instances, building ``[None] * 65536`` and scanning it took ~90 us a step. Reads like a list of Nones
    otherwise (indexing, slicing, ``len``, ``count``)."""

    __slots__ = ("_n",)

    def __init__(self, n: int) -> None:
        self._n = n

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, index: Any) -> Any:
        picked = range(self._n)[index]  # IndexError/TypeError as a list gives them
        return NoSeeds(len(picked)) if isinstance(index, slice) else None

    def __iter__(self) -> Iterator[None]:
        return repeat(None, self._n)

    def count(self, value: Any) -> int:
        return self._n if value is None else 0

    def __repr__(self) -> str:
        return f"[None] * {self._n}"


class LooseObs(NamedTuple):
    """An engine's answer when observations have loose leaves (values that do not live in shared memory):
    the info entries, and the loose leaves' values of each env whose observation was written, by env id."""

    entries: InfoEntries
    values: dict[int, tuple]


class Sequences(NamedTuple):
    """Action sequences for several envs: env ``j`` runs ``values[offsets[j]:offsets[j + 1]]``."""

    values: np.ndarray
    offsets: np.ndarray
    gamma: float

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as the arrays' types, shapes and bytes (numpy's own pickling of two small arrays took ~5 us of the
        ~8 a sequence command took to pickle)."""
        values, offsets = self.values, self.offsets
        return _sequences, (values.dtype.str, values.shape, values.tobytes(), offsets.astype(np.int64).tobytes(),
                            self.gamma)

    def split(self, starts: Sequence[int]) -> list[Sequences]:
        """The sequences of consecutive slices of envs, ``starts`` being each slice's first env position."""
        bounds = list(starts) + [len(self.offsets) - 1]
        parts = []
        for a, b in zip(bounds[:-1], bounds[1:]):
            lo, hi = self.offsets[a], self.offsets[b]
            parts.append(Sequences(self.values[lo:hi], self.offsets[a : b + 1] - lo, self.gamma))
        return parts


def _sequences(code: str, shape: tuple[int, ...], values: bytes, offsets: bytes, gamma: float) -> Sequences:
    """:class:`Sequences` as :meth:`Sequences.__reduce__` pickled them."""
    return Sequences(np.frombuffer(values, code).reshape(shape).copy(), np.frombuffer(offsets, np.int64).copy(), gamma)
