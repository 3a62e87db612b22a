"""Checks of what an env returns (observations, rewards, flags) against its spaces, before anything is written.

numpy would broadcast an observation of shape ``(1,)`` into a ``(4,)`` row, store ``None`` as NaN and cast a float
frame into ``uint8`` without a word; an env that does any of that is a bug the user must hear about, with the env
named. The engine (:mod:`shoal.vector.gym_engine`) runs these full checks on every step or reset whose results its
C writer (:mod:`shoal.vector._rows`) does not take as they are: it takes only values these checks accept, of the
leaf's shape, in the forms envs commonly return (arrays, lists and tuples of numbers or of arrays, Python and numpy
scalars), so the checks cost nothing on their steps. They accept what numpy casts as the same kind, as Gymnasium's
vector envs store it (a Python int for a Discrete, float64 for a float32 Box, int64 for an int32 one with every value
in its range, a list of the right shape), and raise :class:`~shoal.errors.EnvOutputError` for the rest.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Callable

import numpy as np
from gymnasium import spaces

from shoal.errors import EnvOutputError
from shoal.spaces import FIXED_LEAVES, Layout, path_text

_BOOLS = (bool, np.bool_)
_NUMBERS = (int, float, np.float64, np.float32, np.float16, np.int64, np.int32, np.int16, np.int8, np.uint8,
            np.uint16, np.uint32, np.uint64, *_BOOLS)
"""What a reward may be: a bool too (Gymnasium's ``SupportsFloat``; it is 0.0 or 1.0 without loss, as Gymnasium's
vector envs store it)."""


class Rejected(Exception):
    """A value does not fit: ``what`` says what was expected and what came."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what


def _describe(value: Any) -> str:
    if value is None:
        return "None"
    if isinstance(value, np.ndarray):
        return f"an array of shape {value.shape} and dtype {value.dtype}"
    return f"{type(value).__name__} {value!r:.80}"


def _scalar_types(dtype: np.dtype, shape: tuple[int, ...]) -> frozenset[type]:
    """The number types a leaf of ``shape`` (only ``()``: a Discrete, a 0-d Box) and ``dtype`` may also come as,
    which store without loss: its numpy scalar and the Python number of its kind."""
    if shape:
        return frozenset()
    python = {int} if dtype.kind in "iu" else {float} if dtype.kind == "f" else set()
    return frozenset({dtype.type} | python)


def leaf_check(space: spaces.Space, prefix: str = "") -> Callable[[Any], Any]:
    """``check(value)``: ``value`` itself if it can be stored in a record of ``space`` (a fixed-size leaf) without
    loss, else :class:`Rejected` (its text after ``prefix``)."""
    dtype = np.dtype(space.dtype)
    assert space.shape is not None  # a fixed-size leaf
    shape = tuple(space.shape)
    integer = dtype.kind in "iub"
    scalars = _scalar_types(dtype, shape)

    def full(value: Any) -> Any:
        if value is None:
            raise Rejected(f"expected a value of {space}, got None")
        array = np.asarray(value)
        if array.dtype == object or array.dtype.kind not in "biuf":
            raise Rejected(f"expected numbers of dtype {dtype} for {space}, got {_describe(value)}")
        if array.shape != shape:
            raise Rejected(f"expected shape {shape} for {space}, got {_describe(value)}")
        if array.dtype != dtype:
            if not np.can_cast(array.dtype, dtype, casting="same_kind"):
                raise Rejected(f"expected dtype {dtype} for {space}, got {_describe(value)}, which would be cast")
            if integer and array.size and array.dtype.kind in "iu" and not np.can_cast(array.dtype, dtype, "safe"):
                info = np.iinfo(dtype) if dtype.kind != "b" else None
                low, high = (0, 1) if info is None else (info.min, info.max)
                if array.min() < low or array.max() > high:
                    raise Rejected(f"expected values in [{low}, {high}] (dtype {dtype}) for {space}, got "
                                   f"{_describe(value)} with values up to {array.max()}")
        return value

    def check(value: Any) -> Any:
        if type(value) is np.ndarray and value.shape == shape and value.dtype == dtype or type(value) in scalars:
            return value  # what a well-behaved env returns: nothing more to look at
        try:
            return full(value)
        except Rejected as bad:
            raise Rejected(prefix + bad.what) from None

    return check


