"""Structured spaces as fixed-size records: flatten, unflatten and batch them with numpy alone.

Every fixed-size Gymnasium space (Box, Discrete, MultiDiscrete, MultiBinary and any nesting of Dict and Tuple
around them) maps onto one numpy dtype: a plain dtype with a shape for the leaves, a structured dtype for the
containers. A batch of ``n`` values is then one array of ``n`` records, which is what lives in shared memory: an env
writes its observation into its own record, and the batch is read back either

* Gymnasium-shaped (a dict/tuple of arrays, each a strided view into the records; :meth:`Layout.read`), or
* flat (:meth:`Layout.flat`: ``(n, D)`` of the common leaf dtype, or ``(n, bytes)`` of uint8 when dtypes differ),
  with :meth:`Layout.unflatten` turning a flat batch back into Gymnasium shape as views, without a copy.

This is PufferLib's "emulation" with numpy structured dtypes doing the bookkeeping.

Spaces without a fixed size (Text, Graph, Sequence, OneOf, any custom ``Space`` subclass) are *loose* leaves: they
have no field in the record, and their values travel as Python objects beside it (``Layout.loose`` lists where they
are). A Dict of a Box and a Text keeps the Box in the record and carries only the strings; a batch of a loose leaf
reads as a tuple of values, which is Gymnasium's batched form of those spaces (``batch_space`` gives a ``Tuple``).

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

import copy as copying
from functools import singledispatch
from typing import Any, Callable, Iterable, Sequence

import numpy as np
from gymnasium import spaces

from shoal.errors import ConfigError

__all__ = ["Layout", "record_dtype", "is_flattenable"]

Path = tuple
"""Where a leaf sits in a value: ``value[path[0]][path[1]]...`` (Dict keys and Tuple indices)."""

def path_text(path: Path) -> str:
    """``path`` as it indexes a value: ``['pos'][0]``."""
    return "".join(f"[{key!r}]" for key in path)


FIXED_LEAVES = (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)
"""The leaf spaces with a fixed-size record."""


@singledispatch
def _split(space: spaces.Space, path: Path) -> tuple[np.dtype | None, list[tuple[Path, spaces.Space]]]:
    """The record dtype of ``space``'s fixed-size part (None: nothing of it is fixed) and its loose leaves."""
    return None, [(path, space)]


@_split.register
def _(space: spaces.Box, path: Path) -> tuple[np.dtype | None, list]:
    return np.dtype((space.dtype, space.shape)), []


@_split.register
def _(space: spaces.Discrete, path: Path) -> tuple[np.dtype | None, list]:
    return np.dtype(space.dtype), []


@_split.register
def _(space: spaces.MultiDiscrete, path: Path) -> tuple[np.dtype | None, list]:
    return np.dtype((space.dtype, space.shape)), []


@_split.register
def _(space: spaces.MultiBinary, path: Path) -> tuple[np.dtype | None, list]:
    return np.dtype((space.dtype, space.shape)), []


def _split_fields(items: Sequence[tuple[Any, str, spaces.Space]], path: Path) -> tuple[np.dtype, list]:
    """A container's fields (``(key in the value, field name, subspace)``): every sub-container keeps a field,
    empty if all its leaves are loose, so the record's shape follows the space's."""
    fields, loose = [], []
    for key, name, sub in items:
        dtype, sub_loose = _split(sub, path + (key,))
        loose += sub_loose
        if dtype is not None:
            fields.append((name, dtype))
    return np.dtype(fields), loose


@_split.register
def _(space: spaces.Dict, path: Path) -> tuple[np.dtype | None, list]:
    return _split_fields([(key, key, sub) for key, sub in space.spaces.items()], path)


@_split.register
def _(space: spaces.Tuple, path: Path) -> tuple[np.dtype | None, list]:
    return _split_fields([(i, f"f{i}", sub) for i, sub in enumerate(space.spaces)], path)


