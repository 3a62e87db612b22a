"""A step's numeric infos through shared memory: what a worker writes instead of pickling them onto its pipe.

MuJoCo's envs, and many others, return the same few numbers in their info every step. Pickled, a worker's eight
HalfCheetah infos cost it ~19 us and a pipe write, and the calling process a read and ~5 us to unpickle them (through
this table, whose writes and merge are C, ``shoal/vector/_infos.c``, four of them take ~0.7 us to write, ~0.8 to read
and ~1.4 to merge); on 2 cores, HalfCheetah x 16 stepped 14-21% slower than with its infos dropped before the table,
~5% now. Where
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

from shoal.vector._infos import fill_words
from shoal.vector.infos import WIDE, Columns

if TYPE_CHECKING:  # (buffers.py lays the table out with this module's sizes)
    from shoal.vector.buffers import Buffers

SLOTS = 16
"""The most keys an info may have to come through the table (one 8-byte word each per env)."""
SCHEMA_BYTES = 512
"""The room for a group's schema (its version, its length, then the pickled keys and types)."""
_HEADER = 16
_KINDS = tuple(WIDE)  # a schema names each type by its index here
_WIDE_KINDS = {kind: dtype.kind for kind, dtype in WIDE.items()}  # each type's 8-byte kind: 'f', 'i' or 'u'


class InfoTable:
    """The table over a vector env's buffers' ``info_words`` and ``info_schemas``; a worker :meth:`put` s, the
    calling process :meth:`read` s. Each side keeps what it last wrote or read of each group's schema."""

    def __init__(self, words: np.ndarray, schemas: np.ndarray) -> None:
        self._words = words  # (num_envs, SLOTS) uint64
        self._schemas = schemas  # (num_envs, SCHEMA_BYTES) uint8; the row of a group's first env
        # its int64s (row i's header at i * SCHEMA_BYTES // 8): read so, a header is two Python ints in ~0.1 us
        self._headers = memoryview(schemas).cast("B").cast("q")  # type: ignore[arg-type]
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
        was touched. (The values are checked and written in C, ``_infos.fill_words``: 4 envs' infos of one float in
        ~0.5 us, where numpy took ~2.6.)"""
        n, start = len(ids), int(ids[0])
        if len(entries) != n:
            return False
        schema = fill_words(self._words, entries, start, _WIDE_KINDS, SLOTS)
        return schema is not None and self._announce(start, *schema)

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
        at = start * (SCHEMA_BYTES // 8)
        version, length = self._headers[at], self._headers[at + 1]
        known = self._read.get(start)
        if known is None or known[0] != version:
            keys, codes = pickle.loads(self._schemas[start, _HEADER : _HEADER + length].tobytes())
            known = self._read[start] = (version, keys, tuple(_KINDS[code] for code in codes))
        _, keys, kinds = known
        return Columns(ids, keys, kinds, self._words[start : start + len(ids), : len(keys)].copy())
