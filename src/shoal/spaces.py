"""Structured spaces as fixed-size records: flatten, unflatten and batch them with numpy alone.

Every fixed-size Gymnasium space (Box, Discrete, MultiDiscrete, MultiBinary and any nesting of Dict and Tuple
around them) maps onto one numpy dtype: a plain dtype with a shape for the leaves, a structured dtype for the
containers. A batch of ``n`` values is then one array of ``n`` records, which is what lives in shared memory: an env
writes its observation into its own record, and the batch is read back either

* Gymnasium-shaped (a dict/tuple of arrays, each a strided view into the records; :meth:`Layout.read`), or
* flat (:meth:`Layout.flat`: ``(n, D)`` of the common leaf dtype, or ``(n, bytes)`` of uint8 when dtypes differ),
  with :meth:`Layout.unflatten` turning a flat batch back into Gymnasium shape as views, without a copy.

This is PufferLib's "emulation" with numpy structured dtypes doing the bookkeeping.

Example:
    >>> from gymnasium import spaces
    >>> space = spaces.Dict({"pos": spaces.Box(-1, 1, (2,)), "id": spaces.Discrete(3)})
    >>> layout = Layout(space)
    >>> batch = layout.empty(4)
    >>> layout.write(batch, 0, {"pos": np.ones(2, np.float32), "id": 2})
    >>> layout.read(batch)["id"][0]
    np.int64(2)
    >>> layout.flat(batch).shape
    (4, 16)
"""

from __future__ import annotations

from functools import singledispatch
from typing import Any, Callable

import numpy as np
from gymnasium import spaces

from shoal.errors import ConfigError

__all__ = ["Layout", "record_dtype", "is_flattenable"]


@singledispatch
def record_dtype(space: spaces.Space) -> np.dtype:
    """The numpy dtype of one value of ``space`` stored as a fixed-size record."""
    raise ConfigError(
        f"{type(space).__name__} has no fixed size, so it cannot live in a shared-memory record; "
        f"expected Box, Discrete, MultiDiscrete, MultiBinary or Dict/Tuple of those, got {space}"
    )


@record_dtype.register
def _(space: spaces.Box) -> np.dtype:
    return np.dtype((space.dtype, space.shape))


@record_dtype.register
def _(space: spaces.Discrete) -> np.dtype:
    return np.dtype(space.dtype)


@record_dtype.register
def _(space: spaces.MultiDiscrete) -> np.dtype:
    return np.dtype((space.dtype, space.shape))


@record_dtype.register
def _(space: spaces.MultiBinary) -> np.dtype:
    return np.dtype((space.dtype, space.shape))


@record_dtype.register
def _(space: spaces.Dict) -> np.dtype:
    return np.dtype([(key, record_dtype(sub)) for key, sub in space.spaces.items()])


@record_dtype.register
def _(space: spaces.Tuple) -> np.dtype:
    return np.dtype([(f"f{i}", record_dtype(sub)) for i, sub in enumerate(space.spaces)])


def is_flattenable(space: spaces.Space) -> bool:
    """Whether ``space`` has a fixed-size record (and so can live in shared memory)."""
    try:
        record_dtype(space)
    except ConfigError:
        return False
    return True


def _leaf_dtypes(dtype: np.dtype) -> list[np.dtype]:
    if dtype.fields is None:
        return [dtype.subdtype[0] if dtype.subdtype else dtype]
    return [leaf for name in dtype.names for leaf in _leaf_dtypes(dtype.fields[name][0])]


@singledispatch
def _read(space: spaces.Space, batch: np.ndarray, copy: bool) -> Any:
    return batch.copy() if copy else batch


@_read.register
def _(space: spaces.Dict, batch: np.ndarray, copy: bool) -> Any:
    return {key: _read(sub, batch[key], copy) for key, sub in space.spaces.items()}


@_read.register
def _(space: spaces.Tuple, batch: np.ndarray, copy: bool) -> Any:
    return tuple(_read(sub, batch[f"f{i}"], copy) for i, sub in enumerate(space.spaces))


@singledispatch
def _item(space: spaces.Space, batch: np.ndarray, index: int) -> Any:
    return batch[index]


@_item.register
def _(space: spaces.Dict, batch: np.ndarray, index: int) -> Any:
    return {key: _item(sub, batch[key], index) for key, sub in space.spaces.items()}


@_item.register
def _(space: spaces.Tuple, batch: np.ndarray, index: int) -> Any:
    return tuple(_item(sub, batch[f"f{i}"], index) for i, sub in enumerate(space.spaces))


@singledispatch
def _leaf_views(space: spaces.Space, batch: np.ndarray, path: tuple) -> list[tuple[tuple, np.ndarray]]:
    """``(path, view)`` for every leaf: ``value[path[0]][path[1]]...`` is stored in ``view``."""
    return [(path, batch)]


