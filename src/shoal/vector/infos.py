"""Merging per-env info dicts into Gymnasium's vector form: a dict of arrays, each key with a ``_key`` mask. Numeric
infos from a worker may come as :class:`Columns` instead of dicts (:mod:`shoal.vector.info_table`).

The rules are Gymnasium's ``VectorEnv._add_info`` (so results compare equal to ``SyncVectorEnv``'s), with the batch
size passed explicitly: in an asynchronous batch the arrays have ``batch_size`` rows, not ``num_envs``. One env's
info is added by :func:`add_info`, written in C (``shoal/vector/_infos.c``: ~0.7 us where Gymnasium's takes ~2.5 for
``RecordEpisodeStatistics``' episode); a worker's :class:`Columns` are merged a key at a time, in C too.
"""

from __future__ import annotations

from itertools import repeat
from typing import Any, Callable, Iterable, Iterator, NamedTuple, Union

import numpy as np

from shoal.vector._infos import add_columns, add_info, column_entries


class Finals(NamedTuple):
    """Same-step mode: the envs whose episode ended this step, as one entry among an answer's ``(env_id, info)``
    entries. What Gymnasium adds per env as ``{"final_obs": obs, "final_info": info}``, for all of them at once:
    a batch-native env ends thousands of episodes a step, and a dict per env cost ~3 us each."""

    ids: np.ndarray
    """The envs, in order."""
    obs: np.ndarray | list[Any] | None
    """Their final observations: one record each in the buffers' layout (an engine that reads them from there
    sends them so, one array, which the calling process reads per env), or a list of values; None only on the way
    from a worker to its parent: in the shared buffers' ``final_obs`` (:func:`shoal.vector._worker.park_finals`)."""
    infos: list[dict[str, Any]]
    """The infos of the steps that ended them, one per env; empty when none has any."""


WIDE: dict[type, np.dtype] = {
    **{kind: np.dtype(np.float64) for kind in (float, np.float64, np.float32, np.float16)},
    **{kind: np.dtype(np.int64) for kind in (int, bool, np.int64, np.int32, np.int16, np.int8)},
    **{kind: np.dtype(np.uint64) for kind in (np.uint64, np.uint32, np.uint16, np.uint8)},
}
"""The scalar types whose values :class:`Columns` carry, and the 8-byte type each is carried as (exactly: every value
of the type is one of the wider type's, and converts back unchanged). Each makes a typed array in Gymnasium's
vector form (:func:`add_info`); complex, long double and numpy's bool do not come this way."""


class Columns(NamedTuple):
    """The infos of envs ``ids`` (one each, in order) that all have the keys ``keys``, key ``j``'s values all of the
    scalar type ``kinds[j]`` (one of :data:`WIDE`'s), as one array: how a worker's answer carries them through
    shared memory instead of pickled dicts (:mod:`shoal.vector.info_table`)."""

    ids: np.ndarray
    """The envs: consecutive env ids, in order (a group's)."""
    keys: tuple[Any, ...]
    kinds: tuple[type, ...]
    words: np.ndarray
    """``(len(ids), len(keys))`` 8-byte words: column ``j`` holds key ``j``'s values as ``WIDE[kinds[j]]``."""

    def entries(self) -> list[tuple[int, dict[str, Any]]]:
        """The ``(env_id, info)`` entries these columns were made of: the same keys, in order, and the same values
        of the same types (made in C, ``_infos.column_entries``: a group of four MuJoCo infos in ~1 us, where numpy
        took ~6.5)."""
        _, dtypes = _schema(self.keys, self.kinds)
        return column_entries(self.ids.tolist(), self.keys, self.kinds, dtypes, self.words)  # type: ignore[no-any-return]


