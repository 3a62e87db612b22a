"""Merging per-env info dicts into Gymnasium's vector form: a dict of arrays, each key with a ``_key`` mask.

The rules are Gymnasium's ``VectorEnv._add_info`` (so results compare equal to ``SyncVectorEnv``'s), with the batch
size passed explicitly: in an asynchronous batch the arrays have ``batch_size`` rows, not ``num_envs``. (An object
array from ``np.empty`` holds None in every row, as Gymnasium's ``np.full(size, None)`` does, in a quarter of the
time.)
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, NamedTuple, Union, cast

import numpy as np


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


Entry = Union[tuple[int, dict[str, Any]], Finals]
"""An info entry: one env's info, or the :class:`Finals` of several."""


class InfoParts(NamedTuple):
    """A batch's infos as they came, before :func:`merge_infos` puts them in Gymnasium's vector form: for an adapter
    that hands them out per env (SB3's ``infos[i]``), which would otherwise take that form apart again."""

    entries: list[Entry]
    """The envs' info entries, in order."""
    ids: np.ndarray | None
    """The batch's envs (None: all, in order; the entries' env ids are then their rows)."""
    arrays: dict[str, np.ndarray]
    """Info arrays, a row per env of the batch (an engine's, ``steps_taken``, ``env_id``)."""


def owned(info: dict[str, Any]) -> dict[str, Any]:
    """A new dict of ``info``'s values, arrays copied and dicts made anew (what Gymnasium's vector form copies): an
    env may hand out the info dict it keeps, and change it in its next ``step`` or ``reset``."""
    if not info:
        return {}
    return {
        key: value.copy() if isinstance(value, np.ndarray) else owned(value) if isinstance(value, dict) else value
        for key, value in info.items()
    }


def add_info(infos: dict[str, Any], info: dict[str, Any], index: int, size: int) -> dict[str, Any]:
    """Add one env's ``info`` at row ``index`` of the vector ``infos`` (arrays of ``size`` rows); returns ``infos``."""
    for key, value in info.items():
        if key == "final_obs":
            array = infos.get(key)
            if array is None:
                array = np.empty(size, dtype=object)
            array[index] = value
        elif isinstance(value, dict):
            array = add_info(infos.get(key, {}), value, index, size)
        else:
            array = infos.get(key)
            if array is None:
                if _numeric(type(value)):
                    array = np.zeros(size, dtype=type(value))
                elif isinstance(value, np.ndarray):
                    array = np.zeros((size, *value.shape), dtype=value.dtype)
                else:
                    array = np.empty(size, dtype=object)
            array[index] = value
        _mark(infos, key, array, index, size)
    return infos


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


def _numeric(kind: type) -> bool:
    """Whether values of type ``kind`` go into an array of that type (Gymnasium's rule: Python's int, float, bool
    and numpy's numbers; anything else but arrays and dicts into an object array)."""
    return kind in (int, float, bool) or issubclass(kind, np.number)


def _mark(infos: dict[str, Any], key: str, value: Any, rows: Any, size: int) -> None:
    """Set ``infos[key]`` to ``value`` and its mask ``_key`` at ``rows`` (made on first use)."""
    mask = infos.get(f"_{key}")
    if mask is None:
        mask = np.zeros(size, dtype=np.bool_)
    mask[rows] = True
    infos[key], infos[f"_{key}"] = value, mask


def merge_infos(
    entries: Iterable[Entry], size: int, row_of: dict[int, int] | None = None,
    records: Callable[[np.ndarray], Iterable[Any]] = iter,
) -> dict[str, Any]:
    """Vector infos from info entries, applied in order (an env may appear more than once); ``row_of``: each
    env's row (None: rows are env ids); ``records``: reads final observations sent as records one by one."""
    entries = entries if isinstance(entries, list) else list(entries)
    columns = _by_key(entries, size, row_of)
    if columns is not None:
        return columns
    infos: dict[str, Any] = {}
    for entry in entries:
        if isinstance(entry, Finals):
            ids = entry.ids if row_of is None else np.array([row_of[e] for e in entry.ids.tolist()], dtype=np.intp)
            obs = entry.obs
            assert obs is not None, "final observations left in the buffers (read them with _worker.parked_finals)"
            add_finals(infos, entry, ids, size, obs if isinstance(obs, list) else records(obs))
        else:
            env_id, info = entry
            add_info(infos, info, env_id if row_of is None else row_of[env_id], size)
    return infos


BY_KEY_FROM = 8
"""The fewest entries :func:`merge_infos` merges a key at a time (MuJoCo's infos, four numpy floats an env: 4 envs'
took 6.5 us env by env and 7.7 a key at a time, 8 envs' 10.7 and 9.0, 16 envs' 19 and 11, 64 envs' 70 and 26)."""


def _by_key(entries: list[Entry], size: int, row_of: dict[int, int] | None) -> dict[str, Any] | None:
    """What :func:`merge_infos` gives, built a key at a time, where that is the same as env by env: one entry per
    env, at least :data:`BY_KEY_FROM`, every info with the same keys, each key's values of one numeric scalar type
    (the type :func:`add_info` makes its array of). None otherwise."""
    if len(entries) < BY_KEY_FROM or any(type(entry) is not tuple for entry in entries):  # (not a Finals either)
        return None
    plain = cast("list[tuple[int, dict[str, Any]]]", entries)
    first = plain[0][1]
    keys = first.keys()
    if not keys or "final_obs" in keys or any(info.keys() != keys for _, info in plain):
        return None
    envs = [env for env, _ in plain]
    if len(set(envs)) != len(envs):
        return None
    rows = np.array(envs if row_of is None else [row_of[env] for env in envs], dtype=np.intp)
    infos: dict[str, Any] = {}
    for key, value in first.items():
        kind = type(value)
        if not _numeric(kind):
            return None
        values = [info[key] for _, info in plain]
        if any(type(v) is not kind for v in values):
            return None
        array = np.zeros(size, dtype=kind)
        array[rows] = values
        mask = np.zeros(size, dtype=np.bool_)
        mask[rows] = True
        infos[key], infos[f"_{key}"] = array, mask
    return infos