def record_dtype(space: spaces.Space) -> np.dtype:
    """The numpy dtype of one value of ``space`` stored as a fixed-size record (every leaf fixed-size)."""
    dtype, loose = _split(space, ())
    if loose:
        path, leaf = loose[0]
        where = path_text(path) or "the space itself"
        raise ConfigError(
            f"{type(leaf).__name__} at {where} has no fixed size, so it cannot be flattened into a record; expected "
            f"Box, Discrete, MultiDiscrete, MultiBinary or Dict/Tuple of those, got {leaf}"
        )
    assert dtype is not None  # only a loose leaf has none
    return dtype


def is_flattenable(space: spaces.Space) -> bool:
    """Whether every leaf of ``space`` has a fixed size (so a value is one record, and can be flattened)."""
    return not _split(space, ())[1]


def _leaf_dtypes(dtype: np.dtype) -> list[np.dtype]:
    if dtype.fields is None:
        return [dtype.subdtype[0] if dtype.subdtype else dtype]
    return [leaf for name in dtype.names or () for leaf in _leaf_dtypes(dtype.fields[name][0])]


def _field(batch: np.ndarray | None, name: str) -> np.ndarray | None:
    return batch[name] if batch is not None and name in (batch.dtype.names or ()) else None


Reader = Callable[[Any, Callable[[np.ndarray], Any], Sequence[Any]], Any]
"""``reader(records, leaf, loose)``: a value (or batch) of a space from its records, ``leaf(array)`` making each
fixed-size leaf's value from its field and ``loose[k]`` being the value of loose leaf ``k``."""


def _reader(space: spaces.Space, path: Path, loose_index: dict[Path, int]) -> Reader:
    """The space's :data:`Reader`, built once per Layout: reading a batch then costs one call per leaf and one
    comprehension per container (no dispatch, no paths built per read)."""
    if path in loose_index:
        k = loose_index[path]
        return lambda records, leaf, loose: loose[k]
    if isinstance(space, (spaces.Dict, spaces.Tuple)):
        is_dict = isinstance(space, spaces.Dict)
        items: Iterable[tuple[Any, spaces.Space]] = (
            space.spaces.items() if isinstance(space, spaces.Dict) else enumerate(space.spaces)
        )
        children = [
            (key, None if path + (key,) in loose_index else (key if is_dict else f"f{key}"),
             _reader(sub, path + (key,), loose_index))
            for key, sub in items
        ]
        if is_dict:
            return lambda records, leaf, loose: {
                key: read(None if name is None else records[name], leaf, loose) for key, name, read in children
            }
        return lambda records, leaf, loose: tuple(
            read(None if name is None else records[name], leaf, loose) for _, name, read in children
        )
    return lambda records, leaf, loose: leaf(records)


def _copied(array: np.ndarray) -> np.ndarray:
    return array.copy()


def _as_is(array: np.ndarray) -> np.ndarray:
    return array


@singledispatch
def _leaf_views(space: spaces.Space, batch: np.ndarray | None, path: Path) -> list[tuple[Path, np.ndarray]]:
    """``(path, view)`` for every fixed-size leaf: ``value[path[0]][path[1]]...`` is stored in ``view``."""
    return [] if batch is None or not isinstance(space, FIXED_LEAVES) else [(path, batch)]


@_leaf_views.register
def _(space: spaces.Dict, batch: np.ndarray | None, path: Path) -> list[tuple[Path, np.ndarray]]:
    return [leaf for k, sub in space.spaces.items() for leaf in _leaf_views(sub, _field(batch, k), path + (k,))]


@_leaf_views.register
def _(space: spaces.Tuple, batch: np.ndarray | None, path: Path) -> list[tuple[Path, np.ndarray]]:
    return [
        leaf for i, sub in enumerate(space.spaces) for leaf in _leaf_views(sub, _field(batch, f"f{i}"), path + (i,))
    ]


def _sizes(space: spaces.Space, path: Path) -> tuple[int, ...]:
    """How many keys or items each Dict or Tuple on ``path`` has, from ``space`` down."""
    sizes = []
    for key in path:
        sizes.append(len(space.spaces))  # type: ignore[attr-defined]
        space = space.spaces[key]  # type: ignore[attr-defined]
    return tuple(sizes)


