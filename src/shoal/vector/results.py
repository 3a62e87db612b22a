"""How a batch's results come out of the shared buffers: observations in Gymnasium's shape, infos merged.

A step or reset leaves its results in the buffers (:mod:`shoal.vector.buffers`) and its info entries in the answers
(:mod:`shoal.vector.transport`). :class:`Results` reads them out for the envs of the batch the caller holds: copies
by default (``copy=False``: views, valid until the next step), observations as one array, a structured value, a flat
array (``flatten=True``) or with leaves of no fixed size (Text, Graph, ...) that came with the answers; infos first as
they came (:class:`~shoal.vector.infos.InfoParts`, for an adapter that hands them out per env), then in Gymnasium's
vector form.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable

import numpy as np
from gymnasium.vector.utils import iterate

from shoal.vector.commands import LooseObs
from shoal.vector.copies import SPLIT_FROM, copy_out
from shoal.vector.infos import InfoParts, merge_infos

if TYPE_CHECKING:
    from shoal.spaces import Layout
    from shoal.vector.buffers import Buffers
    from shoal.vector.transport import Transport

ALL_ROWS = slice(None)
"""The rows of a synchronous batch: every env's."""


class Results:
    """The reading of results of :class:`~shoal.vector.base.VectorEnv` (a mixin: it uses the vector env's buffers,
    layouts and transport)."""

    if TYPE_CHECKING:  # what it uses of the vector env, for type checkers
        num_envs: int
        groups: list[range]
        is_async: bool
        copy: bool
        flatten: bool
        always_env_id: bool
        _transport: Transport
        _buffers: Buffers
        _obs_layout: Layout
        _obs_slot0: np.ndarray
        _plain_obs: bool
        _loose_obs: list[list[Any]]

    def _split_rows(self) -> list[slice] | None:
        """The groups' rows, whose results a synchronous step copies out group by group as their answers come
        (:class:`~shoal.vector.copies.SplitCopies`), where that pays: several groups, on a backend that reports
        answers as they come, results of one plain array of observations, at least :data:`SPLIT_FROM` bytes in
        all."""
        if (not self.copy or self.is_async or not self._plain_obs or not self._transport.reports_arrivals
                or len(self.groups) < 2):
            return None
        if sum(a.nbytes for a in self._results()) < SPLIT_FROM:
            return None
        return [slice(g.start, g.stop) for g in self.groups]

    def _results(self) -> tuple[np.ndarray, ...]:
        """The arrays a step's results are copied out of when they are split: observations (slot 0), rewards, flags
        and the engine's per-env info arrays (``extras``: agents as rows have 4.25 MiB of them at 262144 rows)."""
        b = self._buffers
        return (self._obs_slot0, b.rewards, b.terminations, b.truncations, *b.extras.values())

    def _observations(self, rows: Any) -> Any:
        """The observations of the envs at buffer ``rows`` (a slice, or ids), as the caller gets them."""
        if self._plain_obs and not self._buffers.slots_on[0]:  # every step's case: one array, in slot 0
            return take(self._obs_slot0, rows) if self.copy else self._obs_slot0[rows]
        batch, fresh = self._obs_batch(rows)
        if self.flatten:
            flat = self._obs_layout.flat(batch)
            return copy_out(flat) if self.copy and not fresh else flat
        if self._loose_obs:
            loose = [tuple(store[rows] if isinstance(rows, slice) else [store[i] for i in rows.tolist()])
                     for store in self._loose_obs]
            return self._obs_layout.read(batch, copy=self.copy, loose=loose)
        return self._obs_layout.read(batch, copy=self.copy and not fresh)

    def _absorb(self, answers: list[tuple[int, Any]]) -> list[tuple[int, Any]]:
        """Keep the loose leaves of the observations that came with ``answers``; the answers' info entries."""
        if not self._loose_obs:
            return answers
        stores = self._loose_obs
        unwrapped = []
        for group, result in answers:
            if isinstance(result, LooseObs):
                for env_id, values in result.values.items():
                    for store, value in zip(stores, values):
                        store[env_id] = value
                result = result.entries
            unwrapped.append((group, result))
        return unwrapped

    def _obs_batch(self, rows: Any) -> tuple[np.ndarray, bool]:
        """The observations of the envs at ``rows`` (a slice or ids), and whether that array is a copy already."""
        b = self._buffers
        k = b.slot_of(rows)
        if k is None:
            return b.obs[b.obs_rows(np.arange(self.num_envs)[rows])], True
        return b.slot(k)[rows], not isinstance(rows, slice)  # fancy indexing copies

    def _info_parts(
        self, answers: list[tuple[int, Any]], ids: np.ndarray | None, rows: Any, extras: list[np.ndarray] | None = None
    ) -> InfoParts:
        """The infos of ``answers`` for all envs in order (``ids`` None) or for envs ``ids``, at buffer ``rows``;
        ``extras``: the engine's info arrays, copied out already (in the order of the buffers' ``extras``)."""
        entries = [entry for _, result in answers if result for entry in result]
        if extras is None:
            extras = [take(array, rows) for array in self._buffers.extras.values()]
        arrays = dict(zip(self._buffers.extras, extras))
        if ids is not None:
            arrays["env_id"] = ids.copy()
        elif self.always_env_id:
            arrays["env_id"] = np.arange(self.num_envs)
        return InfoParts(entries, ids, arrays)

    def _merged(self, parts: InfoParts) -> dict[str, Any]:
        """Infos in Gymnasium's vector form: the entries merged (:func:`~shoal.vector.infos.merge_infos`), then the
        arrays."""
        entries, ids, arrays = parts
        if not entries:
            return arrays
        if ids is None:
            infos = merge_infos(entries, self.num_envs, records=self._records)
        else:
            infos = merge_infos(entries, len(ids), {e: r for r, e in enumerate(ids.tolist())}, self._records)
        infos.update(arrays)
        return infos

    def _records(self, batch: np.ndarray) -> Iterable[Any]:
        """Observation records (an engine's final observations), one Gymnasium-shaped value each (views)."""
        return iterate(self._obs_layout.space, self._obs_layout.read(batch))


def batch_rows(ids: np.ndarray) -> Any:
    """The buffer rows of the envs ``ids``: a slice when they are consecutive (views, and copies of one block), else
    the ids themselves."""
    if len(ids) and ids[-1] - ids[0] == len(ids) - 1 and (np.diff(ids) == 1).all():
        return slice(int(ids[0]), int(ids[-1]) + 1)
    return ids


def take(array: np.ndarray, rows: Any) -> np.ndarray:
    """A copy of ``array[rows]`` (indexing with ids copies already; a slice gives a view)."""
    if rows is ALL_ROWS:  # every step of a synchronous vector env: no view to make first
        return copy_out(array)
    return copy_out(array[rows]) if isinstance(rows, slice) else array[rows]