def observation_check(layout: Layout) -> Callable[[Any], None]:
    """``check(obs)`` for one observation of ``layout.space``: :class:`Rejected` if it would not be stored as is
    (containers must hold their keys/items; fixed-size leaves as in :func:`leaf_check`; loose leaves are taken as
    they come, as Gymnasium does)."""
    return _container_check(layout.space, ())


def _container_check(space: spaces.Space, path: tuple) -> Callable[[Any], None]:
    where = path_text(path)
    if isinstance(space, FIXED_LEAVES):
        return leaf_check(space, f"observation{where}: ")
    if isinstance(space, spaces.Dict):
        subs = {key: _container_check(sub, path + (key,)) for key, sub in space.spaces.items()}
        keys = set(subs)

        def check_dict(value: Any) -> None:
            if not isinstance(value, Mapping) or set(value) != keys:
                got = sorted(value) if isinstance(value, Mapping) else _describe(value)
                raise Rejected(f"observation{where}: expected a dict with keys {sorted(keys)}, got {got}")
            for key, sub in subs.items():
                sub(value[key])

        return check_dict
    if isinstance(space, spaces.Tuple):
        items = [_container_check(sub, path + (i,)) for i, sub in enumerate(space.spaces)]

        def check_tuple(value: Any) -> None:
            if not isinstance(value, (tuple, list)) or len(value) != len(items):
                raise Rejected(f"observation{where}: expected a tuple of {len(items)} items, got {_describe(value)}")
            for sub, item in zip(items, value):
                sub(item)

        return check_tuple
    return lambda value: None  # a loose leaf (Text, Graph, custom): carried as it is


def check_reward(reward: Any) -> None:
    """:class:`Rejected` unless ``reward`` is one real number."""
    if type(reward) in _NUMBERS:
        return
    if isinstance(reward, (np.ndarray, np.generic)) and reward.shape == () and reward.dtype.kind in "biuf":
        return
    raise Rejected(f"expected the reward as one real number, got {_describe(reward)}")


def check_flag(flag: Any, name: str) -> None:
    """:class:`Rejected` unless ``flag`` is a bool (Python's or numpy's), or an int 0 or 1, which stores as one
    without loss (Gymnasium's env checker warns and its vector envs take it; an older env may end episodes so)."""
    if type(flag) in _BOOLS:
        return
    if isinstance(flag, (np.ndarray, np.generic)) and flag.shape == () and flag.dtype == np.bool_:
        return
    if isinstance(flag, (int, np.integer)) and (flag == 0 or flag == 1):
        return
    raise Rejected(f"expected {name} as a bool (or an int 0 or 1), got {_describe(flag)}")


STEP_RESULT = ("observation", "reward", "terminated", "truncated", "info")
RESET_RESULT = ("observation", "info")


def unexpected_result(result: Any, names: tuple[str, ...]) -> Rejected:
    """What is wrong with ``result``, which is not the tuple of ``names`` Gymnasium's ``step`` or ``reset`` returns
    (the caller has seen that it is not: a tuple of that length)."""
    expected = f"expected a tuple ({', '.join(names)})"
    if not isinstance(result, (tuple, list)):
        got = _describe(result)
        if names == RESET_RESULT:  # gym < 0.26: reset() returned the observation alone
            got += " (the observation alone? Gymnasium's reset returns (observation, info))"
        return Rejected(f"{expected}, got {got}")
    got = f"a {type(result).__name__} of {len(result)} values"
    if names == STEP_RESULT and len(result) == 4:  # gym < 0.26
        got += " (the old Gym API's (observation, reward, done, info)? Gymnasium's step returns five)"
    return Rejected(f"{expected}, got {got}")


def rejected(env_id: int, env: Any, bad: Rejected, during: str) -> EnvOutputError:
    """The error for env ``env_id`` (``env``) returning ``bad`` data from ``during`` (``"step"``, ``"reset"``)."""
    spec = getattr(env, "spec", None)
    name = getattr(spec, "id", None) or type(getattr(env, "unwrapped", env)).__name__
    return EnvOutputError(f"env {env_id} ({name}) returned bad data from {during}(): {bad.what}", env_id=env_id)