_IMMUTABLE = frozenset({str, bytes, int, float, bool, type(None)})
"""Types of loose values that a copy of a batch may share with the engine's (nothing can change them)."""


def _at(value: Any, path: Path) -> Any:
    for key in path:
        value = value[key]
    return value


def _write_leaves(leaves: list[tuple[Path, np.ndarray]], index: Any, value: Any) -> None:
    for path, view in leaves:  # per env per step: the path walked inline (a call per leaf costs ~10%)
        leaf = value
        for key in path:
            leaf = leaf[key]
        view[index] = leaf


class Layout:
    """How values of one space are stored as records, one record per env, and which leaves travel beside them.

    Args:
        space: any Gymnasium space (see the module docstring for what lives in the record and what is loose).
    """

    def __init__(self, space: spaces.Space) -> None:
        self.space = space
        dtype, loose = _split(space, ())
        self.loose: list[tuple[Path, spaces.Space]] = loose
        """The leaves without a fixed size: ``(path, space)``, in the space's order."""
        self.loose_paths = [path for path, _ in loose]
        self._read = self._reader()
        self.dtype = np.dtype([]) if dtype is None else dtype
        self.structured = self.dtype.fields is not None
        # A plain leaf is stored as an (n, *shape) array of its dtype; a container as an (n,) structured array.
        if self.structured:
            self.item_dtype, self.item_shape = self.dtype, ()
        elif self.dtype.subdtype is not None:
            self.item_dtype, self.item_shape = self.dtype.subdtype
        else:
            self.item_dtype, self.item_shape = self.dtype, ()
        leaves = _leaf_dtypes(self.dtype)
        uniform = bool(leaves) and all(leaf == leaves[0] for leaf in leaves)
        # Records are packed (no padding), so a record of equal leaves is a flat run of that dtype.
        self.flat_dtype = leaves[0] if uniform else np.dtype(np.uint8)
        self.flat_size = self.dtype.itemsize // self.flat_dtype.itemsize

    def __getstate__(self) -> dict:  # the reader is closures: rebuilt where the layout is unpickled (a worker)
        return {k: v for k, v in self.__dict__.items() if k != "_read"}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._read = self._reader()

    def _reader(self) -> Reader:
        return _reader(self.space, (), {path: k for k, path in enumerate(self.loose_paths)})

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

    def read(self, batch: np.ndarray, copy: bool = False, loose: Sequence[tuple] | None = None) -> Any:
        """The batch in Gymnasium's batched shape: views into ``batch``, or contiguous copies of each leaf.

        ``loose``: the batch's values of each loose leaf (a tuple of one value per row, in :attr:`loose` order).
        """
        if not self.structured:
            return batch.copy() if copy else batch
        if self.loose and (loose is None or len(loose) != len(self.loose)):
            self._loose_missing(loose)
        if copy and loose:  # (a Text leaf's strs need no copy: deepcopy would walk them to give them back)
            loose = [v if all(type(x) in _IMMUTABLE for x in v) else copying.deepcopy(v) for v in loose]
        return self._read(batch, _copied if copy else _as_is, loose or ())

    def item(self, batch: np.ndarray, index: int, loose: Sequence[Any] | None = None) -> Any:
        """The single value at row ``index``, Gymnasium-shaped (views into ``batch``); ``loose``: its loose leaves'
        values (in :attr:`loose` order)."""
        if not self.structured:
            return batch[index]
        if self.loose and (loose is None or len(loose) != len(self.loose)):
            self._loose_missing(loose)
        return self._read(batch, lambda array: array[index], loose or ())

    def _loose_missing(self, loose: Sequence[Any] | None) -> None:
        raise ConfigError(
            f"{self.space} has {len(self.loose)} loose leaves (at {[list(p) for p in self.loose_paths]}), which the "
            f"records do not hold: pass their values as loose= (one entry per leaf, in Layout.loose order), got "
            f"{'none' if loose is None else len(loose)}"
        )

    def write(self, batch: np.ndarray, index: Any, value: Any) -> None:
        """Store ``value`` (one value, or a batch when ``index`` selects several rows) at ``batch[index]`` (its loose
        leaves, if any, are not stored: :meth:`loose_values` reads them)."""
        if self.structured:
            _write_leaves(_leaf_views(self.space, batch, ()), index, value)
        else:
            batch[index] = value

    def loose_values(self, value: Any) -> tuple:
        """The values of ``value``'s loose leaves, in :attr:`loose` order."""
        return tuple(_at(value, path) for path in self.loose_paths)

    def row_writer(self, batch: np.ndarray, sink: dict[int, tuple] | None = None) -> Callable[[int, Any], None]:
        """A fast ``write(row, value)`` for one value at a time into ``batch``, with every leaf's view made once;
        the loose leaves' values go to ``sink[row]`` (required when the space has loose leaves).

        What an engine calls per env per step: no dispatch and no field views built per call.
        """
        if not self.structured:
            return batch.__setitem__  # numpy's own: no Python frame per call
        leaves = _leaf_views(self.space, batch, ())
        if self.loose:
            if sink is None:
                raise ValueError("a space with loose leaves needs a sink for their values")
            paths = self.loose_paths

            def write_with_loose(row: int, value: Any) -> None:
                _write_leaves(leaves, row, value)
                sink[row] = tuple(_at(value, path) for path in paths)

            return write_with_loose

        def write_structured(row: int, value: Any) -> None:
            _write_leaves(leaves, row, value)

        return write_structured

    def leaf_views(self, batch: np.ndarray) -> list[tuple[Path, tuple[int, ...], np.ndarray]]:
        """``(path, sizes, view)`` for every fixed-size leaf of ``batch``: ``value[path[0]][path[1]]...`` is stored
        in row ``i`` of ``view`` for the value in row ``i`` of ``batch``, and ``sizes[k]`` is how many keys or items
        the Dict or Tuple that ``path[k]`` indexes has (the loose leaves are not among them)."""
        return [(path, _sizes(self.space, path), view) for path, view in _leaf_views(self.space, batch, ())]

    def writer_leaves(self, batch: np.ndarray) -> list[tuple[Path, tuple[int, ...], np.ndarray | None]]:
        """What the C writer (``shoal.vector._rows.RowWriter``) takes: :meth:`leaf_views`, then ``(path, sizes,
        None)`` for each loose leaf, whose path it walks (checking the containers on it) but whose value it does not
        store (:meth:`loose_values` reads those)."""
        loose = [(path, _sizes(self.space, path), None) for path in self.loose_paths]
        return [*self.leaf_views(batch), *loose]

    def check_flattenable(self) -> None:
        """Raise :class:`ConfigError` naming the first leaf that cannot be flattened, if any."""
        record_dtype(self.space)

    def flat(self, batch: np.ndarray) -> np.ndarray:
        """The batch as a 2-D ``(n, flat_size)`` array of ``flat_dtype``, a view when ``batch`` is contiguous."""
        n = batch.shape[0]
        return np.ascontiguousarray(batch).view(self.flat_dtype).reshape(n, self.flat_size)

    def flat_space(self, n: int) -> spaces.Box:
        """The space of :meth:`flat`'s batches of ``n``: a Box over ``flat_dtype``'s whole range (a flat row holds
        leaves of different bounds, or their bytes as ``uint8``)."""
        dtype = self.flat_dtype
        low: float
        high: float
        if dtype.kind in "iu":
            low, high = np.iinfo(dtype).min, np.iinfo(dtype).max
        elif dtype.kind == "b":
            low, high = 0, 1
        else:
            low, high = -np.inf, np.inf
        return spaces.Box(low, high, (n, self.flat_size), dtype)

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
        return f"Layout({self.space}, nbytes={self.nbytes}, loose={len(self.loose)})"