@_leaf_views.register
def _(space: spaces.Dict, batch: np.ndarray, path: tuple) -> list[tuple[tuple, np.ndarray]]:
    return [leaf for k, sub in space.spaces.items() for leaf in _leaf_views(sub, batch[k], path + (k,))]


@_leaf_views.register
def _(space: spaces.Tuple, batch: np.ndarray, path: tuple) -> list[tuple[tuple, np.ndarray]]:
    return [leaf for i, sub in enumerate(space.spaces) for leaf in _leaf_views(sub, batch[f"f{i}"], path + (i,))]


def _write_leaves(leaves: list[tuple[tuple, np.ndarray]], index: Any, value: Any) -> None:
    for path, view in leaves:
        leaf = value
        for key in path:
            leaf = leaf[key]
        view[index] = leaf


class Layout:
    """How values of one space are stored as records, one record per env.

    Args:
        space: a fixed-size Gymnasium space (see the module docstring).

    Raises:
        ConfigError: the space has no fixed size (Text, Graph, Sequence, custom spaces).
    """

    def __init__(self, space: spaces.Space) -> None:
        self.space = space
        self.dtype = record_dtype(space)
        self.structured = self.dtype.fields is not None
        # A plain leaf is stored as an (n, *shape) array of its dtype; a container as an (n,) structured array.
        if self.structured:
            self.item_dtype, self.item_shape = self.dtype, ()
        elif self.dtype.subdtype is not None:
            self.item_dtype, self.item_shape = self.dtype.subdtype
        else:
            self.item_dtype, self.item_shape = self.dtype, ()
        leaves = _leaf_dtypes(self.dtype)
        uniform = all(leaf == leaves[0] for leaf in leaves)
        # Records are packed (no padding), so a record of equal leaves is a flat run of that dtype.
        self.flat_dtype = leaves[0] if uniform else np.dtype(np.uint8)
        self.flat_size = self.dtype.itemsize // self.flat_dtype.itemsize

    @property
    def nbytes(self) -> int:
        """Bytes of one record."""
        return self.dtype.itemsize

    def empty(self, n: int) -> np.ndarray:
        """A new zeroed batch of ``n`` records."""
        return np.zeros((n, *self.item_shape), self.item_dtype)

    def view(self, buffer: Any, n: int, offset: int = 0) -> np.ndarray:
        """A batch of ``n`` records over ``buffer`` (anything exposing the buffer protocol), without a copy."""
        return np.ndarray((n, *self.item_shape), self.item_dtype, buffer=buffer, offset=offset)

    def read(self, batch: np.ndarray, copy: bool = False) -> Any:
        """The batch in Gymnasium's batched shape: views into ``batch``, or contiguous copies of each leaf."""
        if not self.structured:
            return batch.copy() if copy else batch
        return _read(self.space, batch, copy)

    def item(self, batch: np.ndarray, index: int) -> Any:
        """The single value at row ``index``, Gymnasium-shaped (views into ``batch``)."""
        return _item(self.space, batch, index)

    def write(self, batch: np.ndarray, index: Any, value: Any) -> None:
        """Store ``value`` (one value, or a batch when ``index`` selects several rows) at ``batch[index]``."""
        if self.structured:
            _write_leaves(_leaf_views(self.space, batch, ()), index, value)
        else:
            batch[index] = value

    def row_writer(self, batch: np.ndarray) -> Callable[[int, Any], None]:
        """A fast ``write(row, value)`` for one value at a time into ``batch``, with every leaf's view made once.

        What an engine calls per env per step: no dispatch and no field views built per call.
        """
        if not self.structured:

            def write_plain(row: int, value: Any) -> None:
                batch[row] = value

            return write_plain
        leaves = _leaf_views(self.space, batch, ())

        def write_structured(row: int, value: Any) -> None:
            _write_leaves(leaves, row, value)

        return write_structured

    def flat(self, batch: np.ndarray) -> np.ndarray:
        """The batch as a 2-D ``(n, flat_size)`` array of ``flat_dtype``, a view when ``batch`` is contiguous."""
        n = batch.shape[0]
        return np.ascontiguousarray(batch).view(self.flat_dtype).reshape(n, self.flat_size)

    def unflatten(self, flat: np.ndarray) -> Any:
        """Undo :meth:`flat`: a ``(n, flat_size)`` array back to Gymnasium shape, as views (no copy)."""
        flat = np.asarray(flat)
        if flat.ndim != 2 or flat.shape[1] != self.flat_size or flat.dtype != self.flat_dtype:
            raise ConfigError(
                f"expected a flat batch of shape (n, {self.flat_size}) and dtype {self.flat_dtype}, "
                f"got shape {flat.shape} and dtype {flat.dtype}"
            )
        records = np.ascontiguousarray(flat).view(self.item_dtype)
        if self.structured:
            return self.read(records[:, 0])
        return records.reshape(flat.shape[0], *self.item_shape)

    def __repr__(self) -> str:
        return f"Layout({self.space}, nbytes={self.nbytes})"