class Block(NamedTuple):
    """The infos of consecutive envs ``start`` .. ``start + size - 1`` in Gymnasium's vector form, as one vector env
    returned them for its sub-envs (a hosted unit, :mod:`shoal.vector.hosted`): merged a key at a time
    (:func:`add_block`), not taken apart into a dict per env and batched back, which cost a unit of 2048 sub-envs with
    one info ~10 times its step."""

    start: int
    size: int
    info: dict[str, Any]


Entry = Union[tuple[int, dict[str, Any]], Finals, Block]
"""An info entry: one env's info, the :class:`Finals` of several, or the :class:`Block` of several."""
Received = Union[Entry, Columns]
"""An info entry as the calling process may receive it: an :data:`Entry`, or the :class:`Columns` of several envs."""


def each(entries: Iterable[Received]) -> Iterator[tuple[int, dict[str, Any]] | Finals]:
    """``entries`` with each :class:`Columns` and :class:`Block` given as the ``(env_id, info)`` entries it holds
    (a block's envs without infos left out)."""
    for entry in entries:
        kind = type(entry)
        if kind is Columns:
            yield from entry.entries()  # type: ignore[union-attr]
        elif kind is Block:
            block: Block = entry  # type: ignore[assignment]
            rows = unbatch_info(block.info, block.size)
            yield from ((block.start + j, row) for j, row in enumerate(rows) if row)
        else:
            yield entry  # type: ignore[misc]


class InfoParts(NamedTuple):
    """A batch's infos as they came, before :func:`merge_infos` puts them in Gymnasium's vector form: for an adapter
    that hands them out per env (SB3's ``infos[i]``), which would otherwise take that form apart again."""

    entries: list[Received]
    """The envs' info entries, in order (:func:`each` gives them as :data:`Entry` s)."""
    ids: np.ndarray | None
    """The batch's envs (None: all, in order; the entries' env ids are then their rows)."""
    arrays: dict[str, np.ndarray]
    """Info arrays, a row per env of the batch (an engine's, ``steps_taken``, ``env_id``)."""


def by_env(parts: InfoParts, n: int) -> tuple[list[dict[str, Any]], list[Finals]]:
    """A batch's infos as adapters hand them out, one dict per env of the batch (``n``), in batch order, each
    entry's info copied (:func:`owned`); and the batch's :class:`Finals`. (Its info arrays are left to the caller.)"""
    rows = None if parts.ids is None else {e: r for r, e in enumerate(parts.ids.tolist())}
    infos: list[dict[str, Any]] = [{} for _ in range(n)]
    finals: list[Finals] = []
    for entry in each(parts.entries):
        if isinstance(entry, Finals):
            finals.append(entry)
        else:
            env, info = entry
            infos[env if rows is None else rows[env]].update(owned(info))  # (a block's rows are new dicts already:
            # copied once more here, on a path that makes a dict per env anyway)
    return infos, finals


def owned(info: dict[str, Any]) -> dict[str, Any]:
    """A new dict of ``info``'s values, arrays copied and dicts made anew (what Gymnasium's vector form copies): an
    env may hand out the info dict it keeps, and change it in its next ``step`` or ``reset``."""
    if not info:
        return {}
    return {
        key: value.copy() if isinstance(value, np.ndarray) else owned(value) if isinstance(value, dict) else value
        for key, value in info.items()
    }


def add_finals(
    infos: dict[str, Any], finals: Finals, rows: np.ndarray, size: int, values: Iterable[Any]
) -> dict[str, Any]:
    """Add ``finals`` at ``rows`` (one per env) of the vector ``infos``, as :func:`add_info` of each env's
    ``{"final_obs": obs, "final_info": info}`` would, ``values`` being its final observations one by one; returns
    ``infos``."""
    obs = infos.get("final_obs")
    if obs is None:
        obs = np.empty(size, dtype=object)
    obs[rows] = np.fromiter(values, dtype=object, count=len(rows))  # not obs[rows] = a list: numpy would read
    _mark(infos, "final_obs", obs, rows, size)  # equal-shaped observations as one array and broadcast it
    final_info = infos.get("final_info", {})
    for row, info in zip(rows.tolist(), finals.infos):
        add_info(final_info, info, row, size)
    _mark(infos, "final_info", final_info, rows, size)
    return infos


