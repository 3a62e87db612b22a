"""Merging per-env info dicts into Gymnasium's vector form: a dict of arrays, each key with a ``_key`` mask.

The rules are Gymnasium's ``VectorEnv._add_info`` (so results compare equal to ``SyncVectorEnv``'s), with the batch
size passed explicitly: in an asynchronous batch the arrays have ``batch_size`` rows, not ``num_envs``.
"""

from __future__ import annotations

from typing import Any, Iterable

import numpy as np


def add_info(infos: dict[str, Any], info: dict[str, Any], index: int, size: int) -> dict[str, Any]:
    """Add one env's ``info`` at row ``index`` of the vector ``infos`` (arrays of ``size`` rows); returns ``infos``."""
    for key, value in info.items():
        if key == "final_obs":
            array = infos.get(key)
            if array is None:
                array = np.full(size, fill_value=None, dtype=object)
            array[index] = value
        elif isinstance(value, dict):
            array = add_info(infos.get(key, {}), value, index, size)
        else:
            array = infos.get(key)
            if array is None:
                if type(value) in (int, float, bool) or issubclass(type(value), np.number):
                    array = np.zeros(size, dtype=type(value))
                elif isinstance(value, np.ndarray):
                    array = np.zeros((size, *value.shape), dtype=value.dtype)
                else:
                    array = np.full(size, fill_value=None, dtype=object)
            array[index] = value
        mask = infos.get(f"_{key}")
        if mask is None:
            mask = np.zeros(size, dtype=np.bool_)
        mask[index] = True
        infos[key], infos[f"_{key}"] = array, mask
    return infos


def merge_infos(entries: Iterable[tuple[int, dict[str, Any]]], size: int) -> dict[str, Any]:
    """Vector infos from ``(row, info)`` pairs, applied in order (a row may appear more than once)."""
    infos: dict[str, Any] = {}
    for row, info in entries:
        add_info(infos, info, row, size)
    return infos
