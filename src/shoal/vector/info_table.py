"""A step's numeric infos through shared memory: what a worker writes instead of pickling them onto its pipe.

MuJoCo's envs, and many others, return the same few numbers in their info every step. Pickled, a worker's eight
HalfCheetah infos cost it ~19 us and a pipe write, and the calling process a read and ~5 us to unpickle them (through
this table: ~5 and ~1 us); on 2 cores, HalfCheetah x 16 stepped 14-21% slower than with its infos dropped. Where
every env of a stepped group returned a dict of the same keys in the same order, each key's values of one scalar type
that :data:`~shoal.vector.infos.WIDE` carries, the worker writes the values into the group's rows of ``info_words`` (one
8-byte word per key) and answers with the code :data:`~shoal.vector._worker.TABLE`; the calling process reads them
back as one :class:`~shoal.vector.infos.Columns`, which merges into Gymnasium's vector form a key at a time.

Which keys and types a group's words hold (its schema) is written, pickled, into the ``info_schemas`` row of the
group's first env, with a version the worker bumps each time it changes; the calling process unpickles it again
only when the version moved. A group's rows are written only while it steps, and read in the calling process as its
answer is taken, before it is sent another step, so each read sees the values and schema of that answer. Anything
else goes on the pipe as before: envs without infos or with other keys, strings, arrays, nested dicts, ``final_obs``,
an info that is not a plain dict, more than :data:`SLOTS` keys, a schema over :data:`SCHEMA_BYTES`, an int that does
not fit int64.
"""

from __future__ import annotations

import pickle
from typing import TYPE_CHECKING, Any

import numpy as np

from shoal.vector.infos import WIDE, Columns

if TYPE_CHECKING:  # (buffers.py lays the table out with this module's sizes)
    from shoal.vector.buffers import Buffers

SLOTS = 16
"""The most keys an info may have to come through the table (one 8-byte word each per env)."""
SCHEMA_BYTES = 512
"""The room for a group's schema (its version, its length, then the pickled keys and types)."""
_HEADER = 16
_KINDS = tuple(WIDE)  # a schema names each type by its index here


class InfoTable:
    """The table over a vector env's buffers' ``info_words`` and ``info_schemas``; a worker :meth:`put` s, the
    calling process :meth:`read` s. Each side keeps what it last wrote or read of each group's schema."""

    def __init__(self, words: np.ndarray, schemas: np.ndarray) -> None:
        self._words = words  # (num_envs, SLOTS) uint64
        self._views = {dtype: words.view(dtype) for dtype in set(WIDE.values())}
        self._schemas = schemas  # (num_envs, SCHEMA_BYTES) uint8; the row of a group's first env
        self._spans: dict[tuple[type, ...], list[tuple[np.dtype, list[int] | None]]] = {}  # see _spans
        # by a group's first env: (keys, kinds, version) of the schema last written, (version, keys, kinds) last read
        self._written: dict[int, tuple[tuple[Any, ...], tuple[type, ...], int]] = {}
        self._read: dict[int, tuple[int, tuple[Any, ...], tuple[type, ...]]] = {}

    @classmethod
    def of(cls, buffers: Buffers) -> InfoTable | None:
        """The table over ``buffers`` (a worker's view or the calling process's), or None where they lay none out."""
        words, schemas = buffers.info_words, buffers.info_schemas
        return None if words is None or schemas is None else cls(words, schemas)

    def put(self, entries: list[Any], ids: np.ndarray) -> bool:
        """In a worker: write a step's info ``entries`` for its group ``ids`` (consecutive env ids) into the table,
        if they fit it (every env of the group has one entry, in order, all with the same keys, each key's values of
        one type of :data:`~shoal.vector.infos.WIDE`). Whether they were written; if not, nothing that will be read
        was touched."""
        n, start = len(ids), int(ids[0])
        if len(entries) != n:
            return False
        first = entries[0][1] if type(entries[0]) is tuple else None
        if type(first) is not dict or not first or len(first) > SLOTS or "final_obs" in first:
            return False
        keys = tuple(first)
        kinds = tuple(map(type, first.values()))
        spans = self._spans.get(kinds)
        if spans is None:
            if any(kind not in WIDE for kind in kinds):
                return False
            spans = self._spans[kinds] = _spans(kinds)
        rows = []
        for i, entry in enumerate(entries):  # (the same keys in the same order: a dict in another order goes by pipe)
            if type(entry) is not tuple or entry[0] != start + i:
                return False
            info = entry[1]
            if type(info) is not dict or tuple(info) != keys:
                return False
            row = tuple(info.values())
            if tuple(map(type, row)) != kinds:
                return False
            rows.append(row)
        try:
            for dtype, columns in spans:
                if columns is None:  # every key's values of one 8-byte type
                    self._views[dtype][start : start + n, : len(keys)] = rows
                else:
                    self._views[dtype][start : start + n, columns] = [[row[j] for j in columns] for row in rows]
        except OverflowError:  # (an int outside int64)
            return False
        return self._announce(start, keys, kinds)

    def _announce(self, start: int, keys: tuple[Any, ...], kinds: tuple[type, ...]) -> bool:
        """Make ``keys`` and ``kinds`` the schema of the group starting at env ``start``; False if it does not fit."""
        known = self._written.get(start)
        if known is not None and known[0] == keys and known[1] == kinds:
            return True
        try:
            data = pickle.dumps((keys, bytes(_KINDS.index(kind) for kind in kinds)), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:  # keys that cannot be pickled: the pipe's reply names the env
            return False
        if len(data) > SCHEMA_BYTES - _HEADER:
            return False
        version = 1 if known is None else known[2] + 1
        row = self._schemas[start]
        row[_HEADER : _HEADER + len(data)] = np.frombuffer(data, np.uint8)
        row[:_HEADER].view(np.int64)[:] = (version, len(data))
        self._written[start] = (keys, kinds, version)
        return True

    def read(self, ids: np.ndarray) -> Columns:
        """In the calling process: the infos a worker :meth:`put` for group ``ids``, copied out of the table."""
        start = int(ids[0])
        version, length = self._schemas[start, :_HEADER].view(np.int64).tolist()
        known = self._read.get(start)
        if known is None or known[0] != version:
            keys, codes = pickle.loads(self._schemas[start, _HEADER : _HEADER + length].tobytes())
            known = self._read[start] = (version, keys, tuple(_KINDS[code] for code in codes))
        _, keys, kinds = known
        return Columns(ids, keys, kinds, self._words[start : start + len(ids), : len(keys)].copy())


def _spans(kinds: tuple[type, ...]) -> list[tuple[np.dtype, list[int] | None]]:
    """Which columns of values of ``kinds`` (types of :data:`~shoal.vector.infos.WIDE`) each 8-byte type writes:
    ``[(dtype, None)]`` when one writes them all."""
    by_type: dict[np.dtype, list[int]] = {}
    for j, kind in enumerate(kinds):
        by_type.setdefault(WIDE[kind], []).append(j)
    if len(by_type) == 1:
        return [(dtype, None) for dtype in by_type]
    return list(by_type.items())