def _mark(infos: dict[str, Any], key: str, value: Any, rows: Any, size: int) -> None:
    """Set ``infos[key]`` to ``value`` and its mask ``_key`` at ``rows`` (made on first use)."""
    mask = infos.get(f"_{key}")
    if mask is None:
        mask = np.zeros(size, dtype=np.bool_)
    mask[rows] = True
    infos[key], infos[f"_{key}"] = value, mask


def merge_infos(
    entries: Iterable[Received], size: int, row_of: dict[int, int] | None = None,
    records: Callable[[np.ndarray], Iterable[Any]] = iter,
) -> dict[str, Any]:
    """Vector infos from info entries, applied in order (an env may appear more than once); ``row_of``: each
    env's row (None: rows are env ids); ``records``: reads final observations sent as records one by one.

    Each env's info is added by :func:`add_info` (in C), and each :class:`Columns` a key at a time where that is the
    same (:func:`_add_columns`). Merging plain infos a key at a time, as this did before :func:`add_info` was
    written in C, had become the slower way: 8 infos of one float took 4.7 us so against 1.0, 64 MuJoCo infos (four
    numpy floats) 29 against 21 (and 256 of eight floats 158 against 166)."""
    infos: dict[str, Any] = {}
    for entry in entries:
        kind = type(entry)
        if kind is tuple:
            env_id, info = entry  # type: ignore[misc]
            add_info(infos, info, env_id if row_of is None else row_of[env_id], size)
        elif kind is Columns:
            if not _add_columns(infos, entry, size, row_of):  # type: ignore[arg-type]
                for env_id, info in entry.entries():  # type: ignore[union-attr]
                    add_info(infos, info, env_id if row_of is None else row_of[env_id], size)
        elif kind is Block:
            block: Block = entry  # type: ignore[assignment]
            add_block(infos, block.info, _block_rows(block.start, block.size, row_of), block.size, size)
        else:
            finals: Finals = entry  # type: ignore[assignment]
            ids = finals.ids if row_of is None else np.array([row_of[e] for e in finals.ids.tolist()], dtype=np.intp)
            obs = finals.obs
            assert obs is not None, "final observations left in the buffers (read them with _worker.parked_finals)"
            add_finals(infos, finals, ids, size, obs if isinstance(obs, list) else records(obs))
    return infos


def _add_columns(infos: dict[str, Any], columns: Columns, size: int, row_of: dict[int, int] | None) -> bool:
    """Add the infos of ``columns`` to the vector ``infos`` a key at a time (in C: ``_infos.add_columns``), which is
    what adding them env by env gives where each key is new to ``infos`` or holds the array its values' type makes (so
    they go in unchanged, not cast), and each mask is new or an array of a row per env; False, with nothing changed,
    elsewhere. (A key that is another's mask name, ``a`` and ``_a``, comes out the same: each row's cells are written
    in the same order.) A group of four MuJoCo infos (four numpy floats each) comes so in ~1.4 us (in numpy, a key at
    a time: ~5.8; as four dicts through :func:`add_info`: ~2.1, after ~6.5 to make them)."""
    keys, kinds, ids = columns.keys, columns.kinds, columns.ids
    schema = _schema(keys, kinds)
    rows = (int(ids[0]) if len(ids) else 0) if row_of is None else [row_of[env] for env in ids.tolist()]
    return add_columns(infos, keys, *schema, columns.words, rows, size)  # type: ignore[no-any-return]


_SCHEMAS: dict[tuple[tuple[Any, ...], tuple[type, ...]], tuple[tuple[str, ...], tuple[np.dtype, ...]]] = {}
"""Each :class:`Columns` schema's (keys and types) mask names and array dtypes (:func:`_schema`)."""


