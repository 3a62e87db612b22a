"""Flatten/unflatten round trips over generated nested spaces (hypothesis)."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.vector.utils import batch_space, concatenate, create_empty_array
from helpers import assert_same
from hypothesis import given, settings
from hypothesis import strategies as st

from shoal.errors import ConfigError
from shoal.spaces import Layout, is_flattenable

DTYPES = [np.float32, np.float64, np.uint8, np.int16, np.int32, np.int64]
shapes = st.lists(st.integers(1, 3), min_size=0, max_size=3).map(tuple)
leaves = st.one_of(
    st.builds(lambda d, s: spaces.Box(0, 50, s, d), st.sampled_from(DTYPES), shapes),
    st.builds(lambda n, start: spaces.Discrete(n, start=start), st.integers(1, 9), st.integers(-3, 3)),
    st.builds(lambda v: spaces.MultiDiscrete(v), st.lists(st.integers(1, 6), min_size=1, max_size=4)),
    st.builds(lambda n: spaces.MultiBinary(n), st.integers(1, 5)),
)
trees = st.recursive(
    leaves,
    lambda sub: st.one_of(
        st.dictionaries(st.text("abcxyz", min_size=1, max_size=3), sub, min_size=1, max_size=3).map(spaces.Dict),
        st.lists(sub, min_size=1, max_size=3).map(lambda xs: spaces.Tuple(tuple(xs))),
    ),
    max_leaves=6,
)


@settings(max_examples=80, deadline=None)
@given(space=trees, n=st.integers(1, 4), seed=st.integers(0, 2**16))
def test_write_read_flat_unflatten_round_trip(space, n, seed):
    space.seed(seed)
    values = [space.sample() for _ in range(n)]
    layout = Layout(space)
    batch = layout.empty(n)
    for i, v in enumerate(values):
        layout.write(batch, i, v)
    expected = concatenate(space, values, create_empty_array(space, n))
    assert_same(layout.read(batch, copy=True), expected)
    for i, v in enumerate(values):
        assert_same(layout.item(batch, i), _as_stored(space, v))
    flat = layout.flat(batch)
    assert flat.shape == (n, layout.flat_size) and flat.dtype == layout.flat_dtype
    assert_same(layout.unflatten(flat.copy()), expected)
    assert batch_space(space, n).contains(layout.read(batch, copy=True))


def _as_stored(space, value):
    """A sampled value as it reads back from a record (scalars become numpy scalars of the space dtype)."""
    if isinstance(space, spaces.Dict):
        return {k: _as_stored(s, value[k]) for k, s in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return tuple(_as_stored(s, v) for s, v in zip(space.spaces, value))
    return np.asarray(value, dtype=space.dtype)[()]


def test_reading_records_of_a_space_with_loose_leaves_needs_their_values():
    space = spaces.Dict({"x": spaces.Box(0, 1, (2,), np.float32), "t": spaces.Text(5)})
    layout = Layout(space)
    batch = layout.empty(3)
    layout.write(batch, slice(None), {"x": np.full((3, 2), 0.5, np.float32), "t": ("a", "b", "c")})
    read = layout.read(batch, loose=[("a", "b", "c")])
    assert read["t"] == ("a", "b", "c") and np.array_equal(read["x"], np.full((3, 2), 0.5, np.float32))
    assert layout.item(batch, 1, ("b",))["t"] == "b"
    with pytest.raises(ConfigError, match=r"1 loose leaves \(at \[\['t'\]\]\).*pass their values as loose=.*got none"):
        layout.read(batch)
    with pytest.raises(ConfigError, match=r"has 1 loose leaves .*got 2"):
        layout.item(batch, 0, ("a", "b"))


def test_uniform_leaves_flatten_to_their_dtype():
    layout = Layout(spaces.Dict({"a": spaces.Box(0, 1, (2,), np.float32), "b": spaces.Box(0, 1, (3,), np.float32)}))
    assert (layout.flat_dtype, layout.flat_size) == (np.float32, 5)
    assert Layout(spaces.Tuple((spaces.Discrete(2), spaces.Box(0, 1, (1,), np.float32)))).flat_dtype == np.uint8


def test_unflattenable_spaces_are_named():
    assert not is_flattenable(spaces.Text(5))
    layout = Layout(spaces.Dict({"ok": spaces.Discrete(2), "bad": spaces.Tuple((spaces.Text(5), spaces.Discrete(3)))}))
    assert layout.loose_paths == [("bad", 0)] and layout.dtype.names == ("bad", "ok")
    with pytest.raises(ConfigError, match=r"Text at \['bad'\]\[0\] has no fixed size, so it cannot be flattened"):
        layout.check_flattenable()
    with pytest.raises(ConfigError, match=r"expected a flat batch of shape \(n, 4\)"):
        Layout(spaces.Box(0, 1, (4,), np.float32)).unflatten(np.zeros((2, 3), np.float32))