def _schema(keys: tuple[Any, ...], kinds: tuple[type, ...]) -> tuple[tuple[str, ...], tuple[np.dtype, ...]]:
    """The mask names of ``keys`` (``f"_{key}"`` each) and the dtypes of the arrays values of ``kinds`` make
    (Gymnasium's ``np.dtype(type(value))``), remembered (a few schemas a vector env; forgotten past 256)."""
    schema = _SCHEMAS.get((keys, kinds))
    if schema is not None:
        return schema
    schema = tuple(f"_{key}" for key in keys), tuple(np.dtype(kind) for kind in kinds)
    if len(_SCHEMAS) >= 256:
        _SCHEMAS.clear()
    _SCHEMAS[keys, kinds] = schema
    return schema


def _block_rows(start: int, count: int, row_of: dict[int, int] | None) -> slice | np.ndarray:
    """The rows of envs ``start`` .. ``start + count - 1`` in a batch (``row_of``: each env's row; None: env ids):
    a slice where they are consecutive there (a unit's envs come in order within its group's answer)."""
    if row_of is None:
        return slice(start, start + count)
    rows = np.fromiter((row_of[env] for env in range(start, start + count)), np.intp, count)
    if count and (np.diff(rows) == 1).all():
        return slice(int(rows[0]), int(rows[0]) + count)
    return rows


def add_block(infos: dict[str, Any], info: dict[str, Any], rows: slice | np.ndarray, n: int, size: int,
              among: np.ndarray | None = None) -> None:
    """Add ``info``, in Gymnasium's vector form for ``n`` envs (checked: :func:`check_block`), at ``rows`` (one per
    env) of the vector ``infos`` of a batch of ``size``, as :func:`add_info` of each env's :func:`unbatch_info` dict
    would: a key at a time where that gives the same arrays (its values in a numeric or bool array, and ``infos``
    without the key or holding an array of that dtype and shape; nested dicts alike), else that key env by env.
    ``among``: the envs whose values count (a mask; None: all), the envs of a nested dict's key."""
    for key, value in info.items():
        if _is_mask(info, key):
            continue  # a mask
        mask = info.get(f"_{key}")
        if mask is None:
            present = among
        else:
            present = np.asarray(mask, np.bool_) if among is None else among & np.asarray(mask, np.bool_)
        if present is not None:
            count = np.count_nonzero(present)
            if not count:
                continue
            present = None if count == n else present
        held = infos.get(key)
        if isinstance(value, dict) and (held is None or isinstance(held, dict)):
            nested = {} if held is None else held
            add_block(nested, value, rows, n, size, present)
            infos[key] = nested
        elif (isinstance(value, np.ndarray) and value.dtype.kind in "biufc" and key not in ("final_obs", "final_info")
              and (held is None or type(held) is np.ndarray and held.dtype == value.dtype
                   and held.shape[1:] == value.shape[1:])):
            array = np.zeros((size, *value.shape[1:]), value.dtype) if held is None else held
            _put(array, rows, present, value)
            infos[key] = array
        else:
            column = unbatch_info({key: value}, n)
            for j in range(n) if present is None else np.flatnonzero(present).tolist():
                add_info(infos, column[j], rows.start + j if isinstance(rows, slice) else int(rows[j]), size)
            continue  # (add_info set the mask)
        marks = infos.get(f"_{key}")
        if marks is None:
            marks = infos[f"_{key}"] = np.zeros(size, dtype=np.bool_)
        _put(marks, rows, present, True)


def _is_mask(info: dict[str, Any], key: Any) -> bool:
    """Whether ``info[key]`` is another key's mask (``_a`` where ``info`` has ``a``)."""
    return isinstance(key, str) and key.startswith("_") and key[1:] in info


def _mask(info: dict[str, Any], key: Any, value: Any, n: int) -> Any:
    """The mask ``info["_" + key]`` of which of the ``n`` envs have ``info[key]`` (None where it has none: all), or a
    ValueError where the mask or the value is not one per env."""
    mask = info.get(f"_{key}")
    if mask is not None and np.shape(mask) != (n,):
        raise ValueError(f"info[{'_' + str(key)!r}] is not one bool per sub-env ({n}): shape {np.shape(mask)}")
    if not isinstance(value, dict) and (isinstance(value, (str, bytes)) or _length(value) != n):
        raise ValueError(f"info[{key!r}] is not one value per sub-env ({n}): {type(value).__name__}")
    return mask


def _length(value: Any) -> int | None:
    """``len(value)``, or None where it has none (a number, a 0-d array)."""
    try:
        return len(value)
    except TypeError:
        return None


def check_block(info: dict[str, Any], n: int) -> None:
    """A ValueError where ``info`` is not in Gymnasium's vector form for ``n`` envs (each value, and each mask, one
    per env; nested dicts alike): what :func:`add_block` merges without a check of its own."""
    for key, value in info.items():
        if _is_mask(info, key):
            continue
        _mask(info, key, value, n)
        if isinstance(value, dict):
            check_block(value, n)


def _put(array: np.ndarray, rows: slice | np.ndarray, present: np.ndarray | None, values: Any) -> None:
    """Write ``values`` (one per env of a block, or one for all) at the rows of the envs ``present`` (a mask; None:
    all) among the block's ``rows``: through a view where the rows are a slice, with no index array made."""
    if present is None:
        array[rows] = values
    elif isinstance(rows, slice):
        view = array[rows]
        np.copyto(view, values, where=present if view.ndim == 1 else present.reshape(-1, *[1] * (view.ndim - 1)))
    else:
        array[rows[present]] = values[present] if isinstance(values, np.ndarray) else values


def unbatch_info(info: dict, n: int) -> list[dict]:
    """Gymnasium's vector form of infos (``info[key][j]`` where ``info["_" + key][j]``; nested dicts alike) as one
    dict per sub-env, each value of the type that Gymnasium's vector form batches back into the same array."""
    rows: list[dict] = [{} for _ in range(n)]
    for key, value in info.items():
        if _is_mask(info, key):
            continue
        mask = _mask(info, key, value, n)
        present = range(n) if mask is None else np.flatnonzero(mask).tolist()
        if isinstance(value, dict):
            nested = unbatch_info(value, n)
            for j in present:
                rows[j][key] = nested[j]
        elif isinstance(value, np.ndarray) and value.dtype == np.bool_:  # (a Python bool made it: np.bool_ makes an
            for j in present:  # object array there, as any other type that is not a number)
                rows[j][key] = bool(value[j])
        elif isinstance(value, np.ndarray) and value.ndim > 1:
            for j in present:
                rows[j][key] = value[j].copy()
        else:
            for j in present:
                rows[j][key] = value[j]
    return rows


def per_env(
    parts: InfoParts, n: int, records: Callable[[np.ndarray], Iterable[Any]]
) -> tuple[list[dict[str, Any]], dict[int, tuple[Any, dict[str, Any]]]]:
    """A synchronous batch's infos (all ``n`` envs) as adapters hand them out (SB3's and SuperSuit's form): one dict
    per env (its entry's info, then its row of each info array), and by env, each ended episode's final observation
    and the info of its last step.
    ``records``: reads final observations sent as records one by one.

    Values are copied where Gymnasium's vector form would have copied them (arrays, nested dicts): a serial env's
    info may be the very dict it keeps."""
    infos, ended = by_env(parts, n)
    finals: dict[int, tuple[Any, dict[str, Any]]] = {}
    for entry in ended:
        obs = entry.obs
        assert obs is not None, "final observations left in the buffers"
        values = obs if isinstance(obs, list) else records(obs)
        for env, last, info in zip(entry.ids.tolist(), values, entry.infos or repeat({})):
            finals[env] = last, owned(info)
    for key, array in parts.arrays.items():
        for i, info in enumerate(infos):
            info[key] = array[i]
    return infos, finals

